//! The daemon's cgroups for its local sessions, found once at start: which mechanism the
//! machine gives it (logged once), and what a daemon before it left there swept away.

use std::path::Path;
use std::sync::Arc;

use crate::config::session_limits::LimitsPolicy;
use crate::providers::local::cgroup::{tag_for, Mechanism, SessionCgroups};

/// The sessions' cgroups under `root` (config's `cgroupRoot`; `None`: turned off), for the
/// daemon of `state_dir`. Logs once which mechanism it has, and ends and removes the session
/// cgroups a daemon killed without a stop left behind, with whatever still runs in them.
pub fn take(
    root: Option<&Path>,
    state_dir: &Path,
    policy: &LimitsPolicy,
) -> Option<Arc<SessionCgroups>> {
    let found = match root {
        None => Err("cgroupRoot is null in config".to_string()),
        Some(root) => SessionCgroups::detect(root, &tag_for(state_dir)),
    };
    match found {
        Ok(cgroups) => {
            let (mechanism, parent) = match cgroups.mechanism() {
                Mechanism::V1(parent) => ("cgroup v1", parent),
                Mechanism::V2(parent) => ("cgroup v2", parent),
            };
            tracing::info!(mechanism, parent = %parent.display(),
                "local sessions run in cgroups of their own; limits are enforced");
            let swept = cgroups.sweep();
            if swept > 0 {
                tracing::warn!(
                    swept,
                    "ended and removed session cgroups an earlier daemon left"
                );
            }
            Some(Arc::new(cgroups))
        }
        Err(why) => {
            let configured = !policy.is_empty();
            tracing::warn!(mechanism = "none", %why, limits_configured = configured,
                "local sessions run without cgroups: a spawn asking for limits is refused \
                 (no_cgroups), and limits set in config do not apply");
            None
        }
    }
}
