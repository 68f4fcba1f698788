//! Where a broker-backed agent may run (spec §6.1): only on a target whose provider has a
//! broker, and never with a start env that sets the broker's own variables. It never falls
//! back to a local launch.

use super::{AgentAuth, BrokerError};
use crate::agents::Agent;
use crate::providers::Capabilities;

/// Whether `agent` may start on `target`, whose provider has `caps`. Agents without `auth`
/// may start anywhere the refusal chain allows.
pub fn check(agent: &Agent, target: &str, caps: Option<Capabilities>) -> Result<(), BrokerError> {
    if agent.auth.is_none() {
        return Ok(());
    }
    if !caps.is_some_and(|c| c.broker_auth) {
        return Err(BrokerError::TargetUnsupported {
            agent: agent.id.clone(),
            target: target.to_string(),
        });
    }
    if let Some(variable) = AgentAuth::env_conflict(agent.env.keys()) {
        return Err(BrokerError::GuestEnvConflict {
            agent: agent.id.clone(),
            variable: variable.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn agent(auth: bool, env: &[&str]) -> Agent {
        Agent {
            id: "c".into(),
            label: "c".into(),
            bin: "claude".into(),
            args: vec![],
            env: env
                .iter()
                .map(|k| (k.to_string(), "x".to_string()))
                .collect::<BTreeMap<_, _>>(),
            builtin: false,
            kind: Some(crate::agents::AgentKind::Claude),
            settings: None,
            models: BTreeMap::new(),
            base_url: None,
            auth: auth.then(|| AgentAuth {
                secrets: vec!["s".into()],
                placeholders: vec![],
                check: None,
            }),
            attention: crate::config::attention::AttentionMode::Hooks,
        }
    }

    const BROKER: Capabilities = Capabilities {
        broker_auth: true,
        ..Capabilities::NONE
    };

    #[test]
    fn a_broker_agent_needs_a_broker_target() {
        assert_eq!(check(&agent(false, &[]), "local", None), Ok(()));
        assert!(matches!(
            check(&agent(true, &[]), "local", Some(Capabilities::NONE)),
            Err(BrokerError::TargetUnsupported { .. })
        ));
        assert!(matches!(
            check(&agent(true, &[]), "gone", None),
            Err(BrokerError::TargetUnsupported { .. })
        ));
        assert_eq!(check(&agent(true, &[]), "imp", Some(BROKER)), Ok(()));
    }

    #[test]
    fn an_env_setting_a_broker_variable_conflicts() {
        assert!(matches!(
            check(&agent(true, &["HTTPS_PROXY"]), "imp", Some(BROKER)),
            Err(BrokerError::GuestEnvConflict { variable, .. }) if variable == "HTTPS_PROXY"
        ));
        // Without auth the agent's env is its own business.
        assert_eq!(
            check(&agent(false, &["HTTPS_PROXY"]), "imp", Some(BROKER)),
            Ok(())
        );
    }
}
