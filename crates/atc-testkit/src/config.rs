//! The config every test daemon runs with: the agents tests spawn besides the built-ins, short
//! timings, and an imp target on the simulator.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use atc::config::{AgentConfig, Config};
use serde_json::Value;

/// Agents every test daemon knows besides the built-ins.
pub fn test_agents() -> BTreeMap<String, AgentConfig> {
    let mut agents = BTreeMap::new();
    let agent = |bin: &str, args: &[&str]| AgentConfig {
        bin: bin.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        label: None,
        kind: None,
        ..Default::default()
    };
    // The load tests' echo: thousands of idle cats must not each ask for their user.
    agents.insert(
        "cat".into(),
        AgentConfig {
            attention: Some(atc::config::attention::AttentionMode::None),
            ..agent("cat", &[])
        },
    );
    // No prompt: output then ends exactly where a command's output ends, so a screen read
    // after a marker cannot race the next prompt.
    let mut sh = agent("/bin/sh", &[]);
    sh.env.insert("PS1".into(), String::new());
    agents.insert("sh".into(), sh);
    // Ignores SIGHUP: only the SIGKILL after the grace can end it.
    agents.insert(
        "stubborn".into(),
        agent(
            "/bin/sh",
            &["-c", "trap '' HUP; echo ready; while :; do sleep 1; done"],
        ),
    );
    agents.insert(
        "ghost".into(),
        agent("definitely-not-installed-atc-test", &[]),
    );
    agents
}

/// The config tests run with: test agents, short timings.
pub fn test_config() -> Config {
    let mut c = Config {
        agents: test_agents(),
        ..Config::default()
    };
    c.timings.kill_grace = Duration::from_millis(300);
    c.timings.exit_drain = Duration::from_millis(100);
    c.timings.shutdown_grace = Duration::from_secs(3);
    c
}

/// `targets` for `base` (a test config) with `local` and an imp target `box`, the default,
/// on the impd at `url` with its token in `token_file`; `options` join the `box` entry.
pub fn with_imp_target(base: Config, url: &str, token_file: &Path, options: Value) -> Config {
    let mut entry = serde_json::json!({"provider": "imp", "url": url, "tokenFile": token_file});
    if let (Some(e), Value::Object(more)) = (entry.as_object_mut(), options) {
        e.extend(more);
    }
    let text = serde_json::json!({
        "targets": {"local": {"provider": "local-pty"}, "box": entry},
        "defaultTarget": "box",
    })
    .to_string();
    let parsed = Config::from_json(text.as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        targets: parsed.targets,
        ..base
    }
}
