//! What a broker-backed agent's harness gets inside its imp (spec §6.1, issue 9 item 6):
//! the guest environment plus its placeholders, and a config folder of its own per binding
//! revision, so a rebind never reuses what an earlier credential left behind.

use crate::config::agent_auth::{AgentAuth, PLACEHOLDER_VALUE};
use crate::config::agent_kind::AgentKind;

/// The broker part of a launch plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLaunch {
    /// The agent, and its `auth` as configured (names only), which its host is bound to.
    pub agent: String,
    /// Its `auth`.
    pub auth: AgentAuth,
    /// Variables set to [`PLACEHOLDER_VALUE`].
    pub placeholders: Vec<String>,
    /// The variable that points the agent at its config folder: `CLAUDE_CONFIG_DIR` for
    /// Claude, `CODEX_HOME` for Codex.
    pub config_dir_var: &'static str,
    /// The binding revision the launch was planned for.
    pub revision: u32,
}

impl BrokerLaunch {
    /// The broker part of a launch of an agent of `kind` with `auth`; `None` for a kind that
    /// cannot carry `auth` (the config refuses those).
    pub fn plan(
        agent: &str,
        kind: Option<AgentKind>,
        auth: &AgentAuth,
        revision: u32,
    ) -> Option<BrokerLaunch> {
        let config_dir_var = kind?.config_dir_var()?;
        Some(BrokerLaunch {
            agent: agent.to_string(),
            auth: auth.clone(),
            placeholders: auth.placeholders.clone(),
            config_dir_var,
            revision,
        })
    }

    /// The agent's config folder inside the imp: `<guestDir>/sessions/<id>/auth-r<revision>`.
    pub fn config_dir(&self, guest_dir: &str, session_id: &str) -> String {
        format!(
            "{}/sessions/{session_id}/auth-r{}",
            guest_dir.trim_end_matches('/'),
            self.revision
        )
    }

    /// The variables the harness's environment gets on top of the guest's.
    pub fn env(&self, guest_dir: &str, session_id: &str) -> Vec<(String, String)> {
        self.placeholders
            .iter()
            .map(|p| (p.clone(), PLACEHOLDER_VALUE.to_string()))
            .chain(std::iter::once((
                self.config_dir_var.to_string(),
                self.config_dir(guest_dir, session_id),
            )))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> AgentAuth {
        AgentAuth {
            secrets: vec!["s".into()],
            placeholders: vec!["CLAUDE_CODE_OAUTH_TOKEN".into()],
            check: None,
        }
    }

    #[test]
    fn claude_and_codex_get_their_config_folder_per_revision() {
        let claude = BrokerLaunch::plan("a", Some(AgentKind::Claude), &auth(), 3).unwrap();
        assert_eq!(
            claude.env("/var/atc/", "abc"),
            [
                (
                    "CLAUDE_CODE_OAUTH_TOKEN".to_string(),
                    PLACEHOLDER_VALUE.to_string()
                ),
                (
                    "CLAUDE_CONFIG_DIR".to_string(),
                    "/var/atc/sessions/abc/auth-r3".to_string()
                ),
            ]
        );
        let codex = BrokerLaunch::plan("a", Some(AgentKind::Codex), &auth(), 1).unwrap();
        assert_eq!(codex.config_dir_var, "CODEX_HOME");
        assert_eq!(
            BrokerLaunch::plan("a", Some(AgentKind::Grok), &auth(), 1),
            None
        );
    }
}
