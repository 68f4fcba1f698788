//! The agent kinds atc knows: `claude`, `codex` and `grok`, whose spawn options, argv
//! shapes, resume, hooks and guest plans it has (spec §9.3). Any other command is an agent
//! without a kind. The name is read here, where the config is; what each kind does is the
//! agents' (`agents::kind`).

use std::fmt;

/// An agent CLI atc knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgentKind {
    /// Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
    /// Grok's CLI.
    Grok,
}

impl AgentKind {
    /// Every kind, in the order lists name them.
    pub const ALL: [AgentKind; 3] = [AgentKind::Claude, AgentKind::Codex, AgentKind::Grok];

    /// The name config and clients use.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Grok => "grok",
        }
    }

    /// The kind called `name`, if atc knows it.
    pub fn parse(name: &str) -> Option<AgentKind> {
        AgentKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_no_kind() {
        for k in AgentKind::ALL {
            assert_eq!(AgentKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(AgentKind::parse("shell"), None);
        assert_eq!(AgentKind::parse("Claude"), None);
    }
}
