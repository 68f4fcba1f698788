//! The activity rule (issue 38): the attention state of a session whose agent has no hooks,
//! judged from what atc measures without reading the screen. Output quiet and CPU idle for
//! `quiet` is `needs_you` ("idle since …"); output, or CPU busier than `busy_cpu_percent`
//! between two sweeps, is `running` again.
//!
//! Any output counts, however small: a TUI working behind a spinner writes a frame every
//! 80–100 ms while its own CPU sits near zero (it waits on a model), so CPU alone would call
//! it idle; and a shell or TUI waiting at its prompt writes nothing at all (README,
//! "Activity", has the measurements). CPU catches the work that prints nothing (a build, a
//! test run with its output redirected).
//!
//! [`ActivityRule`] is a plain state machine over injected instants, unit-tested below. It
//! runs on two kinds of events only: the session's own output, and the one shared sweep
//! (`sessions::activity_sweep`), which brings a CPU sample and is the only event that can
//! find a session quiet. There is no timer per session. Below it, the session's side:
//! applying what the rule says to its attention.

use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use atc_protocol::{SessionState, StateSource};

use super::Session;
use crate::agents::AgentCatalog;
use crate::config::attention::{ActivityConfig, AttentionMode};
use crate::sessions::activity_sweep::{CpuSampled, CpuSource, Unwatch, Watch};

/// What the rule last concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Output or CPU seen within `quiet`.
    Active,
    /// Nothing since this instant.
    Quiet,
}

/// Why a session is active again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// It wrote output.
    Output,
    /// Its processes used CPU.
    Cpu,
}

/// A change of the rule's verdict, which the session applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Active again.
    Active(Cause),
    /// Quiet and idle for this long now (at least `quiet`).
    Quiet {
        /// Since the last output or busy sample.
        for_: Duration,
    },
}

/// One session's activity rule.
#[derive(Debug)]
pub struct ActivityRule {
    quiet: Duration,
    /// CPU seconds per second above which a sample is busy.
    busy: f64,
    /// The last output or busy sample (the start counts as activity).
    last_active: Instant,
    /// The previous CPU sample: when, and the CPU seconds then.
    last_cpu: Option<(Instant, f64)>,
    verdict: Verdict,
}

impl ActivityRule {
    /// A rule for a process that started at `now`: active until it has been quiet a while.
    pub fn new(config: &ActivityConfig, now: Instant) -> ActivityRule {
        ActivityRule {
            quiet: config.quiet,
            busy: config.busy_cpu_percent / 100.0,
            last_active: now,
            last_cpu: None,
            verdict: Verdict::Active,
        }
    }

    /// The session wrote output at `now`.
    pub fn output(&mut self, now: Instant) -> Option<Change> {
        self.last_active = self.last_active.max(now);
        self.wake(Cause::Output)
    }

    /// The sweep at `now`, with the CPU seconds the session's processes have used so far
    /// (`None`: not measurable, as for a session running elsewhere; its output alone then
    /// counts).
    pub fn sample(&mut self, now: Instant, cpu_seconds: Option<f64>) -> Option<Change> {
        let busy = match (self.last_cpu, cpu_seconds) {
            (Some((then, before)), Some(cpu)) if now > then => {
                // A tree that lost a process the kernel did not fold into a parent's times
                // can go down; that is no work done.
                let used = (cpu - before).max(0.0);
                used / (now - then).as_secs_f64() >= self.busy
            }
            _ => false,
        };
        self.last_cpu = cpu_seconds.map(|cpu| (now, cpu));
        if busy {
            self.last_active = self.last_active.max(now);
            return self.wake(Cause::Cpu);
        }
        let for_ = now.saturating_duration_since(self.last_active);
        if self.verdict == Verdict::Active && for_ >= self.quiet {
            self.verdict = Verdict::Quiet;
            return Some(Change::Quiet { for_ });
        }
        None
    }

    /// The user pressed Enter at `now`: whatever the verdict, the session is active from here,
    /// so the quiet that follows a submitted line counts from the line.
    pub fn input(&mut self, now: Instant) {
        self.last_active = self.last_active.max(now);
        self.verdict = Verdict::Active;
    }

    fn wake(&mut self, cause: Cause) -> Option<Change> {
        match self.verdict {
            Verdict::Active => None,
            Verdict::Quiet => {
                self.verdict = Verdict::Active;
                Some(Change::Active(cause))
            }
        }
    }
}

/// `lastMsg` of a session found quiet for `for_` at `now`: `idle since <RFC 3339 UTC>`.
pub fn idle_message(now: SystemTime, for_: Duration) -> String {
    let since = now.checked_sub(for_).unwrap_or(now);
    let ms = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    format!("idle since {}", crate::clock::rfc3339_at(ms))
}

/// What the attention of a session of `agent` follows; an agent no longer in the catalog
/// (its config entry went) is judged like any command without hooks.
pub fn mode_of(catalog: &AgentCatalog, agent: &str) -> AttentionMode {
    catalog
        .get(agent)
        .map_or(AttentionMode::default_for(agent, None), |a| a.attention)
}

/// Where a session's state comes from before anything moved it.
pub fn initial_source(mode: AttentionMode) -> Option<StateSource> {
    match mode {
        AttentionMode::Hooks => Some(StateSource::Hooks),
        AttentionMode::Activity => Some(StateSource::Activity),
        AttentionMode::None => None,
    }
}

impl Session {
    /// A process started (spawn, revive, re-attach): under the activity rule, a fresh rule,
    /// and the shared sweep samples the session from now on.
    pub(super) fn start_activity(&mut self, me: &Addr<Session>) {
        if self.attention_mode != AttentionMode::Activity {
            return;
        }
        let watch = &self.deps.activity;
        self.activity = Some(ActivityRule::new(&watch.config, Instant::now()));
        let cgroups = (!self.remote)
            .then(|| {
                self.deps
                    .providers
                    .get(&self.record.target)
                    .and_then(|p| p.session_cgroups().cloned())
            })
            .flatten();
        let source = match (cgroups, &self.record.leader) {
            (Some(cgroups), _) => CpuSource::Cgroup(cgroups),
            (None, Some(leader)) if !self.remote => CpuSource::Tree(leader.pid),
            _ => CpuSource::Unmeasured,
        };
        watch.sweep.do_send(Watch {
            id: self.record.id,
            source,
            to: me.clone().recipient(),
        });
    }

    /// The process ended: nothing more to sample.
    pub(super) fn stop_activity(&mut self) {
        if self.activity.take().is_some() {
            self.deps.activity.sweep.do_send(Unwatch(self.record.id));
        }
    }

    /// Whether the activity rule judges this session now.
    pub(super) fn activity_watched(&self) -> bool {
        self.activity.is_some()
    }

    /// A client pressed Enter at `now` (typed through its port, `POST .../input`, or
    /// `POST .../submit`). Under the rule that starts a turn: nothing else would say one began,
    /// since Codex's notify says only that a turn ended and no hook says it started. So a
    /// `done` or `needs_you` session is `running` again, and quiet counts from here.
    pub(super) fn activity_input(&mut self, now: Instant) {
        let Some(rule) = self.activity.as_mut() else {
            return;
        };
        rule.input(now);
        if matches!(
            self.attention.state(),
            SessionState::Done | SessionState::NeedsYou
        ) {
            self.attention.say("active: input");
            self.attention.set_unread(false);
            self.attention.set_source(StateSource::Activity);
            self.set_attention(SessionState::Running);
            self.notify_state();
        }
    }

    /// A report that only real hooks send (a prompt submitted) came under the rule: this
    /// agent's hooks are installed, so they are authoritative, and the rule stops judging the
    /// session until its process starts again.
    pub(super) fn hand_over_to_hooks(&mut self) {
        if self.activity.is_some() {
            tracing::debug!(session = %self.record.id, "hooks report: the activity rule stands down");
            self.stop_activity();
        }
    }

    /// The session's output at `now`, for its activity rule if it has one.
    pub(super) fn activity_output(&mut self, now: Instant) {
        if let Some(change) = self.activity.as_mut().and_then(|r| r.output(now)) {
            self.apply_activity(change);
        }
    }

    /// Applies a change of the rule's verdict. The rule moves a session only between
    /// `running` and `needs_you`: a `done` a hook reported stays until a hook, an attach or
    /// the process's end changes it.
    fn apply_activity(&mut self, change: Change) {
        let state = self.attention.state();
        let (next, msg) = match change {
            Change::Quiet { for_ } if state == SessionState::Running => (
                SessionState::NeedsYou,
                idle_message(SystemTime::now(), for_),
            ),
            Change::Active(cause) if state == SessionState::NeedsYou => (
                SessionState::Running,
                match cause {
                    Cause::Output => "active: output".to_string(),
                    Cause::Cpu => "active: CPU".to_string(),
                },
            ),
            _ => return,
        };
        self.attention.say(msg);
        if next == SessionState::NeedsYou {
            self.attention.set_unread(true);
        }
        self.attention.set_source(StateSource::Activity);
        self.set_attention(next);
        self.notify_state();
    }
}

impl Handler<crate::sessions::messages::LineSubmitted> for Session {
    type Result = ();

    /// An attached client pressed Enter, past the session (its input port).
    fn handle(&mut self, _: crate::sessions::messages::LineSubmitted, _: &mut Self::Context) {
        if self.harness.is_some() {
            self.activity_input(Instant::now());
        }
    }
}

impl Handler<CpuSampled> for Session {
    type Result = ();

    /// The shared sweep's sample: the only event that can find the session quiet.
    fn handle(&mut self, msg: CpuSampled, _: &mut Self::Context) {
        if self.harness.is_none() {
            return;
        }
        if let Some(change) = self
            .activity
            .as_mut()
            .and_then(|r| r.sample(msg.at, msg.cpu_seconds))
        {
            self.apply_activity(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: Duration = Duration::from_secs(20);

    fn rule(start: Instant) -> ActivityRule {
        ActivityRule::new(
            &ActivityConfig {
                quiet: QUIET,
                sweep: Duration::from_secs(5),
                busy_cpu_percent: 5.0,
            },
            start,
        )
    }

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn quiet_and_idle_past_the_threshold_is_quiet_once_and_output_wakes_it() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        assert_eq!(r.sample(at(t0, 5), Some(1.0)), None);
        assert_eq!(
            r.sample(at(t0, 15), Some(1.0)),
            None,
            "not quiet long enough"
        );
        assert_eq!(
            r.sample(at(t0, 20), Some(1.0)),
            Some(Change::Quiet { for_: QUIET })
        );
        assert_eq!(r.sample(at(t0, 25), Some(1.0)), None, "said once");
        assert_eq!(r.output(at(t0, 26)), Some(Change::Active(Cause::Output)));
        assert_eq!(r.output(at(t0, 27)), None, "already active");
        // Quiet counts again from the last output.
        assert_eq!(r.sample(at(t0, 45), Some(1.0)), None);
        assert_eq!(
            r.sample(at(t0, 50), Some(1.0)),
            Some(Change::Quiet {
                for_: Duration::from_secs(23)
            })
        );
    }

    #[test]
    fn output_keeps_it_active_whatever_the_cpu() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        // A spinner: a frame a second, no CPU to speak of.
        for s in 1..=60 {
            assert_eq!(r.output(at(t0, s)), None);
            if s % 5 == 0 {
                assert_eq!(r.sample(at(t0, s), Some(0.0)), None, "at {s}s");
            }
        }
    }

    #[test]
    fn busy_cpu_keeps_it_active_and_wakes_a_quiet_one() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        // Silent work: a whole CPU for a minute, no output.
        for (i, s) in (5..=60).step_by(5).enumerate() {
            assert_eq!(r.sample(at(t0, s), Some(5.0 * i as f64)), None, "at {s}s");
        }
        // It stops: quiet 20 s after the last busy sample.
        assert_eq!(r.sample(at(t0, 65), Some(55.0)), None);
        assert_eq!(r.sample(at(t0, 75), Some(55.0)), None);
        assert_eq!(
            r.sample(at(t0, 80), Some(55.0)),
            Some(Change::Quiet { for_: QUIET })
        );
        // 0.5 s over 5 s is 10 %: busy.
        assert_eq!(
            r.sample(at(t0, 85), Some(55.5)),
            Some(Change::Active(Cause::Cpu))
        );
    }

    #[test]
    fn cpu_below_the_threshold_a_first_sample_or_a_fall_is_idle() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        // The first sample has nothing to compare with, however large.
        assert_eq!(r.sample(at(t0, 5), Some(100.0)), None);
        // 0.2 s over 5 s is 4 %, under 5 %.
        assert_eq!(r.sample(at(t0, 10), Some(100.2)), None);
        // A tree that lost a process reads less: no work.
        assert_eq!(r.sample(at(t0, 15), Some(50.0)), None);
        assert_eq!(
            r.sample(at(t0, 20), Some(50.0)),
            Some(Change::Quiet { for_: QUIET })
        );
    }

    #[test]
    fn without_cpu_figures_output_alone_counts() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        assert_eq!(r.sample(at(t0, 10), None), None);
        assert_eq!(
            r.sample(at(t0, 20), None),
            Some(Change::Quiet { for_: QUIET })
        );
        assert_eq!(r.output(at(t0, 21)), Some(Change::Active(Cause::Output)));
        // A sample that was taken before the output landed does not undo it.
        assert_eq!(r.sample(at(t0, 20), None), None);
    }

    #[test]
    fn a_submitted_line_makes_it_active_and_quiet_counts_from_the_line() {
        let t0 = Instant::now();
        let mut r = rule(t0);
        assert_eq!(
            r.sample(at(t0, 20), Some(0.0)),
            Some(Change::Quiet { for_: QUIET })
        );
        r.input(at(t0, 30));
        // Active again without any output: no wake is due when output comes.
        assert_eq!(r.output(at(t0, 31)), None);
        assert_eq!(r.sample(at(t0, 50), Some(0.0)), None, "19 s after output");
        assert_eq!(
            r.sample(at(t0, 51), Some(0.0)),
            Some(Change::Quiet { for_: QUIET })
        );
        // A line typed while active moves the quiet's start too.
        r.output(at(t0, 52));
        r.input(at(t0, 60));
        assert_eq!(r.sample(at(t0, 75), Some(0.0)), None);
        assert_eq!(
            r.sample(at(t0, 80), Some(0.0)),
            Some(Change::Quiet { for_: QUIET })
        );
    }

    #[test]
    fn the_idle_message_names_when_it_went_quiet() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_020);
        assert_eq!(
            idle_message(now, Duration::from_secs(20)),
            "idle since 2027-01-15T08:00:00.000Z"
        );
    }
}
