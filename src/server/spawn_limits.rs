//! The limits a spawn runs under: config's ceiling for its agent and target, lowered by what
//! it asks, and refused where its target cannot enforce them (see
//! `config::session_limits` for the rules, and `providers::local::cgroup` for the enforcing).

use atc_protocol::SessionLimits;

use super::AppState;
use crate::config::session_limits::{effective, LimitsError};
use crate::providers::targets::Target;

/// The effective limits of a spawn of `agent` on `target`, the refusal chain's answer
/// (`None`: its target was refused, and the refusal answers), given what it `asked`.
///
/// Config's limits on a target that cannot enforce them (a remote one, or a machine without
/// cgroups) do not apply there: the session runs as before, and its descriptor says so by
/// listing none. A spawn that asks for limits there is refused instead, since it asked for
/// something it would not get.
pub fn resolve(
    state: &AppState,
    agent: &str,
    target: Option<&Target>,
    asked: Option<&SessionLimits>,
) -> Result<SessionLimits, LimitsError> {
    let ceiling = state
        .session_limits
        .ceiling(agent, target.and_then(|t| t.limits.as_ref()));
    let limits = effective(asked, &ceiling)?;
    let Some(id) = target.map(|t| t.id.as_str()) else {
        return Ok(limits);
    };
    let provider = state.providers.get(id);
    if provider.is_some_and(|p| p.session_cgroups().is_some()) {
        return Ok(limits);
    }
    if asked.is_some_and(|a| !a.is_empty()) {
        let why = match provider {
            Some(p) if p.remote() => {
                format!("a {} target's sessions run on another host", p.kind())
            }
            _ => "no writable cgroup hierarchy (the daemon's start-up log says why)".to_string(),
        };
        return Err(LimitsError::NoCgroups {
            target: id.to_string(),
            why,
        });
    }
    Ok(SessionLimits::default())
}
