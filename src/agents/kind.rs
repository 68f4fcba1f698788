//! What each agent kind is, in one place: its name in lists, the form of its own session ids,
//! how a user resumes it by hand, and the variable that points it at its config folder inside
//! an imp. Its argv for a start is [`super::launch::shaped_args`], its hook dialect
//! [`super::hooks::normalize`], its spawn options [`super::spawn_options`], each a match over
//! the kind.

use crate::config::agent_kind::AgentKind;

impl AgentKind {
    /// The label the built-in agent of this kind is listed with.
    pub fn label(self) -> &'static str {
        match self {
            AgentKind::Claude => "Claude Code",
            AgentKind::Codex => "Codex",
            AgentKind::Grok => "Grok",
        }
    }

    /// Whether its own session ids are hyphenated UUIDs (Claude's and Codex's are; Grok's
    /// are its own words).
    pub fn session_ids_are_uuids(self) -> bool {
        matches!(self, AgentKind::Claude | AgentKind::Codex)
    }

    /// The words after the program that resume one of its sessions by hand, before the id.
    pub fn resume_words(self) -> &'static [&'static str] {
        match self {
            AgentKind::Claude | AgentKind::Grok => &["--resume"],
            AgentKind::Codex => &["resume"],
        }
    }

    /// The variable that points it at its config folder (a broker-backed agent gets one of
    /// its own per binding revision inside its imp); `None`: it cannot be broker-backed.
    pub fn config_dir_var(self) -> Option<&'static str> {
        match self {
            AgentKind::Claude => Some("CLAUDE_CONFIG_DIR"),
            AgentKind::Codex => Some("CODEX_HOME"),
            AgentKind::Grok => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claude_and_codex_have_uuid_ids_and_a_config_folder() {
        for k in AgentKind::ALL {
            assert_eq!(
                k.session_ids_are_uuids(),
                k.config_dir_var().is_some(),
                "{k}"
            );
        }
        assert_eq!(AgentKind::Codex.resume_words(), ["resume"]);
    }
}
