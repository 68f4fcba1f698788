//! What every server phase runs with: the [`Context`] (the daemon's client and pid, the
//! plan, the run's id, the progress line) and the [`Server`] it measures, the daemon or the
//! floor; and what every phase does through it: spawn a shell, bound its time, end its
//! sessions.

use std::future::Future;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;

use crate::api::{DaemonApi, SessionId, SpawnRequest};
use crate::args::Plan;
use crate::cleanup::SessionLedger;
use crate::cpu::Ticks;
use crate::floor::Floor;
use crate::phase::{run_bounded, Deadline, Figures, PhaseReport};
use crate::progress::PhaseProgress;
use crate::rss::DaemonPid;
use crate::{CLEANUP_LIMIT, SHELL_AGENT, TERMINAL};

/// The server a phase runs against.
pub(crate) enum Server {
    /// The daemon at the context's URL; sessions are spawned and ended over its API.
    Daemon,
    /// The floor in this process; sessions are spawned and ended by calling it.
    Floor(Floor),
}

/// What every server phase needs: the client, the daemon's pid for RSS, the plan, the run's id
/// that prefixes session names, and which server it is.
pub(crate) struct Context {
    pub(crate) api: DaemonApi,
    pub(crate) pid: Option<DaemonPid>,
    pub(crate) plan: Plan,
    pub(crate) run_id: String,
    pub(crate) server: Server,
    /// The phase line on stderr, shared by the daemon's and the floor's contexts.
    pub(crate) progress: PhaseProgress,
}

impl Context {
    /// A ledger for one phase's sessions, named `bench-<run>-<phase>-<n>`.
    pub(crate) fn ledger(&self, phase: &str) -> SessionLedger {
        SessionLedger::new(format!("bench-{}-{phase}-", self.run_id))
    }

    /// Spawns a `shell` session at the bench's terminal size, named and recorded in `ledger`.
    pub(crate) async fn spawn_shell(
        &self,
        ledger: &SessionLedger,
        deadline: Deadline,
    ) -> anyhow::Result<SessionId> {
        if let Server::Floor(floor) = &self.server {
            let id = floor.spawn_shell(&self.plan.floor_shell, &self.plan.cwd, TERMINAL)?;
            ledger.record(id);
            return Ok(id);
        }
        let name = ledger.next_name();
        let spawn = SpawnRequest {
            agent: SHELL_AGENT,
            cwd: &self.plan.cwd,
            name: &name,
            cols: TERMINAL.cols,
            rows: TERMINAL.rows,
            limits: None,
        };
        let id = deadline
            .within("spawning the shell session", self.api.spawn(&spawn))
            .await??;
        ledger.record(id);
        Ok(id)
    }

    /// Announces a phase and runs its body under the phase limit.
    pub(crate) async fn bounded<T, F, Fut>(&self, label: &str, body: F) -> PhaseReport<T>
    where
        T: Figures,
        F: FnOnce(Deadline) -> Fut,
        Fut: Future<Output = anyhow::Result<T>>,
    {
        self.progress.start(label);
        run_bounded(self.plan.phase_limit, body).await
    }

    /// CPU the server has used so far: the daemon process, or the floor's threads.
    pub(crate) fn server_cpu(&self) -> Option<Ticks> {
        match &self.server {
            Server::Daemon => self.pid.and_then(DaemonPid::cpu_ticks),
            Server::Floor(floor) => floor.cpu_ticks(),
        }
    }

    /// Runs a server phase: announced as `label`, with a ledger of its own named for `key`,
    /// bounded, and its sessions ended afterwards however it ended.
    pub(crate) async fn server_phase<T, F>(&self, label: &str, key: &str, body: F) -> PhaseReport<T>
    where
        T: Figures,
        F: for<'a> FnOnce(
            &'a Context,
            &'a SessionLedger,
            Deadline,
        ) -> LocalBoxFuture<'a, anyhow::Result<T>>,
    {
        let ledger = self.ledger(key);
        let r = self.bounded(label, |d| body(self, &ledger, d)).await;
        self.clean_up(&ledger, r).await
    }

    /// Ends a phase's sessions and, for the daemon, attaches the cleanup figures to its report.
    pub(crate) async fn clean_up<T>(
        &self,
        ledger: &SessionLedger,
        report: PhaseReport<T>,
    ) -> PhaseReport<T> {
        self.clean_up_within(ledger, report, CLEANUP_LIMIT).await
    }

    /// [`Context::clean_up`] with its own time limit, for phases with more sessions than usual.
    pub(crate) async fn clean_up_within<T>(
        &self,
        ledger: &SessionLedger,
        mut report: PhaseReport<T>,
        limit: Duration,
    ) -> PhaseReport<T> {
        if let Server::Floor(floor) = &self.server {
            // This blocks the bench's thread while the shells are killed and their readers
            // end; the phase is over, so nothing it measures is in flight.
            floor.end_sessions(&ledger.ids());
            return report;
        }
        report.cleanup = Some(
            ledger
                .clean_up(&self.api, self.plan.concurrency, limit, self.pid)
                .await,
        );
        report
    }
}
