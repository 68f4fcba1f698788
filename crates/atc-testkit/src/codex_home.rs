//! A private `HOME` and `CODEX_HOME` for one test's real Codex, prepared so that it runs a turn
//! against the fake Responses API on loopback and reaches nothing else: its own model provider
//! (Codex 0.171.0 otherwise starts at its sign-in screen, and its built-in OpenAI provider
//! tries OpenAI's host over a WebSocket), the test's folder trusted, and the background
//! traffic it would make turned off (the plugin marketplace `git ls-remote` of GitHub,
//! analytics, feedback, the update check).
//!
//! atc's hooks are installed the way README tells users to (hooks pointing at
//! `atc hook-report`), and trusted the way Codex's "Trust all and continue" answer records it,
//! so the session starts at its prompt rather than at Codex's hook review.
//!
//! Codex 0.171.0 also starts an app-server daemon of its own (setsid, outliving the session
//! and atc). [`CodexHome`]'s drop ends every process whose environment names this
//! `CODEX_HOME`, so nothing a test started outlives it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The variable the fake provider's API key is read from (`env_key`).
pub const KEY_VAR: &str = "ATC_TEST_OPENAI_KEY";

/// The model the private config names (the fake answers any).
pub const MODEL: &str = "atc-fake-model";

/// The Codex hooks atc maps (src/agents/hooks.rs), with the names Codex records their trust
/// under.
const HOOKS: &[(&str, &str)] = &[
    ("SessionStart", "session_start"),
    ("UserPromptSubmit", "user_prompt_submit"),
    ("PermissionRequest", "permission_request"),
    ("Stop", "stop"),
];

/// Whether Codex may start its app-server daemon (`features.daemon_auto_start`, on by default
/// in 0.171.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppServer {
    /// Codex's default: a setsid `codex app-server` daemon, shared by every Codex of this
    /// `CODEX_HOME`, copied into it (≈400 MB) on first start.
    Daemon,
    /// The app server runs inside each Codex process and ends with it.
    InProcess,
}

/// What the private home is prepared with.
pub struct Setup<'a> {
    /// The fake's base URL (`http://127.0.0.1:<port>`).
    pub fake_url: &'a str,
    /// The folder the session runs in, trusted.
    pub trusted: &'a Path,
    /// The atc binary the hooks run (`None`: no hooks).
    pub atc: Option<&'a Path>,
    /// Whether Codex may start its daemon.
    pub app_server: AppServer,
}

/// A prepared private home; ends the processes that name it when dropped.
pub struct CodexHome {
    /// `HOME`.
    pub home: PathBuf,
    /// `CODEX_HOME`.
    pub codex_home: PathBuf,
}

impl CodexHome {
    /// Writes `home` and `codex_home` (created if missing).
    pub fn prepare(home: &Path, codex_home: &Path, setup: &Setup<'_>) -> CodexHome {
        std::fs::create_dir_all(home).expect("create HOME");
        std::fs::create_dir_all(codex_home).expect("create CODEX_HOME");
        let mut config = format!(
            r#"model = "{MODEL}"
model_provider = "atc-fake"
approval_policy = "on-request"
check_for_update_on_startup = false

[model_providers.atc-fake]
name = "atc fake"
base_url = "{url}/v1"
env_key = "{KEY_VAR}"
wire_api = "responses"
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false
daemon_auto_start = {daemon}

[analytics]
enabled = false

[feedback]
enabled = false

[projects.{trusted}]
trust_level = "trusted"
"#,
            url = setup.fake_url,
            daemon = setup.app_server == AppServer::Daemon,
            trusted = toml_string(&setup.trusted.display().to_string()),
        );
        if let Some(atc) = setup.atc {
            let command = format!("{} hook-report", shell_word(&atc.display().to_string()));
            let hooks_json = codex_home.join("hooks.json");
            let mut hooks = serde_json::Map::new();
            for (event, key) in HOOKS {
                hooks.insert(
                    (*event).into(),
                    serde_json::json!([{"hooks": [{"type": "command", "command": command}]}]),
                );
                config.push_str(&format!(
                    "\n[hooks.state.{}]\ntrusted_hash = \"sha256:{}\"\n",
                    toml_string(&format!("{}:{key}:0:0", hooks_json.display())),
                    trust_hash(key, &command),
                ));
            }
            let text = serde_json::json!({ "hooks": hooks }).to_string();
            std::fs::write(&hooks_json, text).expect("write hooks.json");
        }
        std::fs::write(codex_home.join("config.toml"), config).expect("write config.toml");
        CodexHome {
            home: home.to_path_buf(),
            codex_home: codex_home.to_path_buf(),
        }
    }

    /// The agent's environment: the private dirs and the fake's key.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        env.insert("HOME".into(), self.home.display().to_string());
        env.insert("CODEX_HOME".into(), self.codex_home.display().to_string());
        env.insert(KEY_VAR.into(), "sk-atc-test-not-a-real-key".into());
        env
    }

    /// The thread names Codex recorded in `session_index.jsonl`, oldest first (none while the
    /// file is missing): what a thread's title turn, or a `/rename`, names it.
    pub fn thread_names(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.codex_home.join("session_index.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|entry| entry["thread_name"].as_str().map(str::to_string))
            .collect()
    }

    /// The processes whose environment names this `CODEX_HOME`: pid and command line.
    pub fn processes(&self) -> Vec<(i32, String)> {
        let marker = format!("CODEX_HOME={}", self.codex_home.display());
        let own = std::process::id() as i32;
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid != own)
            .filter(|pid| {
                // A process that ended meanwhile, or another user's, is none of ours.
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == marker.as_bytes()))
            })
            .map(|pid| (pid, command_line(pid)))
            .collect()
    }

    /// Kills every process [`CodexHome::processes`] finds, and answers what it killed.
    pub fn end_processes(&self) -> Vec<(i32, String)> {
        let found = self.processes();
        for (pid, _) in &found {
            // SAFETY: kill(2) on a pid read from /proc; a pid that ended meanwhile is ESRCH.
            let _ = unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        found
    }
}

impl Drop for CodexHome {
    fn drop(&mut self) {
        let ended = self.end_processes();
        if !ended.is_empty() {
            eprintln!("ended Codex processes left behind: {ended:?}");
        }
    }
}

/// `/proc/<pid>/cmdline` with spaces for its NULs ("" once the process is gone).
pub fn command_line(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            String::from_utf8_lossy(&raw)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// The session id of `pid` (`getsid(2)`), or `None` once it is gone.
pub fn session_of(pid: i32) -> Option<i32> {
    // SAFETY: getsid(2) only reads; an ended pid is ESRCH, answered as -1.
    let sid = unsafe { libc::getsid(pid) };
    (sid >= 0).then_some(sid)
}

/// What Codex 0.171.0 records as a hook's `trusted_hash`: SHA-256 of its normalized identity,
/// `{"event_name","hooks":[{"async","command","timeout","type"}]}` with keys sorted, no
/// matcher, and its default timeout of 600 s.
pub fn trust_hash(event_key: &str, command: &str) -> String {
    let identity = serde_json::json!({
        "event_name": event_key,
        "hooks": [{"async": false, "command": command, "timeout": 600, "type": "command"}],
    });
    // Written in sorted order, as Codex's serde_json map keeps them, whether or not this
    // build's serde_json preserves insertion order.
    let digest = Sha256::digest(identity.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.into()).to_string()
}

/// One shell word.
fn shell_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
