//! The agent list: which programs a session may run, and the argv and environment of each.
//!
//! Built in are `shell` (`$SHELL`, else `/bin/sh`) and the agent CLIs `claude`, `codex` and
//! `grok`, which count as installed only when their binary resolves on `PATH`. Every entry of
//! config `agents` joins them (and may replace a built-in of the same id). Spawn options
//! (model, effort) live in [`spawn_options`]; the per-kind argv a harness finally runs with
//! (Claude's settings file, Grok's `--no-leader`, resume flags) in [`launch`].

pub mod agent_error;
pub mod agent_session_id;
pub mod claude_settings;
pub mod codex_notify;
pub mod guest_plan;
pub mod hooks;
pub mod kind;
pub mod launch;
pub mod named_file;
pub mod names;
pub mod report_check;
pub mod spawn_options;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atc_protocol::responses::{AgentCapabilities, AgentEntry};

pub use crate::config::agent_kind::AgentKind;
use crate::config::attention::AttentionMode;
use crate::config::AgentConfig;
pub use agent_error::AgentError;

/// One agent a session can run.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The id clients pass as `agent`.
    pub id: String,
    /// Display label.
    pub label: String,
    /// Program name or path.
    pub bin: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Built in, or from config.
    pub builtin: bool,
    /// `claude`, `codex` or `grok` when it is one of those CLIs (its spawn options and hook
    /// mapping follow); `None` for shells and other commands.
    pub kind: Option<AgentKind>,
    /// Claude: settings merged into the per-session settings file.
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
    /// Explicit role → model map from config.
    pub models: BTreeMap<String, String>,
    /// Claude gateway base URL; `Some` makes the agent a gateway.
    pub base_url: Option<String>,
    /// Broker authentication: the agent runs only in an imp (spec §6).
    pub auth: Option<crate::config::agent_auth::AgentAuth>,
    /// What its sessions' attention state follows (issue 38).
    pub attention: crate::config::attention::AttentionMode,
}

impl Agent {
    /// Whether this is a Claude gateway (a claude-kind agent with a base URL).
    pub fn is_gateway(&self) -> bool {
        self.kind == Some(AgentKind::Claude) && self.base_url.is_some()
    }

    /// The role → model map the listing shows (spec §9.1): the configured map, else for a
    /// gateway the models its environment maps (`ANTHROPIC_MODEL` is `default`,
    /// `ANTHROPIC_DEFAULT_<TIER>_MODEL` is the tier), else none.
    pub fn models(&self) -> Option<BTreeMap<String, String>> {
        if !self.models.is_empty() {
            return Some(self.models.clone());
        }
        if !self.is_gateway() {
            return None;
        }
        let mut map = BTreeMap::new();
        for (name, value) in &self.env {
            if value.is_empty() {
                continue;
            }
            if name == "ANTHROPIC_MODEL" {
                map.insert("default".to_string(), value.clone());
            } else if let Some(tier) = name
                .strip_prefix("ANTHROPIC_DEFAULT_")
                .and_then(|r| r.strip_suffix("_MODEL"))
            {
                map.insert(tier.to_ascii_lowercase(), value.clone());
            }
        }
        (!map.is_empty()).then_some(map)
    }
}

/// Whether `kind` is one of the agent CLIs atc knows (`claude`, `codex`, `grok`): their hooks
/// report to atc, and a revive resumes their own session.
pub fn is_agent_cli(kind: Option<AgentKind>) -> bool {
    kind.is_some()
}

/// What a harness is started with: resolved program, argv, environment and working directory.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    /// Absolute path of the program (resolved on this machine).
    pub program: PathBuf,
    /// The program as configured: what a remote host resolves on its own `PATH`.
    pub bin: String,
    /// Arguments after the program.
    pub args: Vec<String>,
    /// Environment added on top of the daemon's.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// atc's hooks are installed for this start (Claude's settings file): a remote host must
    /// have atc inside it for them to report (spec §5.3 step 4, `installATC`).
    pub hooks: bool,
    /// The agent's credential is in impd's broker: every start and attach of its harness
    /// carries `require: ["broker"]` (spec §6.4 `requireBroker`), with these placeholders and
    /// config folder.
    pub broker: Option<guest_plan::BrokerLaunch>,
}

/// A configured agent left out for a problem of its entry (spec §9.3): listed with it, and
/// refused at spawn, while every other agent works.
#[derive(Debug, Clone)]
pub struct AgentProblem {
    /// Agent id.
    pub agent: String,
    /// `agent_invalid`, or `auth_binding_invalid` for its `auth`.
    pub problem: &'static str,
    /// Which key is at fault and why; never its value.
    pub detail: String,
}

impl AgentProblem {
    /// As `GET /v1/agents` lists it.
    fn listed(&self) -> atc_protocol::responses::AgentProblem {
        atc_protocol::responses::AgentProblem {
            agent: self.agent.clone(),
            problem: self.problem.to_string(),
            detail: self.detail.clone(),
        }
    }
}

/// All agents the daemon knows, built once from config at start.
#[derive(Debug, Clone)]
pub struct AgentCatalog {
    agents: BTreeMap<String, Agent>,
    /// Configured agents left out, by id; none of them is in `agents`.
    invalid: BTreeMap<String, AgentProblem>,
}

impl AgentCatalog {
    /// The built-ins plus every configured agent.
    pub fn new(configured: &BTreeMap<String, AgentConfig>) -> AgentCatalog {
        let mut agents = BTreeMap::new();
        let shell = std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".to_string());
        let kinds = AgentKind::ALL.map(|k| (k.as_str(), k.label(), k.as_str()));
        for (id, label, bin) in std::iter::once(("shell", "Shell", shell.as_str())).chain(kinds) {
            agents.insert(
                id.to_string(),
                Agent {
                    id: id.to_string(),
                    label: label.to_string(),
                    bin: bin.to_string(),
                    args: Vec::new(),
                    env: BTreeMap::new(),
                    builtin: true,
                    kind: AgentKind::parse(id),
                    settings: None,
                    models: BTreeMap::new(),
                    base_url: None,
                    auth: None,
                    attention: AttentionMode::default_for(id, AgentKind::parse(id)),
                },
            );
        }
        for (id, c) in configured {
            let kind = c.kind.or_else(|| AgentKind::parse(id));
            agents.insert(
                id.clone(),
                Agent {
                    id: id.clone(),
                    label: c.label.clone().unwrap_or_else(|| id.clone()),
                    bin: c.bin.clone(),
                    args: c.args.clone(),
                    env: c.env.clone(),
                    builtin: false,
                    kind,
                    settings: c.settings.clone(),
                    models: c.models.clone(),
                    base_url: c.base_url.clone(),
                    auth: c.auth.clone(),
                    attention: c
                        .attention
                        .unwrap_or_else(|| AttentionMode::default_for(id, kind)),
                },
            );
        }
        AgentCatalog {
            agents,
            invalid: BTreeMap::new(),
        }
    }

    /// Records the configured agents whose entries were invalid, as `(id, problem, detail)`. A built-in
    /// of the same id goes too: the entry meant to replace it, and running the built-in in its
    /// place would run something the config did not ask for.
    pub fn with_invalid<'a>(
        mut self,
        invalid: impl IntoIterator<Item = (&'a str, &'static str, &'a str)>,
    ) -> Self {
        for (id, problem, detail) in invalid {
            self.agents.remove(id);
            self.invalid.insert(
                id.to_string(),
                AgentProblem {
                    agent: id.to_string(),
                    problem,
                    detail: detail.to_string(),
                },
            );
        }
        self
    }

    /// The problems of the agents left out, for `GET /v1/agents`.
    pub fn problems(&self) -> Vec<atc_protocol::responses::AgentProblem> {
        self.invalid.values().map(AgentProblem::listed).collect()
    }

    /// The listing for `GET /v1/agents`, resolving each program now. `broker_target`: whether
    /// some target has a broker, without which a broker-backed agent cannot be spawned.
    pub fn listing(&self, broker_target: bool) -> Vec<AgentEntry> {
        self.agents
            .values()
            .map(|a| {
                let installed = resolve_program(&a.bin).is_some();
                let spawnable = match a.auth {
                    Some(_) => broker_target,
                    None => installed,
                };
                AgentEntry {
                    id: a.id.clone(),
                    label: a.label.clone(),
                    installed,
                    bin: a.bin.clone(),
                    builtin: a.builtin,
                    kind: a.kind.map(|k| k.as_str().to_string()),
                    models: a.models(),
                    spawn_options: Some(spawn_options::listing(a, spawnable)),
                    broker_auth: a.auth.is_some(),
                    capabilities: AgentCapabilities::with_spawn(spawnable),
                    problem: None,
                }
            })
            .chain(self.invalid.values().map(|p| AgentEntry {
                id: p.agent.clone(),
                label: p.agent.clone(),
                installed: false,
                bin: String::new(),
                builtin: false,
                kind: None,
                models: None,
                spawn_options: None,
                broker_auth: p.problem == crate::config::AUTH_BINDING_INVALID,
                capabilities: AgentCapabilities::with_spawn(false),
                problem: Some(p.listed()),
            }))
            .collect()
    }

    /// The kind of agent `id` (see [`Agent::kind`]).
    pub fn kind(&self, id: &str) -> Option<AgentKind> {
        self.agents.get(id).and_then(|a| a.kind)
    }

    /// The agent `id`.
    pub fn get(&self, id: &str) -> Option<&Agent> {
        self.agents.get(id)
    }

    /// Whether `id` is a known agent (installed or not).
    pub fn contains(&self, id: &str) -> bool {
        self.agents.contains_key(id)
    }

    /// The broker part of `id`'s launch plans, if it is broker-backed.
    pub fn broker_launch(&self, id: &str) -> Option<guest_plan::BrokerLaunch> {
        let agent = self.agents.get(id)?;
        guest_plan::BrokerLaunch::plan(id, agent.kind, agent.auth.as_ref()?, 1)
    }

    /// Turns an agent id and cwd into a launch plan; `unsupported` when the agent is unknown or
    /// its program does not resolve.
    pub fn plan(&self, id: &str, cwd: &Path) -> Result<LaunchPlan, AgentError> {
        if let Some(p) = self.invalid.get(id) {
            // An agent left out of the config is unregistered (spec §2.8), with the reason.
            if p.problem == crate::config::AUTH_BINDING_INVALID {
                return Err(AgentError::AuthInvalid {
                    agent: id.to_string(),
                    detail: p.detail.clone(),
                });
            }
            return Err(AgentError::Misconfigured {
                agent: id.to_string(),
                problem: p.problem,
                detail: p.detail.clone(),
            });
        }
        let agent = self.agents.get(id).ok_or_else(|| AgentError::Unknown {
            agent: id.to_string(),
        })?;
        // A broker-backed agent runs only inside an imp, whose guest resolves the bin on its
        // own PATH; whether this machine has it says nothing.
        let program = match &agent.auth {
            Some(_) => PathBuf::from(&agent.bin),
            None => resolve_program(&agent.bin).ok_or_else(|| AgentError::NotInstalled {
                agent: id.to_string(),
                bin: agent.bin.clone(),
            })?,
        };
        let mut env = agent.env.clone();
        if let Some(url) = &agent.base_url {
            env.insert("ANTHROPIC_BASE_URL".into(), url.clone());
        }
        Ok(LaunchPlan {
            program,
            bin: agent.bin.clone(),
            args: agent.args.clone(),
            env,
            cwd: cwd.to_path_buf(),
            hooks: false,
            // Revision 1 until bindings keep one per host (issue 9 item 3).
            broker: agent
                .auth
                .as_ref()
                .and_then(|a| guest_plan::BrokerLaunch::plan(id, agent.kind, a, 1)),
        })
    }
}

/// How `submit` types a line into an agent (spec §3.6). Each element is one write; all of one
/// submit are issued together so no other client's input lands between them.
///
/// Claude, Codex and Grok get the text as a bracketed paste when the terminal has asked for one
/// (DEC mode 2004), with any paste markers inside the text removed so it cannot end the paste
/// early, then Enter (`\r`) as a separate write; without the mode, the bare text and then `\r`.
/// Every other agent (shells, configured commands) gets the text and a carriage return in one
/// write, which is what a terminal sends for Enter.
///
/// The spec's plan for Claude, the text and `\n` in one write, leaves the text in Claude Code
/// 2.1's input box: it takes a `\n` inside a read as a newline of the prompt, not as Enter.
/// Checked against the real binaries, as `tests/it/real_claude.rs` and `tests/it/real_codex.rs` run
/// them: Claude Code 2.1.332 and Codex 0.171.0 (README, "What submit types"). Grok's plan is
/// the same shape but has not been checked against a real Grok.
pub fn line_plan(kind: Option<AgentKind>, text: &str, bracketed_paste: bool) -> Vec<Vec<u8>> {
    const PASTE_START: &str = "\x1b[200~";
    const PASTE_END: &str = "\x1b[201~";
    match kind {
        Some(_) if bracketed_paste => {
            let clean = text.replace(PASTE_START, "").replace(PASTE_END, "");
            vec![
                format!("{PASTE_START}{clean}{PASTE_END}").into_bytes(),
                b"\r".to_vec(),
            ]
        }
        Some(_) => vec![text.as_bytes().to_vec(), b"\r".to_vec()],
        None => vec![format!("{text}\r").into_bytes()],
    }
}

/// A shell line that resumes a session's agent by hand (spec §2.6 `session.resumeCommand`,
/// §9.3): `cd <cwd> && claude --resume <id>`, `codex resume <id>`, `grok --resume <id>`; other
/// agents are started again with their argv. Every word is shell-quoted.
pub fn resume_command(
    kind: Option<AgentKind>,
    bin: &str,
    args: &[String],
    cwd: &str,
    agent_session_id: Option<&str>,
    claude_settings: Option<&Path>,
) -> String {
    let mut words: Vec<String> = match kind {
        Some(kind) => {
            let mut w = vec![bin.to_string()];
            if let (AgentKind::Claude, Some(f)) = (kind, claude_settings) {
                w.push("--settings".into());
                w.push(f.display().to_string());
            }
            w.extend(kind.resume_words().iter().map(|s| s.to_string()));
            w
        }
        None => std::iter::once(bin.to_string())
            .chain(args.iter().cloned())
            .collect(),
    };
    if kind.is_some() {
        words.extend(agent_session_id.map(str::to_string));
    }
    let line: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
    format!("cd {} && {}", shell_quote(cwd), line.join(" "))
}

/// Quotes a word for a POSIX shell: bare when it is plainly safe, else in single quotes.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether `line_plan` for this agent depends on the terminal's bracketed-paste mode.
pub fn line_plan_reads_paste_mode(kind: Option<AgentKind>) -> bool {
    kind.is_some()
}

/// Resolves a program name the way a shell would: a name with a slash is taken as a path,
/// anything else is searched on `PATH`. Only executable regular files count.
pub fn resolve_program(bin: &str) -> Option<PathBuf> {
    if bin.contains('/') {
        let p = PathBuf::from(bin);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_is_built_in_and_installed() {
        let c = AgentCatalog::new(&BTreeMap::new());
        let shell = c
            .listing(false)
            .into_iter()
            .find(|a| a.id == "shell")
            .unwrap();
        assert!(shell.installed);
    }

    #[test]
    fn unknown_and_missing_agents_are_unsupported() {
        let mut cfg = BTreeMap::new();
        cfg.insert(
            "ghost".to_string(),
            AgentConfig {
                bin: "definitely-not-a-program-atc".into(),
                args: vec![],
                env: BTreeMap::new(),
                label: None,
                kind: None,
                ..Default::default()
            },
        );
        let c = AgentCatalog::new(&cfg);
        assert_eq!(
            c.plan("nope", Path::new("/")).unwrap_err(),
            AgentError::Unknown {
                agent: "nope".into()
            }
        );
        assert_eq!(
            c.plan("ghost", Path::new("/")).unwrap_err(),
            AgentError::NotInstalled {
                agent: "ghost".into(),
                bin: "definitely-not-a-program-atc".into()
            }
        );
        assert!(
            !c.listing(false)
                .iter()
                .find(|a| a.id == "ghost")
                .unwrap()
                .installed
        );
    }

    #[test]
    fn line_plans_follow_each_agent() {
        assert_eq!(
            line_plan(Some(AgentKind::Claude), "hi", true),
            vec![b"\x1b[200~hi\x1b[201~".to_vec(), b"\r".to_vec()]
        );
        assert_eq!(
            line_plan(Some(AgentKind::Claude), "hi", false),
            vec![b"hi".to_vec(), b"\r".to_vec()]
        );
        assert_eq!(line_plan(None, "hi", true), vec![b"hi\r".to_vec()]);
        assert_eq!(
            line_plan(Some(AgentKind::Codex), "hi", false),
            vec![b"hi".to_vec(), b"\r".to_vec()]
        );
        assert_eq!(
            line_plan(Some(AgentKind::Grok), "a\x1b[201~b\x1b[200~", true),
            vec![b"\x1b[200~ab\x1b[201~".to_vec(), b"\r".to_vec()]
        );
        assert!(line_plan_reads_paste_mode(Some(AgentKind::Codex)));
        assert!(line_plan_reads_paste_mode(Some(AgentKind::Claude)));
        assert!(!line_plan_reads_paste_mode(None));
    }

    #[test]
    fn resume_commands_follow_each_kind_and_quote_their_words() {
        assert_eq!(
            resume_command(
                Some(AgentKind::Claude),
                "claude",
                &[],
                "/src/my app",
                Some("s-1"),
                None
            ),
            "cd '/src/my app' && claude --resume s-1"
        );
        assert_eq!(
            resume_command(Some(AgentKind::Codex), "codex", &[], "/w", None, None),
            "cd /w && codex resume"
        );
        assert_eq!(
            resume_command(Some(AgentKind::Grok), "grok", &[], "/w", Some("g 1"), None),
            "cd /w && grok --resume 'g 1'"
        );
        assert_eq!(
            resume_command(
                None,
                "/bin/sh",
                &["-c".into(), "echo 'hi'".into()],
                "/w",
                Some("x"),
                None
            ),
            "cd /w && /bin/sh -c 'echo '\\''hi'\\'''"
        );
        assert_eq!(
            resume_command(
                Some(AgentKind::Claude),
                "claude",
                &[],
                "/w",
                Some("s-1"),
                Some(Path::new("/st/claude/a b.json"))
            ),
            "cd /w && claude --settings '/st/claude/a b.json' --resume s-1"
        );
    }

    #[test]
    fn configured_agents_resolve_on_path() {
        let mut cfg = BTreeMap::new();
        cfg.insert(
            "cat".to_string(),
            AgentConfig {
                bin: "cat".into(),
                args: vec!["-u".into()],
                env: BTreeMap::new(),
                label: None,
                kind: None,
                ..Default::default()
            },
        );
        let plan = AgentCatalog::new(&cfg)
            .plan("cat", Path::new("/tmp"))
            .unwrap();
        assert!(plan.program.is_absolute());
        assert_eq!(plan.args, vec!["-u"]);
    }
}
