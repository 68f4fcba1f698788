//! One `agents` entry of the config: read on its own ([`raw_agent`]), so a bad entry is a
//! problem of that agent and not of the file, then checked ([`checked_agent`], spec §9.3).

use super::agent_kind::AgentKind;
use super::attention::AttentionMode;
use super::{agent_auth, raw, AgentConfig, ClassifyDetail, AUTH_BINDING_INVALID};

/// One config agent, checked (spec §9.3): `kind` is an [`AgentKind`] when given, `bin`
/// defaults to the kind, and Claude-only keys stay on Claude agents. The error is the detail
/// of an `agent_invalid` problem (or `auth_binding_invalid` for its `auth`); it names keys,
/// never values.
pub(super) fn checked_agent(
    id: &str,
    raw: raw::RawAgent,
) -> Result<AgentConfig, (&'static str, String)> {
    let invalid = |detail: &str| ("agent_invalid", detail.to_string());
    if id.is_empty() {
        return Err(invalid("an agent needs a non-empty id"));
    }
    let configured = match raw.kind.as_deref().map(AgentKind::parse) {
        None => None,
        Some(Some(kind)) => Some(kind),
        Some(None) => {
            return Err(invalid(
                "'kind' must be claude, codex or grok (or left out for other commands)",
            ))
        }
    };
    let kind = configured.or_else(|| AgentKind::parse(id));
    let bin = match (raw.bin.trim().is_empty(), kind) {
        (false, _) => raw.bin,
        (true, Some(k)) => k.as_str().to_string(),
        (true, None) => {
            return Err(invalid(
                "an agent that is not claude, codex or grok needs a 'bin'",
            ))
        }
    };
    let claude = kind == Some(AgentKind::Claude);
    if !claude && (raw.settings.is_some() || raw.base_url.is_some()) {
        return Err(invalid(
            "'settings' and 'baseURL' apply to claude agents only",
        ));
    }
    let settings = match raw.settings {
        None => None,
        Some(serde_json::Value::Object(m)) => Some(m),
        Some(_) => return Err(invalid("'settings' must be an object")),
    };
    if let Some((field, min, max)) = raw.limits.as_ref().and_then(|l| l.out_of_bounds()) {
        return Err((
            "agent_invalid",
            format!("'limits.{field}' must be between {min} and {max}"),
        ));
    }
    let attention = match raw.attention.as_deref().map(AttentionMode::parse) {
        None => None,
        Some(Some(mode)) => Some(mode),
        Some(None) => return Err(invalid("'attention' must be hooks, activity or none")),
    };
    let auth = match &raw.auth {
        None => None,
        Some(value) => Some(
            agent_auth::AgentAuth::from_config(value, kind, &raw.env)
                .map_err(|detail| (AUTH_BINDING_INVALID, detail))?,
        ),
    };
    Ok(AgentConfig {
        bin,
        args: raw.args,
        env: raw.env,
        label: raw.label,
        kind: configured,
        settings,
        models: raw.models,
        base_url: raw.base_url.filter(|u| !u.is_empty()),
        auth,
        limits: raw.limits,
        attention,
    })
}

/// Reads one `agents` entry. The error names the key at fault (an unknown one, or one of the
/// wrong type) and what was expected, never the value.
pub(super) fn raw_agent(entry: serde_json::Value) -> Result<raw::RawAgent, String> {
    let serde_json::Value::Object(fields) = &entry else {
        return Err("an agent entry must be an object".into());
    };
    let whole = match serde_json::from_value::<raw::RawAgent>(entry.clone()) {
        Ok(agent) => return Ok(agent),
        Err(e) => e,
    };
    if whole.to_string().starts_with("unknown field") {
        return Err(whole.classify_detail());
    }
    // serde's error for a wrong type has no path; the key at fault is the one that fails alone.
    let culprit = fields.iter().find_map(|(key, value)| {
        let alone = serde_json::Value::Object([(key.clone(), value.clone())].into_iter().collect());
        serde_json::from_value::<raw::RawAgent>(alone)
            .err()
            .map(|e| (key, e))
    });
    let (key, err) = match &culprit {
        Some((key, err)) => (key.as_str(), err),
        None => return Err(whole.classify_detail()),
    };
    let text = err.to_string();
    Err(match text.rsplit_once(", expected ") {
        // What was expected comes from our own types; what was found is cut at its value.
        Some((_, expected)) => format!("'{key}' must be {expected}"),
        None => format!("'{key}': {}", err.classify_detail()),
    })
}
