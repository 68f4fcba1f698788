//! What each agent's attention state follows (issue 38), and the thresholds of the activity
//! rule. Per agent, `attention` is `hooks` (the agent's own reports drive it, as spec §3.4
//! says), `activity` (atc measures the session's output and CPU) or `none` (the state only
//! follows the process). The default is `hooks` for Claude, whose hooks atc installs itself,
//! `none` for the `shell` agent, so that idle shells do not ask for their user, and
//! `activity` for every other command, Codex and Grok included ([`AttentionMode::default_for`]). The rule itself is `sessions::activity`'s.

use std::time::Duration;

use serde::Deserialize;

use super::agent_kind::AgentKind;

/// What an agent's attention state follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionMode {
    /// Its hook reports.
    Hooks,
    /// Its session's output and CPU.
    Activity,
    /// Nothing: `running` while its process runs.
    None,
}

impl AttentionMode {
    /// The mode config names `name`, if any.
    pub fn parse(name: &str) -> Option<AttentionMode> {
        match name {
            "hooks" => Some(AttentionMode::Hooks),
            "activity" => Some(AttentionMode::Activity),
            "none" => Some(AttentionMode::None),
            _ => None,
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionMode::Hooks => "hooks",
            AttentionMode::Activity => "activity",
            AttentionMode::None => "none",
        }
    }

    /// The mode of agent `id` of `kind` when its config says none. Claude follows its hooks,
    /// since atc installs them itself (`--settings`). Codex and Grok follow their activity:
    /// their hooks are the user's to install, and without them nothing would say that a new
    /// turn began (Codex's notify says only that one ended); a session whose hooks do report
    /// hands itself to them (`sessions::session::activity`). The `shell` agent follows
    /// nothing, so that idle shells do not ask for their user; any other command its
    /// activity.
    pub fn default_for(id: &str, kind: Option<AgentKind>) -> AttentionMode {
        match (kind, id) {
            (Some(AgentKind::Claude), _) => AttentionMode::Hooks,
            (Some(AgentKind::Codex | AgentKind::Grok), _) => AttentionMode::Activity,
            (None, "shell") => AttentionMode::None,
            (None, _) => AttentionMode::Activity,
        }
    }
}

/// The activity rule's thresholds (config `activity`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivityConfig {
    /// Output quiet and CPU idle this long: `needs_you`.
    pub quiet: Duration,
    /// How often the one shared sweep samples every watched session's CPU and judges its
    /// quiet. A session says `needs_you` at most `quiet + sweep` after it went quiet.
    pub sweep: Duration,
    /// A session's processes busier than this, in percent of one CPU between two sweeps,
    /// count as working.
    pub busy_cpu_percent: f64,
}

impl Default for ActivityConfig {
    /// Measured (README, "Attention from activity"): a shell at its prompt writes nothing and
    /// uses no CPU; Claude Code at its idle prompt writes nothing and uses at most 3.6 % of a
    /// CPU in any 5 s window; working behind its spinner it writes about nine times a second
    /// (the longest gap 0.38 s). So any output counts, a quiet spell of 20 s is far past any
    /// gap in working output, 10 % is above what an idle TUI uses, and with a 5 s sweep a
    /// session that went quiet says so within 25 s (the issue asks for 30).
    fn default() -> Self {
        ActivityConfig {
            quiet: Duration::from_secs(20),
            sweep: Duration::from_secs(5),
            busy_cpu_percent: 10.0,
        }
    }
}

/// `activity` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawActivity {
    /// [`ActivityConfig::quiet`] in milliseconds.
    pub quiet_ms: Option<u64>,
    /// [`ActivityConfig::sweep`] in milliseconds.
    pub sweep_ms: Option<u64>,
    /// [`ActivityConfig::busy_cpu_percent`].
    pub busy_cpu_percent: Option<f64>,
}

/// Shortest sweep: a sweep reads `/proc` once for every watched session, so it must not run
/// hot.
const MIN_SWEEP: Duration = Duration::from_millis(100);

impl RawActivity {
    /// The checked thresholds, or the detail of the problem (the defaults then apply).
    pub fn checked(self) -> Result<ActivityConfig, String> {
        let d = ActivityConfig::default();
        let quiet = self.quiet_ms.map_or(d.quiet, Duration::from_millis);
        let sweep = self.sweep_ms.map_or(d.sweep, Duration::from_millis);
        let busy = self.busy_cpu_percent.unwrap_or(d.busy_cpu_percent);
        if sweep < MIN_SWEEP {
            return Err(format!(
                "'sweepMs' must be at least {}",
                MIN_SWEEP.as_millis()
            ));
        }
        if quiet < sweep {
            return Err("'quietMs' must be at least 'sweepMs'".into());
        }
        if !(busy > 0.0 && busy <= 100.0) {
            return Err("'busyCpuPercent' must be above 0 and at most 100".into());
        }
        Ok(ActivityConfig {
            quiet,
            sweep,
            busy_cpu_percent: busy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_follows_hooks_the_shell_nothing_and_other_agents_activity() {
        for kind in AgentKind::ALL {
            let expected = match kind {
                AgentKind::Claude => AttentionMode::Hooks,
                AgentKind::Codex | AgentKind::Grok => AttentionMode::Activity,
            };
            assert_eq!(
                AttentionMode::default_for(kind.as_str(), Some(kind)),
                expected,
                "{kind}"
            );
        }
        assert_eq!(
            AttentionMode::default_for("shell", None),
            AttentionMode::None
        );
        assert_eq!(
            AttentionMode::default_for("aider", None),
            AttentionMode::Activity
        );
        for m in [
            AttentionMode::Hooks,
            AttentionMode::Activity,
            AttentionMode::None,
        ] {
            assert_eq!(AttentionMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(AttentionMode::parse("Hooks"), None);
    }

    #[test]
    fn thresholds_default_and_nonsense_is_named() {
        assert_eq!(
            RawActivity::default().checked(),
            Ok(ActivityConfig::default())
        );
        let d = ActivityConfig::default();
        assert!(d.quiet + d.sweep <= Duration::from_secs(30));
        let raw = |q, s, b| RawActivity {
            quiet_ms: q,
            sweep_ms: s,
            busy_cpu_percent: b,
        };
        assert_eq!(
            raw(Some(900), Some(300), Some(2.5)).checked(),
            Ok(ActivityConfig {
                quiet: Duration::from_millis(900),
                sweep: Duration::from_millis(300),
                busy_cpu_percent: 2.5
            })
        );
        assert!(raw(None, Some(10), None).checked().is_err());
        assert!(raw(Some(200), Some(300), None).checked().is_err());
        assert!(raw(None, None, Some(0.0)).checked().is_err());
        assert!(raw(None, None, Some(150.0)).checked().is_err());
    }
}
