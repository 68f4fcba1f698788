//! The settings file atc hands each Claude session with `--settings` (spec §9.3): atc's
//! reporter on the hooks the attention state machine reads, and a statusline command.
//!
//! The file is per session (under `<state>/claude/`) and rewritten on every start, so a
//! daemon whose binary moved still installs a working reporter. Settings from the agent's
//! config are merged in: their hooks run after atc's for the same event, every other key is
//! kept, and atc's statusline wins (it is what reports the agent's status line to atc).

use std::path::{Path, PathBuf};

use atc_protocol::SessionId;
use serde_json::{json, Map, Value};

use super::shell_quote;

/// The hooks atc installs; each runs `atc hook-report`, which reads the hook JSON on stdin.
pub const HOOKED_EVENTS: &[&str] = &[
    "SessionStart",
    "Notification",
    "Stop",
    "UserPromptSubmit",
    "SessionEnd",
];

/// The settings for one session. `atc` is the program hooks run; `status_file` the fleet
/// status the statusline prints from.
pub fn settings(atc: &Path, status_file: &Path, configured: Option<&Map<String, Value>>) -> Value {
    let report = format!("{} hook-report", shell_quote(&atc.display().to_string()));
    let statusline = format!(
        "{report} --event Statusline --status-file {}",
        shell_quote(&status_file.display().to_string())
    );
    let mut out = configured.cloned().unwrap_or_default();
    let theirs = match out.remove("hooks") {
        Some(Value::Object(h)) => h,
        _ => Map::new(),
    };
    let mut hooks = Map::new();
    for event in HOOKED_EVENTS {
        let mut entries = vec![json!({"hooks": [{"type": "command", "command": report}]})];
        if let Some(Value::Array(more)) = theirs.get(*event) {
            entries.extend(more.iter().cloned());
        }
        hooks.insert(event.to_string(), Value::Array(entries));
    }
    for (event, entries) in theirs {
        hooks.entry(event).or_insert(entries);
    }
    out.insert("hooks".into(), Value::Object(hooks));
    out.insert(
        "statusLine".into(),
        json!({"type": "command", "command": statusline}),
    );
    Value::Object(out)
}

/// Where session `id`'s settings file lives.
pub fn path(state_dir: &Path, id: &SessionId) -> PathBuf {
    state_dir.join("claude").join(format!("{id}.json"))
}

/// Writes `contents` as the settings file of session `id` under `state_dir`, atomically.
pub fn write(state_dir: &Path, id: &SessionId, contents: &Value) -> std::io::Result<PathBuf> {
    let dir = state_dir.join("claude");
    std::fs::create_dir_all(&dir)?;
    let path = path(state_dir, id);
    let tmp = dir.join(format!(".{id}.json.tmp"));
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(contents).unwrap_or_default(),
    )?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atc_hooks_come_first_and_configured_ones_follow() {
        let configured = json!({
            "permissions": {"allow": ["Bash(ls)"]},
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]
            },
            "statusLine": {"type": "command", "command": "mine"}
        });
        let s = settings(
            Path::new("/opt/my atc/atc"),
            Path::new("/state/status.json"),
            configured.as_object(),
        );
        let report = "'/opt/my atc/atc' hook-report";
        for event in HOOKED_EVENTS {
            assert_eq!(
                s["hooks"][event][0]["hooks"][0]["command"], report,
                "{event}"
            );
        }
        assert_eq!(
            s["hooks"]["Stop"][1]["hooks"][0]["command"],
            "notify-send done"
        );
        assert_eq!(s["hooks"]["PreToolUse"][0]["matcher"], "Bash");
        assert_eq!(s["permissions"]["allow"][0], "Bash(ls)");
        assert_eq!(
            s["statusLine"]["command"],
            format!("{report} --event Statusline --status-file /state/status.json")
        );
    }
}
