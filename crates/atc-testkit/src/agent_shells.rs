//! `claude`, `codex` and `grok` as plain shells, so a test plays an agent's hooks by typing
//! `atc hook-report` into its session.

use std::collections::BTreeMap;

use atc::config::{AgentConfig, Config};
use serde_json::Value;

use crate::atc_binary::atc_bin;
use crate::config::test_config;
use crate::test_daemon::TestDaemon;

/// The test config with `claude`, `codex` and `grok` as plain shells without a prompt, so a
/// test can run `atc hook-report` inside them as the agents' hooks would.
pub fn agent_shells_config() -> Config {
    let mut config = test_config();
    for kind in ["claude", "codex", "grok"] {
        let mut env = BTreeMap::new();
        env.insert("PS1".to_string(), String::new());
        config.agents.insert(
            kind.into(),
            AgentConfig {
                bin: "/bin/sh".into(),
                // The shell ignores what atc appends per kind (Claude's --settings, Grok's
                // --no-leader): they land in "$@" of a script that only execs a shell.
                args: vec!["-c".into(), "exec /bin/sh".into(), "agent".into()],
                env,
                // They play agents whose hooks are installed: the hooks drive the state,
                // and the typing that plays them does not (as it would under `activity`).
                attention: Some(atc::config::attention::AttentionMode::Hooks),
                ..Default::default()
            },
        );
    }
    config
}

/// A daemon with [`agent_shells_config`] on a fresh dir (returned, so a test can restart on it).
pub async fn agent_shells_daemon() -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    (
        TestDaemon::start_on(tmp.path(), agent_shells_config()).await,
        tmp,
    )
}

/// Runs `atc hook-report` inside the session with this hook JSON on stdin (single quotes in
/// the JSON would end the shell word: tests keep them out).
pub async fn hook(d: &TestDaemon, id: &str, payload: Value) {
    let payload = payload.to_string();
    assert!(
        !payload.contains('\''),
        "a hook payload with a single quote"
    );
    let cmd = format!(
        "printf '%s' '{}' | {} hook-report",
        payload,
        atc_bin().display()
    );
    d.submit(id, &cmd).await;
}
