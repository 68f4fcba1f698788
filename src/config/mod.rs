//! Daemon configuration: the embedded default, the optional config file, and the checked
//! [`Config`] the rest of the daemon reads.
//!
//! Loading is two steps (ripgrep's low/high split): serde into [`raw`] shapes, then
//! validation into checked values. A config file that cannot be read or parsed never stops the
//! daemon: it runs on the embedded default and reports the problem (path and parser detail,
//! never the file's values) in its log and in `GET /v1/daemon`.

pub mod agent_auth;
mod agent_entry;
pub mod agent_kind;
pub mod attention;
pub mod listeners;
pub mod principals;
pub mod raw;
pub mod session_limits;
pub mod targets;

use agent_entry::{checked_agent, raw_agent};
use agent_kind::AgentKind;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The address the daemon listens on when nothing else is said.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7767";

/// Sizes the daemon enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Bytes a client may have queued before it is desynced (spec §11.3: 2 MiB).
    pub queue_bytes: usize,
    /// Bytes of recent output kept per session for exact resume (api.md: 1 MiB).
    pub ring_bytes: usize,
    /// Largest request body (api.md: 1 MiB).
    pub body_cap_bytes: usize,
    /// Hook reports a session may send per second, on average (see
    /// `sessions::session::report_budget`).
    pub reports_per_second: u32,
    /// Hook reports a session may send at once, after a quiet spell.
    pub report_burst: u32,
    /// Trail rows kept per session; older ones are deleted as new ones come.
    pub trail_per_session: u32,
    /// Trail rows kept in all.
    pub trail_rows: u32,
    /// Days a trail row is kept.
    pub trail_max_age_days: u32,
    /// HTTP connections from one peer address that have not shown the token (the oldest is
    /// closed to make room for another); all peers together hold at most a quarter of the
    /// descriptor limit (`server::conn_registry`).
    pub tokenless_connections: usize,
    /// The most sessions with a running process at once. `None` (the default) is worked out
    /// from the host at start (`daemon::session_cap`); the daemon's own copy, from there on,
    /// holds the number it works to, which `GET /v1/daemon` shows.
    pub max_sessions: Option<usize>,
    /// The daemon's default limits on each local session's processes (`limits.session`);
    /// agents replace them field by field, targets cap them (see [`session_limits`]).
    pub session: atc_protocol::SessionLimits,
    /// Spawns accepted and not yet answered before more are refused as `busy`
    /// (`sessions::admission`).
    pub spawn_queue: usize,
    /// A spawn on this machine is refused as `memory_low` while its available memory is below
    /// this many MiB; `None`: not checked.
    pub memory_floor_mib: Option<u64>,
}

impl Limits {
    /// The limits as `GET /v1/daemon` shows them.
    pub fn listed(&self) -> atc_protocol::responses::Limits {
        // usize is at most 64 bits on every target the daemon builds for.
        let n = |v: usize| v as u64;
        atc_protocol::responses::Limits {
            queue_bytes: n(self.queue_bytes),
            ring_bytes: n(self.ring_bytes),
            body_cap_bytes: n(self.body_cap_bytes),
            reports_per_second: self.reports_per_second,
            report_burst: self.report_burst,
            trail_per_session: self.trail_per_session,
            trail_rows: self.trail_rows,
            trail_max_age_days: self.trail_max_age_days,
            tokenless_connections: n(self.tokenless_connections),
            max_sessions: self.max_sessions.map(n),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            queue_bytes: 2 * 1024 * 1024,
            ring_bytes: 1024 * 1024,
            body_cap_bytes: 1024 * 1024,
            reports_per_second: 20,
            report_burst: 200,
            trail_per_session: 1000,
            trail_rows: 100_000,
            trail_max_age_days: 30,
            tokenless_connections: 64,
            max_sessions: None,
            session: atc_protocol::SessionLimits::default(),
            // A storm's spawns past this wait in the client, not in the daemon's memory and
            // threads; 256 is far more than a machine starts at once at a useful speed.
            spawn_queue: 256,
            // Below this the kernel is about to reclaim hard or kill: a new agent would push
            // it over, and take others with it.
            memory_floor_mib: Some(256),
        }
    }
}

/// Every duration the actors use, in one place so tests can shorten them.
#[derive(Debug, Clone)]
pub struct Timings {
    /// SIGHUP to SIGKILL (spec: 5 s).
    pub kill_grace: Duration,
    /// Resize recompute debounce (spec: 50 ms).
    pub resize_debounce: Duration,
    /// After the child is reaped, how long to keep reading output still buffered in the PTY
    /// before reporting the exit (a grandchild holding the PTY open must not keep a dead
    /// session alive).
    pub exit_drain: Duration,
    /// WebSocket ping interval.
    pub ws_ping: Duration,
    /// A WebSocket silent this long is dropped (its session is not touched).
    pub ws_timeout: Duration,
    /// How long shutdown waits for sessions to write their exit.
    pub shutdown_grace: Duration,
    /// `status.json` is rewritten at most this often.
    pub status_write: Duration,
    /// After sessions are removed, how long the manager waits before handing the heap they
    /// freed back to the kernel (removals within it share one trim).
    pub heap_trim: Duration,
    /// How often the trail is swept of rows past its age and count
    /// (`sessions::trail_sweep`).
    pub trail_sweep: Duration,
    /// Completed idempotency keys older than this are deleted (spec §7.5: 24 h).
    pub idempotency_retention: Duration,
    /// How often the sweep runs (spec: hourly).
    pub idempotency_sweep: Duration,
    /// An unanswered permission request resolves as `deny` after this (spec §8: 60 s).
    pub permission_timeout: Duration,
    /// How long a WebSocket ticket from `POST /v1/tickets` opens a socket (api.md: 30 s).
    pub ticket_ttl: Duration,
    /// Length of the lease atc holds on an imp host (spec §5.1: 600 s; impd takes 10–3600).
    pub imp_lease_ttl: Duration,
    /// How often the lease is renewed (spec: a third of its length).
    pub imp_lease_renew: Duration,
    /// Waits between a remote harness's reconnect attempts; when they run out the harness
    /// ends (spec §5.1: 250, 1000, 2000, 4000, 8000 ms).
    pub imp_reconnect_delays: Vec<Duration>,
    /// The longest a request body may take to arrive, once its head is in. A body at the cap
    /// (1 MiB) needs only 100 KiB/s to make it; a client trickling one byte a second would
    /// otherwise hold its connection and its handler for as long as it likes.
    pub body_read: Duration,
    /// The longest a request head may take: from the accept for a connection's first request,
    /// from its first byte for each later one (the wait between requests is the keep-alive).
    pub head_read: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            kill_grace: Duration::from_secs(5),
            resize_debounce: Duration::from_millis(50),
            exit_drain: Duration::from_millis(250),
            ws_ping: Duration::from_secs(15),
            ws_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(8),
            status_write: Duration::from_millis(50),
            heap_trim: Duration::from_secs(1),
            trail_sweep: Duration::from_secs(3600),
            idempotency_retention: Duration::from_secs(24 * 3600),
            idempotency_sweep: Duration::from_secs(3600),
            permission_timeout: Duration::from_secs(60),
            ticket_ttl: Duration::from_secs(30),
            imp_lease_ttl: Duration::from_secs(600),
            imp_lease_renew: Duration::from_secs(200),
            imp_reconnect_delays: [250, 1000, 2000, 4000, 8000]
                .into_iter()
                .map(Duration::from_millis)
                .collect(),
            body_read: Duration::from_secs(10),
            head_read: Duration::from_secs(5),
        }
    }
}

/// One configured agent, checked.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// Program name or path.
    pub bin: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Display label (defaults to the id).
    pub label: Option<String>,
    /// `claude`, `codex` or `grok` as configured: which spawn options and hook mapping apply.
    /// The catalog defaults it to the id when the id is one of those.
    pub kind: Option<AgentKind>,
    /// Claude only: extra settings merged into the settings file atc writes for each session
    /// (their hooks run after atc's).
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
    /// Explicit role → model map the agents listing shows (e.g. `{"default": "opus"}`).
    pub models: BTreeMap<String, String>,
    /// Claude only: a gateway's base URL (`ANTHROPIC_BASE_URL` in the agent's environment).
    /// Makes the agent a gateway: its model tiers come from its env.
    pub base_url: Option<String>,
    /// Broker authentication: the agent runs only in an imp, with its credential in impd.
    pub auth: Option<agent_auth::AgentAuth>,
    /// Limits on its sessions, replacing the daemon's default field by field.
    pub limits: Option<atc_protocol::SessionLimits>,
    /// What its attention state follows; `None`: [`attention::AttentionMode::default_for`].
    pub attention: Option<attention::AttentionMode>,
}

/// The problem word of an agent entry left out for its `auth` (spec §6.1).
pub const AUTH_BINDING_INVALID: &str = "auth_binding_invalid";

/// A problem found while loading the config; the daemon runs on regardless.
#[derive(Debug, Clone)]
pub struct ConfigProblem {
    /// Where: `config` for the whole file, `agents.<id>` for one entry.
    pub scope: String,
    /// `config_unreadable`, `config_malformed`, `agent_invalid`.
    pub problem: &'static str,
    /// Parser or OS detail; never the file's values.
    pub detail: String,
    /// The file involved.
    pub path: Option<PathBuf>,
}

impl ConfigProblem {
    /// The problem as `GET /v1/daemon` lists it.
    pub fn listed(&self) -> atc_protocol::responses::ConfigProblem {
        atc_protocol::responses::ConfigProblem {
            scope: self.scope.clone(),
            problem: self.problem.to_string(),
            detail: self.detail.clone(),
            path: self.path.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Where the metrics-only listener listens, if anywhere.
    pub metrics_listen: Option<SocketAddr>,
    /// The files to serve HTTPS with (`tlsCert`, `tlsKey`), if any.
    pub tls: Option<listeners::TlsFiles>,
    /// Extra allowed WebSocket origins (exact match, e.g. `https://example.com`).
    pub allowed_origins: Vec<String>,
    /// Configured agents, by id.
    pub agents: BTreeMap<String, AgentConfig>,
    /// Sizes.
    pub limits: Limits,
    /// Durations.
    pub timings: Timings,
    /// What went wrong while loading, if anything.
    pub problems: Vec<ConfigProblem>,
    /// Execution targets as written, and their default (checked in `providers::targets`).
    pub targets: targets::TargetsConfig,
    /// The file this came from, if any.
    pub source: Option<PathBuf>,
    /// Where the cgroup hierarchies are mounted; `None`: sessions run without cgroups.
    pub cgroup_root: Option<PathBuf>,
    /// Who besides the owner may hold a token, and the targets each is granted.
    pub principals: principals::Principals,
    /// The activity rule's thresholds.
    pub activity: attention::ActivityConfig,
}

/// Where cgroup hierarchies are mounted on Linux.
pub const DEFAULT_CGROUP_ROOT: &str = "/sys/fs/cgroup";

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("DEFAULT_LISTEN is a valid socket address"),
            metrics_listen: None,
            tls: None,
            allowed_origins: Vec::new(),
            agents: BTreeMap::new(),
            limits: Limits::default(),
            timings: Timings::default(),
            problems: Vec::new(),
            targets: targets::TargetsConfig::default(),
            source: None,
            cgroup_root: Some(PathBuf::from(DEFAULT_CGROUP_ROOT)),
            principals: principals::Principals::default(),
            activity: attention::ActivityConfig::default(),
        }
    }
}

impl Config {
    /// Finds the config file: `explicit`, else `$ATC_CONFIG`, else
    /// `$XDG_CONFIG_HOME/atc/config.json` (else `~/.config/atc/config.json`).
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_path_buf());
        }
        if let Some(p) = std::env::var_os("ATC_CONFIG").filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("atc").join("config.json"))
    }

    /// Loads the file at `path`. A missing file is the embedded default; an explicitly named
    /// missing file, an unreadable or a malformed one is the default plus a problem.
    pub fn load(path: Option<&Path>, explicit: bool) -> Config {
        let Some(path) = path else {
            return Config::default();
        };
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Config::default()
            }
            Err(e) => {
                return Config::default().with_problem(ConfigProblem {
                    scope: "config".into(),
                    problem: "config_unreadable",
                    detail: e.kind().to_string(),
                    path: Some(path.to_path_buf()),
                })
            }
        };
        let mut config = Config::from_json(&text);
        config.source = Some(path.to_path_buf());
        for p in &mut config.problems {
            p.path = Some(path.to_path_buf());
        }
        config
    }

    /// Parses and validates config text.
    pub fn from_json(text: &[u8]) -> Config {
        match serde_json::from_slice::<raw::RawConfig>(text) {
            Ok(raw) => Config::from_raw(raw),
            Err(e) => Config::default().with_problem(ConfigProblem {
                scope: "config".into(),
                problem: "config_malformed",
                // serde's messages name keys and positions, not values.
                detail: format!(
                    "line {} column {}: {}",
                    e.line(),
                    e.column(),
                    e.classify_detail()
                ),
                path: None,
            }),
        }
    }

    fn from_raw(raw: raw::RawConfig) -> Config {
        let mut config = Config::default();
        listeners::apply(
            listeners::RawListeners {
                listen: raw.listen,
                metrics_listen: raw.metrics_listen,
                tls_cert: raw.tls_cert,
                tls_key: raw.tls_key,
            },
            &mut config,
        );
        config.allowed_origins = raw.allowed_origins;
        config.targets = targets::TargetsConfig {
            entries: raw.targets,
            default: raw.default_target,
            file_problem: None,
        };
        config.principals =
            principals::Principals::from_config(raw.principals, &mut config.problems);
        for (id, entry) in raw.agents {
            match raw_agent(entry)
                .map_err(|detail| ("agent_invalid", detail))
                .and_then(|agent| checked_agent(&id, agent))
            {
                Ok(agent) => {
                    config.agents.insert(id, agent);
                }
                Err((problem, detail)) => config.problems.push(ConfigProblem {
                    scope: format!("agents.{id}"),
                    problem,
                    detail,
                    path: None,
                }),
            }
        }
        let l = raw.limits;
        let defaults = Limits::default();
        config.limits = Limits {
            queue_bytes: l.queue_bytes.unwrap_or(defaults.queue_bytes).max(64 * 1024),
            // The screen model's backlog is bounded in 64 KiB feeds within half the ring.
            ring_bytes: l.ring_bytes.unwrap_or(defaults.ring_bytes).max(256 * 1024),
            body_cap_bytes: l
                .body_cap_bytes
                .unwrap_or(defaults.body_cap_bytes)
                .max(1024),
            reports_per_second: l.reports_per_second.unwrap_or(defaults.reports_per_second),
            // A burst of one still lets a session report at its rate.
            report_burst: l.report_burst.unwrap_or(defaults.report_burst).max(1),
            trail_per_session: l
                .trail_per_session
                .unwrap_or(defaults.trail_per_session)
                .max(1),
            trail_rows: l.trail_rows.unwrap_or(defaults.trail_rows).max(1),
            trail_max_age_days: l
                .trail_max_age_days
                .unwrap_or(defaults.trail_max_age_days)
                .max(1),
            tokenless_connections: l
                .tokenless_connections
                .unwrap_or(defaults.tokenless_connections)
                .max(1),
            // A cap of none would refuse every start; one is the least that means anything.
            max_sessions: l.max_sessions.or(defaults.max_sessions).map(|n| n.max(1)),
            session: match l.session.map(|s| (s, s.out_of_bounds())) {
                None => defaults.session,
                Some((s, None)) => s,
                Some((_, Some((field, min, max)))) => {
                    config.problems.push(ConfigProblem {
                        scope: "limits.session".into(),
                        problem: "config_malformed",
                        detail: format!(
                            "'{field}' must be between {min} and {max}; no session limits are set"
                        ),
                        path: None,
                    });
                    defaults.session
                }
            },
            // A queue of none would refuse every spawn.
            spawn_queue: l.spawn_queue.unwrap_or(defaults.spawn_queue).max(1),
            memory_floor_mib: l.memory_floor_mib.unwrap_or(defaults.memory_floor_mib),
        };
        match raw.cgroup_root {
            None => {}
            Some(None) => config.cgroup_root = None,
            Some(Some(serde_json::Value::String(root))) if Path::new(&root).is_absolute() => {
                config.cgroup_root = Some(PathBuf::from(root))
            }
            Some(_) => config.problems.push(ConfigProblem {
                scope: "cgroupRoot".into(),
                problem: "config_malformed",
                detail: "cgroupRoot must be an absolute path or null".into(),
                path: None,
            }),
        }
        match raw.activity.checked() {
            Ok(activity) => config.activity = activity,
            Err(detail) => config.problems.push(ConfigProblem {
                scope: "activity".into(),
                problem: "config_malformed",
                detail,
                path: None,
            }),
        }
        if let Some(ms) = l.kill_grace_ms {
            config.timings.kill_grace = Duration::from_millis(ms);
        }
        if let Some(ms) = l.resize_debounce_ms {
            config.timings.resize_debounce = Duration::from_millis(ms);
        }
        config
    }

    /// The configured agents that were left out for a problem of their entry, with the
    /// problem's word and detail.
    pub fn invalid_agents(&self) -> impl Iterator<Item = (&str, &'static str, &str)> {
        self.problems
            .iter()
            .filter(|p| p.problem == "agent_invalid" || p.problem == AUTH_BINDING_INVALID)
            .filter_map(|p| {
                Some((
                    p.scope.strip_prefix("agents.")?,
                    p.problem,
                    p.detail.as_str(),
                ))
            })
    }

    fn with_problem(mut self, problem: ConfigProblem) -> Config {
        // A file that cannot be used at all leaves no target usable (spec §4.1).
        if problem.scope == "config" {
            self.targets = targets::TargetsConfig {
                entries: None,
                default: None,
                file_problem: Some(targets::TargetProblem {
                    scope: targets::TargetProblemScope::Config,
                    target: None,
                    problem: problem.problem.to_string(),
                    detail: problem.detail.clone(),
                }),
            };
        }
        self.problems.push(problem);
        self
    }
}

/// serde_json's error text can quote a string value it choked on; keep only the category and
/// the part before any quote so config values never reach a log.
pub(crate) trait ClassifyDetail {
    fn classify_detail(&self) -> String;
}

impl ClassifyDetail for serde_json::Error {
    fn classify_detail(&self) -> String {
        let text = self.to_string();
        let cut = text.find(['"', '`']).unwrap_or(text.len());
        let head = text[..cut].trim_end();
        // Unknown-field errors name the key in backticks; keys are not secrets, keep them.
        if let Some(rest) = text.strip_prefix("unknown field `") {
            let key: String = rest.chars().take_while(|c| *c != '`').collect();
            return format!("unknown field '{key}'");
        }
        format!("{:?}: {head}", self.classify())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_limits_and_the_cgroup_root_are_read_and_bad_ones_named() {
        let c = Config::from_json(
            br#"{"cgroupRoot": null, "limits": {"session": {"memoryMiB": 512}},
                 "agents": {"big": {"bin": "cat", "limits": {"pids": 64}}}}"#,
        );
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.cgroup_root, None);
        assert_eq!(c.limits.session.memory_mib, Some(512));
        assert_eq!(c.agents["big"].limits.and_then(|l| l.pids), Some(64));
        let c = Config::from_json(
            br#"{"cgroupRoot": "relative", "limits": {"session": {"pids": 1}},
                 "agents": {"tiny": {"bin": "cat", "limits": {"memoryMiB": 1}}}}"#,
        );
        let scopes: Vec<&str> = c.problems.iter().map(|p| p.scope.as_str()).collect();
        assert_eq!(scopes, ["agents.tiny", "limits.session", "cgroupRoot"]);
        assert_eq!(
            c.cgroup_root.as_deref(),
            Some(Path::new(DEFAULT_CGROUP_ROOT))
        );
        assert!(c.limits.session.is_empty());
    }

    #[test]
    fn example_config_matches_embedded_default() {
        let text = include_str!("../../config.example.json");
        let example = Config::from_json(text.as_bytes());
        assert!(example.problems.is_empty(), "{:?}", example.problems);
        let default = Config::default();
        assert_eq!(example.listen, default.listen);
        assert_eq!(example.metrics_listen, default.metrics_listen);
        assert_eq!(example.limits.queue_bytes, default.limits.queue_bytes);
        assert_eq!(example.limits.ring_bytes, default.limits.ring_bytes);
        assert_eq!(example.limits.body_cap_bytes, default.limits.body_cap_bytes);
        assert_eq!(
            example.limits.reports_per_second,
            default.limits.reports_per_second
        );
        assert_eq!(example.limits.report_burst, default.limits.report_burst);
        assert_eq!(
            example.limits.trail_per_session,
            default.limits.trail_per_session
        );
        assert_eq!(example.limits.trail_rows, default.limits.trail_rows);
        assert_eq!(
            example.limits.trail_max_age_days,
            default.limits.trail_max_age_days
        );
        assert_eq!(
            example.limits.tokenless_connections,
            default.limits.tokenless_connections
        );
        assert_eq!(example.limits.max_sessions, default.limits.max_sessions);
        assert_eq!(example.limits.session, default.limits.session);
        assert_eq!(example.cgroup_root, default.cgroup_root);
        assert_eq!(example.limits.spawn_queue, default.limits.spawn_queue);
        assert_eq!(
            example.limits.memory_floor_mib,
            default.limits.memory_floor_mib
        );
        assert_eq!(example.activity, default.activity);
        assert_eq!(example.timings.kill_grace, default.timings.kill_grace);
        assert_eq!(
            example.timings.resize_debounce,
            default.timings.resize_debounce
        );
        assert!(example.agents.contains_key("cat"));
        // Its targets are checked against the default's in `providers::targets`.
    }

    #[test]
    fn max_sessions_is_a_number_or_null_for_the_hosts_own_and_at_least_one() {
        let cap = |text: &str| Config::from_json(text.as_bytes()).limits.max_sessions;
        assert_eq!(cap(r#"{"limits": {"maxSessions": 40}}"#), Some(40));
        assert_eq!(cap(r#"{"limits": {"maxSessions": null}}"#), None);
        assert_eq!(cap(r#"{"limits": {}}"#), None);
        assert_eq!(cap(r#"{"limits": {"maxSessions": 0}}"#), Some(1));
        let c = Config::from_json(br#"{"limits": {"maxSessions": -3}}"#);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
    }

    #[test]
    fn spawn_queue_is_at_least_one_and_memory_floor_null_turns_it_off() {
        let limits = |text: &str| Config::from_json(text.as_bytes()).limits;
        assert_eq!(limits(r#"{"limits": {"spawnQueue": 3}}"#).spawn_queue, 3);
        assert_eq!(limits(r#"{"limits": {"spawnQueue": 0}}"#).spawn_queue, 1);
        assert_eq!(limits(r#"{"limits": {}}"#).spawn_queue, 256);
        let floor = |text: &str| limits(text).memory_floor_mib;
        assert_eq!(floor(r#"{"limits": {"memoryFloorMiB": 512}}"#), Some(512));
        assert_eq!(floor(r#"{"limits": {"memoryFloorMiB": null}}"#), None);
        assert_eq!(floor(r#"{"limits": {}}"#), Some(256));
        let c = Config::from_json(br#"{"limits": {"memoryFloorMiB": "lots"}}"#);
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
    }

    #[test]
    fn malformed_config_falls_back_and_hides_values() {
        let c = Config::from_json(br#"{"listen": "secret-value-here"#);
        assert_eq!(c.problems.len(), 1);
        assert_eq!(c.problems[0].problem, "config_malformed");
        assert!(!c.problems[0].detail.contains("secret"));
        assert_eq!(c.listen, Config::default().listen);
    }

    #[test]
    fn metrics_listen_is_an_address_or_a_scoped_problem() {
        let c = Config::from_json(br#"{"metricsListen": "127.0.0.1:9464"}"#);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        let c = Config::from_json(br#"{"metricsListen": "localhost"}"#);
        assert_eq!(c.problems.len(), 1);
        assert_eq!(c.problems[0].scope, "metricsListen");
        assert_eq!(c.metrics_listen, None);
    }

    #[test]
    fn an_unknown_key_in_one_agent_is_that_agents_problem_naming_the_key() {
        let c = Config::from_json(
            br#"{"agents": {"bad": {"bin": "sh", "colour": "secret-value"}, "good": {"bin": "sh"}},
                 "limits": {"killGraceMs": 1234}}"#,
        );
        assert_eq!(c.problems.len(), 1, "{:?}", c.problems);
        let p = &c.problems[0];
        assert_eq!(
            (p.scope.as_str(), p.problem),
            ("agents.bad", "agent_invalid")
        );
        assert!(p.detail.contains("colour"), "{p:?}");
        assert!(!p.detail.contains("secret"), "{p:?}");
        assert!(c.agents.contains_key("good") && !c.agents.contains_key("bad"));
        // The rest of the file still applies.
        assert_eq!(c.timings.kill_grace, Duration::from_millis(1234));
        assert_eq!(
            c.invalid_agents().collect::<Vec<_>>(),
            [("bad", "agent_invalid", p.detail.as_str())]
        );
    }

    #[test]
    fn a_wrong_type_in_one_agent_is_that_agents_problem_naming_the_key() {
        let c = Config::from_json(
            br#"{"agents": {"bad": {"bin": "sh", "args": "secret-value"}, "good": {"bin": "sh"},
                            "worse": 7}}"#,
        );
        let detail = |id: &str| {
            c.problems
                .iter()
                .find(|p| p.scope == format!("agents.{id}") && p.problem == "agent_invalid")
                .map(|p| p.detail.clone())
                .unwrap_or_else(|| panic!("no problem for {id}: {:?}", c.problems))
        };
        assert_eq!(detail("bad"), "'args' must be a sequence");
        assert_eq!(detail("worse"), "an agent entry must be an object");
        assert_eq!(c.problems.len(), 2, "{:?}", c.problems);
        assert!(c.agents.contains_key("good"));
    }

    #[test]
    fn unknown_keys_are_named() {
        let c = Config::from_json(br#"{"limts": {}}"#);
        assert!(c.problems[0].detail.contains("limts"), "{:?}", c.problems);
    }
}
