//! What impd's procedures take and answer, as far as the daemon reads them (spec §4–§6).
//! Unknown fields are ignored (impd adds fields freely); dates stay the ISO strings impd sends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The part of `system.info` the daemon needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemInfo {
    /// impd's version, e.g. `"0.30.1"` (empty if impd did not say).
    pub version: String,
    /// What this impd supports.
    pub features: Features,
}

/// Feature flags of one impd. A flag is `true` only when impd sent literally `true` (spec §4):
/// an impd from before flags sends no `features`, and absent, `false` or any other value all
/// mean "not supported".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// `sessionOffsets`: impd can carry output offsets (each session's `continuity` still
    /// decides).
    pub session_offsets: bool,
    /// `leases`: `leases.*` exist and imps carry `leases`.
    pub leases: bool,
    /// `execRequire`: an `/exec` start honours `require` (impd 0.30.0+). Without it, a start
    /// with `require` must not be sent at all (an older impd would drop the field and run it).
    pub exec_require: bool,
    /// `grantableTokens`: tokens may carry a `grantable` secret list (impd 0.27.0+).
    pub grantable_tokens: bool,
    /// `secretRebind`: `secrets.add` takes `rebind` (impd 0.27.0+).
    pub secret_rebind: bool,
    /// `oauthSecrets`: secrets of kind `oauth` exist.
    pub oauth_secrets: bool,
}

impl SystemInfo {
    /// Reads `system.info`'s output.
    pub fn from_output(output: &Value) -> SystemInfo {
        let flag = |name: &str| output["features"][name] == Value::Bool(true);
        SystemInfo {
            version: output["version"].as_str().unwrap_or_default().to_string(),
            features: Features {
                session_offsets: flag("sessionOffsets"),
                leases: flag("leases"),
                exec_require: flag("execRequire"),
                grantable_tokens: flag("grantableTokens"),
                secret_rebind: flag("secretRebind"),
                oauth_secrets: flag("oauthSecrets"),
            },
        }
    }
}

/// An imp as `imps.get`/`create`/`sleep`/`wake` answer it (spec §5).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Imp {
    /// Unique per incarnation: a new imp under a reused name gets a new id, so a cached imp
    /// must be compared by id.
    pub id: String,
    /// The imp's name.
    pub name: String,
    /// `creating` | `running` | `sleeping` | `stopped` | `error` (kept as impd's word).
    pub state: String,
    /// `{leases: Lease[], otherCount}`, filtered for the caller; absent on an impd without
    /// leases.
    #[serde(default)]
    pub leases: Option<Value>,
    /// Latest end of live leases/holds (ISO time).
    #[serde(default)]
    pub hold_until: Option<String>,
    /// Session count as impd last saw it.
    #[serde(default)]
    pub sessions: Option<u64>,
    /// Why the last or next boot is cold.
    #[serde(default)]
    pub cold_boot_reason: Option<String>,
    /// Set in state `error`.
    #[serde(default)]
    pub error: Option<String>,
    /// The image the imp runs.
    #[serde(default)]
    pub image: Option<String>,
    /// Memory size in MiB.
    #[serde(default)]
    pub memory_mib: Option<u64>,
}

/// Input of `imps.create`: the daemon only ever chooses these three (spec §15).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateImp {
    /// The imp's name (`^[a-z][a-z0-9-]{0,30}$`).
    pub name: String,
    /// Image; impd's default when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Memory in MiB (≥ 128); impd's default when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u32>,
}

/// A lease as `leases.acquire`/`renew` answer it (spec §6).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Lease {
    /// The imp's name.
    pub name: String,
    /// `{principal, display, label}`; kept open because only the label is ours.
    #[serde(default)]
    pub owner: Value,
    /// When it ends (ISO time); `None` means no end.
    #[serde(default)]
    pub until: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_flag_counts_only_when_literally_true() {
        let info = SystemInfo::from_output(&json!({
            "version": "0.30.1",
            "features": {"sessionOffsets": true, "leases": "true", "execRequire": 1,
                         "grantableTokens": true, "secretRebind": null, "oauthSecrets": {}}
        }));
        assert_eq!(info.version, "0.30.1");
        assert!(info.features.session_offsets);
        assert!(!info.features.leases);
        assert!(!info.features.exec_require);
        assert!(info.features.grantable_tokens);
        assert!(!info.features.secret_rebind);
        assert!(!info.features.oauth_secrets);
    }

    #[test]
    fn no_features_object_means_nothing_supported() {
        let info = SystemInfo::from_output(&json!({"version": "0.20.0"}));
        assert_eq!(info.features, Features::default());
        let odd = SystemInfo::from_output(&json!({"version": "0.20.0", "features": null}));
        assert_eq!(odd.features, Features::default());
    }

    #[test]
    fn imp_parses_with_and_without_leases() {
        let imp: Imp = serde_json::from_value(json!({
            "id": "i1", "name": "atc-x", "state": "running", "image": "base",
            "memoryMib": 1024, "createdAt": "2026-01-01T00:00:00.000Z",
            "leases": {"leases": [], "otherCount": 0}, "holdUntil": "2026-01-01T00:10:00.000Z"
        }))
        .unwrap();
        assert_eq!(imp.state, "running");
        assert_eq!(imp.leases.unwrap()["otherCount"], 0);
        assert_eq!(imp.memory_mib, Some(1024));
        let old: Imp =
            serde_json::from_value(json!({"id": "i1", "name": "atc-x", "state": "sleeping"}))
                .unwrap();
        assert!(old.leases.is_none());
    }

    #[test]
    fn create_input_leaves_out_unset_fields() {
        let v = serde_json::to_value(CreateImp {
            name: "atc-x".into(),
            image: None,
            memory_mib: Some(2048),
        })
        .unwrap();
        assert_eq!(v, json!({"name": "atc-x", "memoryMib": 2048}));
    }

    #[test]
    fn lease_parses_null_until() {
        let l: Lease = serde_json::from_value(json!({
            "name": "atc-x", "owner": {"principal": "root", "display": "root", "label": "atc-d"},
            "until": null
        }))
        .unwrap();
        assert_eq!(l.until, None);
        assert_eq!(l.owner["label"], "atc-d");
    }
}
