//! Which limits a session gets: config's ceilings (the daemon's default, its agent's, its
//! target's) and what its spawn asks, which may only lower them.
//!
//! An agent's entry replaces the daemon's default field by field (a leaky agent may need
//! more than a shell); a target's entry is a ceiling of its own on top, since it speaks for a
//! place, not a program. A spawn takes the ceiling where it says nothing, and answers
//! `bad_args` naming the ceiling where it asks for more.

use atc_protocol::SessionLimits;

/// Why a spawn's limits were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// A value above what config allows for this agent and target.
    #[error(
        "limits.{field} {asked} is above the {ceiling} config allows for this agent and target"
    )]
    AboveCeiling {
        /// The field's wire name (`memoryMiB`, `pids`, `cpuPercent`).
        field: &'static str,
        /// What the spawn asked for.
        asked: u64,
        /// What config allows.
        ceiling: u64,
    },
    /// A value outside what any session can run under.
    #[error("limits.{field} must be between {min} and {max}")]
    OutOfBounds {
        /// The field's wire name.
        field: &'static str,
        /// The lowest allowed.
        min: u64,
        /// The highest allowed.
        max: u64,
    },
    /// The session's target cannot put it in a cgroup (no writable cgroups on this machine,
    /// or a remote target), and the spawn asked for limits.
    #[error("this daemon cannot enforce limits on target {target}: {why}")]
    NoCgroups {
        /// The target.
        target: String,
        /// Why not (the mechanism check's word, or the provider kind).
        why: String,
    },
}

/// Config's limits: the daemon's default and each agent's (a target's are on the target).
#[derive(Debug, Clone, Default)]
pub struct LimitsPolicy {
    /// `limits.session`.
    pub default: SessionLimits,
    /// Each agent's `limits`, by agent id.
    pub agents: std::collections::BTreeMap<String, SessionLimits>,
}

impl LimitsPolicy {
    /// The policy config describes.
    pub fn of(config: &super::Config) -> LimitsPolicy {
        LimitsPolicy {
            default: config.limits.session,
            agents: config
                .agents
                .iter()
                .filter_map(|(id, a)| Some((id.clone(), a.limits?)))
                .collect(),
        }
    }

    /// The ceiling for a session of `agent` on a target with `target` limits.
    pub fn ceiling(&self, agent: &str, target: Option<&SessionLimits>) -> SessionLimits {
        ceiling(&self.default, self.agents.get(agent), target)
    }

    /// Whether config sets any limit anywhere but on targets.
    pub fn is_empty(&self) -> bool {
        self.default.is_empty() && self.agents.values().all(SessionLimits::is_empty)
    }
}

/// The ceiling for a session of an agent on a target: the agent's value where it has one,
/// else the daemon's default, then no higher than the target's.
pub fn ceiling(
    default: &SessionLimits,
    agent: Option<&SessionLimits>,
    target: Option<&SessionLimits>,
) -> SessionLimits {
    let agent = agent.copied().unwrap_or_default();
    let target = target.copied().unwrap_or_default();
    SessionLimits {
        memory_mib: lowest(agent.memory_mib.or(default.memory_mib), target.memory_mib),
        pids: lowest(agent.pids.or(default.pids), target.pids),
        cpu_percent: lowest(
            agent.cpu_percent.or(default.cpu_percent),
            target.cpu_percent,
        ),
    }
}

fn lowest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The limits a spawn runs under: what it asked, each no higher than `ceiling`, and the
/// ceiling where it asked nothing.
pub fn effective(
    asked: Option<&SessionLimits>,
    ceiling: &SessionLimits,
) -> Result<SessionLimits, LimitsError> {
    let asked = asked.copied().unwrap_or_default();
    if let Some((field, min, max)) = asked.out_of_bounds() {
        return Err(LimitsError::OutOfBounds { field, min, max });
    }
    let pick = |field: &'static str,
                asked: Option<u64>,
                ceiling: Option<u64>|
     -> Result<Option<u64>, LimitsError> {
        match (asked, ceiling) {
            (Some(a), Some(c)) if a > c => Err(LimitsError::AboveCeiling {
                field,
                asked: a,
                ceiling: c,
            }),
            (a, c) => Ok(a.or(c)),
        }
    };
    let narrow = |v: Option<u64>| v.map(|v| u32::try_from(v).unwrap_or(u32::MAX));
    Ok(SessionLimits {
        memory_mib: pick("memoryMiB", asked.memory_mib, ceiling.memory_mib)?,
        pids: narrow(pick(
            "pids",
            asked.pids.map(u64::from),
            ceiling.pids.map(u64::from),
        )?),
        cpu_percent: narrow(pick(
            "cpuPercent",
            asked.cpu_percent.map(u64::from),
            ceiling.cpu_percent.map(u64::from),
        )?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(m: Option<u64>, p: Option<u32>, c: Option<u32>) -> SessionLimits {
        SessionLimits {
            memory_mib: m,
            pids: p,
            cpu_percent: c,
        }
    }

    #[test]
    fn an_agent_replaces_the_default_and_a_target_caps_both() {
        let default = l(Some(2048), Some(512), None);
        let agent = l(Some(8192), None, None);
        let target = l(Some(4096), None, Some(200));
        assert_eq!(
            ceiling(&default, Some(&agent), Some(&target)),
            l(Some(4096), Some(512), Some(200))
        );
        assert_eq!(
            ceiling(&default, Some(&agent), None),
            l(Some(8192), Some(512), None)
        );
        assert_eq!(ceiling(&default, None, None), default);
    }

    #[test]
    fn a_spawn_may_lower_but_not_raise_and_takes_the_ceiling_where_silent() {
        let ceiling = l(Some(1024), Some(256), None);
        assert_eq!(
            effective(Some(&l(Some(512), None, Some(50))), &ceiling),
            Ok(l(Some(512), Some(256), Some(50)))
        );
        assert_eq!(effective(None, &ceiling), Ok(ceiling));
        assert_eq!(
            effective(Some(&l(None, Some(300), None)), &ceiling),
            Err(LimitsError::AboveCeiling {
                field: "pids",
                asked: 300,
                ceiling: 256
            })
        );
    }

    #[test]
    fn a_value_no_session_can_run_under_is_refused_by_name() {
        let err = effective(Some(&l(Some(1), None, None)), &SessionLimits::default());
        assert!(matches!(
            err,
            Err(LimitsError::OutOfBounds {
                field: "memoryMiB",
                ..
            })
        ));
    }
}
