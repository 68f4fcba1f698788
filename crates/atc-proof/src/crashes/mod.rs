//! The `crashes` suite (issue 12 item 2): `kill -9` of a daemon child at random moments of
//! keyed spawns, each time restarted on the same state dir, and what the promise says must
//! never happen counted from outside the daemon.
//!
//! One impd simulator runs for the whole suite and outlives every daemon, as a real impd
//! would. Each life, [`load`]'s careful clients send keyed spawns of three kinds (a local
//! PTY, the imp target, the imp target with a broker-backed agent), each running a program
//! that appends a line to a file in its key's own cwd and then waits as `cat`; the killer
//! picks the moment. Between the kill and the restart the database gets `PRAGMA
//! integrity_check`; after the restart the idempotency and fleet tables are read
//! ([`evidence`]). A last life retries every key still without an answer, and the daemon is
//! stopped so the effect files and tables can be read at rest.
//!
//! Double spawns are counted from the effect files (one key, more than one run), never from
//! what the daemon says. A remote session keeps running in the simulator across restarts (the
//! next daemon re-attaches it); to keep re-attaches from growing with the run, each life kills
//! the remote sessions of earlier lives past the newest [`REMOTE_KEPT`] (their rows stay).

mod evidence;
mod load;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::rng::Rng;
use crate::{Plan, Report, Suite, Want};
use atc_testkit::{ChildDaemon, DaemonSpec};
use evidence::Ledger;
use load::{Book, Client, KillMoment, Kind, Outcome, Signals};

/// The agent every local and plain imp key spawns.
const MARK_AGENT: &str = "mark";
/// The broker-backed agent (an `auth` section the simulator's broker serves).
const BROKER_AGENT: &str = "brokered";
/// The imp target on the simulator.
const IMP_TARGET: &str = "box";
/// The secret the broker-backed agent binds.
const SECRET: &str = "crash-secret";
/// What each spawned program runs: its evidence first, then it waits for input like `cat`.
const SCRIPT: &str = "echo \"$$ $ATC_SESSION_ID\" >> spawned; exec cat";
/// Concurrent clients per life.
const CLIENTS: usize = 4;
/// New keys a client may start per life; a life is normally over (killed) long before.
const KEYS_PER_CLIENT: u64 = 40;
/// Remote sessions left running into the next life, so restarts re-attach some.
const REMOTE_KEPT: usize = 4;
/// The longest a life waits for its kill moment.
const LIFE_LIMIT: Duration = Duration::from_secs(10);
/// Rounds of retries in the last life for keys still without an answer.
const SETTLE_ROUNDS: usize = 3;
/// Notes about single keys, at most.
const NOTES: usize = 12;

/// Runs the suite: `plan.count` kills (100 by default).
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let kills = plan.count_or(100);
    let began = Instant::now();
    let root = plan.work_dir.join("crashes");
    let (state, logs, keys, guest) = (
        root.join("state"),
        root.join("logs"),
        root.join("keys"),
        root.join("guest"),
    );
    for dir in [&state, &logs, &keys, &guest] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let sim = start_sim()?;
    let spec = DaemonSpec::new(plan.daemon_bin.clone(), config_json(&sim, &guest));
    let mut world = World {
        spec,
        state,
        logs,
        keys,
        rng: Rng::new(plan.seed),
        prefix: format!("k{:x}", plan.seed & 0xffff_ffff),
        book: Rc::new(RefCell::new(Book::default())),
        tally: Tally::default(),
    };
    let mut daemon = Some(world.start(0).await?);
    let mut report = Report::new(Suite::Crashes, plan.seed);
    let mut lives = 0;
    for life in 1..=kills {
        if began.elapsed() >= plan.limit {
            report.note(format!(
                "cut short by the time limit after {} of {kills} kills",
                life - 1
            ));
            break;
        }
        let Some(d) = daemon.take() else { break };
        world.live_and_kill(d, life).await?;
        lives = life;
        world.check_at_rest().await;
        match world.start(life).await {
            Ok(d) => {
                world.check_after_restart().await;
                world.check_reattached(&d).await;
                world.retire_remote(&d).await;
                daemon = Some(d);
            }
            Err(e) => {
                world.tally.restart_failures += 1;
                report.note(format!("restart {life} failed: {e:#}"));
                break;
            }
        }
    }
    if let Some(d) = daemon.take() {
        world
            .settle(&d, plan.limit.saturating_sub(began.elapsed()))
            .await;
        world.count_orphans(&d, &sim).await;
        if !d.stop_within(Duration::from_secs(15)).await {
            report.note("the last daemon did not stop within 15 s of SIGTERM and was killed");
        }
        world.check_at_rest().await;
        world.check_after_restart().await;
    }
    sim.stop();
    world.figures(&mut report, kills, lives);
    Ok(report)
}

/// The ids of the sessions the daemon lists alive, `None` when it could not be asked.
async fn live_sessions(d: &ChildDaemon) -> Option<BTreeSet<String>> {
    let list = d.client().get_json("/v1/sessions").await.ok()?;
    Some(
        list["sessions"]
            .as_array()?
            .iter()
            .filter(|s| s["alive"] == true)
            .filter_map(|s| s["id"].as_str().map(str::to_string))
            .collect(),
    )
}

/// The impd simulator the suite's imp target talks to: one secret for the broker-backed
/// agent, grantable by its token, with the features the broker gate asks for.
fn start_sim() -> anyhow::Result<impd_sim::ImpdSim> {
    use impd_sim::{Flag, FlagState, Identity, Scope, SecretKind, SimOptions};
    let sim = impd_sim::ImpdSim::try_start(SimOptions::default())
        .context("starting the impd simulator")?;
    let faults = sim.faults();
    faults.add_secret(SECRET, SecretKind::Custom, &["crash.example"]);
    faults.set_feature(Flag::GrantableTokens, FlagState::True);
    faults.set_feature(Flag::SecretRebind, FlagState::True);
    let identity = Identity {
        scope: Scope::Manage,
        imps: Some(vec!["atc-*".into()]),
        grantable: Some(vec![SECRET.into()]),
        ..Identity::default()
    };
    anyhow::ensure!(
        faults.set_identity(sim.token(), identity),
        "the simulator does not know its own token"
    );
    Ok(sim)
}

/// The daemons' config: the marking agent, the broker-backed one, the local and imp targets.
fn config_json(sim: &impd_sim::ImpdSim, guest: &Path) -> Value {
    json!({
        "agents": {
            MARK_AGENT: {"bin": "/bin/sh", "args": ["-c", SCRIPT]},
            BROKER_AGENT: {"kind": "codex", "bin": "/bin/sh", "args": ["-c", SCRIPT],
                           "auth": {"secrets": [SECRET], "placeholders": ["OPENAI_API_KEY"]}},
        },
        "targets": {
            "local": {"provider": "local-pty"},
            IMP_TARGET: {"provider": "imp", "url": sim.url(), "tokenFile": sim.token_file(),
                         "guestDir": guest},
        },
        "defaultTarget": "local",
        "limits": {"killGraceMs": 300},
    })
}

/// What the checks counted over the run.
#[derive(Debug, Default)]
struct Tally {
    kills_in_flight: u64,
    moments: BTreeMap<&'static str, u64>,
    integrity_failures: u64,
    in_progress_after_restart: u64,
    /// Answered sessions found missing from the fleet after a restart (each once).
    rows_lost: BTreeSet<String>,
    restart_failures: u64,
    ledger_read_failures: u64,
    restarts: Vec<Duration>,
    answered_per_life: Vec<u64>,
    remote_retired: u64,
    /// Remote sessions the suite killed itself: not expected alive after a restart.
    retired: BTreeSet<String>,
    /// Remote sessions answered with a session (not killed by the suite) that a restart did
    /// not bring back alive (re-attaching), each once.
    not_reattached: BTreeSet<String>,
    /// Guest processes the simulator still ran at the end with no live session of the
    /// daemon's behind them.
    orphans: u64,
    /// The last ledger read.
    last_ledger: Ledger,
    notes: Vec<String>,
}

impl Tally {
    fn note(&mut self, text: String) {
        if self.notes.len() < NOTES {
            self.notes.push(text);
        }
    }
}

/// The suite's state across lives.
struct World {
    spec: DaemonSpec,
    state: PathBuf,
    logs: PathBuf,
    keys: PathBuf,
    rng: Rng,
    prefix: String,
    book: Rc<RefCell<Book>>,
    tally: Tally,
}

impl World {
    fn db(&self) -> PathBuf {
        self.state.join("atc.db")
    }

    /// Starts life `life`'s daemon, timing it.
    async fn start(&mut self, life: u64) -> anyhow::Result<ChildDaemon> {
        let log = self.logs.join(format!("daemon-{life:03}.log"));
        let began = Instant::now();
        let d = ChildDaemon::launch(&self.spec, &self.state, &log).await?;
        if life > 0 {
            self.tally.restarts.push(began.elapsed());
        }
        Ok(d)
    }

    /// One life: the clients send keyed spawns until the killer's moment, then SIGKILL.
    async fn live_and_kill(&mut self, daemon: ChildDaemon, life: u64) -> anyhow::Result<()> {
        let signals = Rc::new(Signals::for_clients(CLIENTS));
        let settled_before = self.answered();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                Client {
                    url: daemon.url().to_string(),
                    token: daemon.token().to_string(),
                    keys_dir: self.keys.clone(),
                    prefix: format!("{}-{life}", self.prefix),
                    life,
                    new_keys: KEYS_PER_CLIENT,
                }
                .run(self.book.clone(), signals.clone())
            })
            .collect();
        let moment = KillMoment::pick(&mut self.rng);
        // At least one answer per life, so every life has spawns to kill among; half the
        // lives last long enough for slow spawns to complete.
        let warmup = load::Warmup {
            answers: 1 + self.rng.below(3),
            time: match self.rng.chance(0.5) {
                true => Duration::from_millis(self.rng.between(200, 1500)),
                false => Duration::ZERO,
            },
        };
        let mut killer_rng = Rng::new(self.rng.next_u64());
        let killer = {
            let signals = signals.clone();
            async move {
                load::kill_moment(&signals, moment, warmup, &mut killer_rng, LIFE_LIMIT).await;
                let in_flight = signals.in_flight();
                daemon.kill();
                in_flight
            }
        };
        let (_, killed) = tokio::join!(futures_util::future::join_all(clients), killer);
        let in_flight = killed;
        self.tally.kills_in_flight += u64::from(in_flight > 0);
        *self.tally.moments.entry(moment.name()).or_default() += 1;
        self.tally
            .answered_per_life
            .push(self.answered() - settled_before);
        Ok(())
    }

    /// Spawns answered with a session so far.
    fn answered(&self) -> u64 {
        self.book
            .borrow()
            .settled
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Spawned { .. }))
            .count() as u64
    }

    /// Between the kill and the restart: the database as the dead daemon left it.
    async fn check_at_rest(&mut self) {
        match evidence::integrity_check(&self.db()).await {
            Ok(None) => {}
            Ok(Some(said)) => {
                self.tally.integrity_failures += 1;
                self.tally
                    .note(format!("integrity_check after a kill: {said}"));
            }
            Err(e) => {
                self.tally.integrity_failures += 1;
                self.tally
                    .note(format!("integrity_check could not run: {e:#}"));
            }
        }
    }

    /// After a restart, before any new load: no key left in progress, and every answered
    /// session still a fleet row.
    async fn check_after_restart(&mut self) {
        let ledger = match evidence::read_ledger(&self.db()).await {
            Ok(l) => l,
            Err(e) => {
                self.tally.ledger_read_failures += 1;
                self.tally
                    .note(format!("the ledger could not be read: {e:#}"));
                return;
            }
        };
        let in_progress: Vec<String> = ledger
            .in_state("in_progress")
            .map(|k| k.key.clone())
            .collect();
        if !in_progress.is_empty() {
            self.tally.in_progress_after_restart += in_progress.len() as u64;
            self.tally.note(format!(
                "keys in progress after a restart: {}",
                in_progress.join(", ")
            ));
        }
        let mut lost = Vec::new();
        for settled in &self.book.borrow().settled {
            let session = match &settled.outcome {
                Outcome::Spawned { session, .. } => session,
                // A completed key whose session is not listed: its row is gone.
                Outcome::NotListed { effect_ref } => effect_ref,
                _ => continue,
            };
            if !ledger.fleet.contains(session) && self.tally.rows_lost.insert(session.clone()) {
                lost.push(format!("{} ({})", settled.task.key, session));
            }
        }
        if !lost.is_empty() {
            self.tally.note(format!(
                "answered sessions with no fleet row: {}",
                lost.join(", ")
            ));
        }
        self.tally.last_ledger = ledger;
    }

    /// Kills the remote sessions of earlier lives past the newest few, so the processes the
    /// simulator holds (and the next restart re-attaches) stay bounded. Their rows stay.
    async fn retire_remote(&mut self, d: &ChildDaemon) {
        let client = Rc::new(d.client());
        let Ok(list) = client.get_json("/v1/sessions").await else {
            // Nothing retired this life; the next one tries again.
            return;
        };
        let mut remote: Vec<(i64, String)> = list["sessions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|s| s["alive"] == true && s["locator"]["targetID"] == IMP_TARGET)
            .filter_map(|s| {
                Some((
                    s["createdAt"].as_i64().unwrap_or(0),
                    s["id"].as_str()?.to_string(),
                ))
            })
            .collect();
        remote.sort();
        let old = remote.len().saturating_sub(REMOTE_KEPT);
        let kills = remote[..old].iter().map(|(_, id)| {
            let client = client.clone();
            async move {
                client
                    .post_json(&format!("/v1/sessions/{id}/kill"), &json!({}))
                    .await
                    .is_ok()
            }
        });
        let done = futures_util::future::join_all(kills).await;
        self.tally.remote_retired += done.into_iter().filter(|ok| *ok).count() as u64;
        // Asked to end, whether or not the kill was answered: no longer expected alive.
        self.tally
            .retired
            .extend(remote[..old].iter().map(|(_, id)| id.clone()));
    }

    /// After a restart: every remote session answered with a session, and not killed by
    /// the suite, is listed alive again (re-attaching): its `cat` never exits by itself and
    /// keeps running in the simulator across the kill.
    async fn check_reattached(&mut self, d: &ChildDaemon) {
        let alive = match live_sessions(d).await {
            Some(alive) => alive,
            None => {
                self.tally.ledger_read_failures += 1;
                self.tally
                    .note("GET /v1/sessions failed after a restart".into());
                return;
            }
        };
        let mut missing = Vec::new();
        for settled in &self.book.borrow().settled {
            let (Outcome::Spawned { session, replayed }, Kind::Imp | Kind::Broker) =
                (&settled.outcome, settled.task.kind)
            else {
                continue;
            };
            // A replay may answer a session whose process never started (its row was
            // written, then the daemon died): only first answers promise a running process.
            if *replayed || self.tally.retired.contains(session) || alive.contains(session) {
                continue;
            }
            if self.tally.not_reattached.insert(session.clone()) {
                missing.push(format!("{} ({session})", settled.task.key));
            }
        }
        if !missing.is_empty() {
            self.tally.note(format!(
                "answered remote sessions not alive after a restart: {}",
                missing.join(", ")
            ));
        }
    }

    /// Guest processes still running in the simulator that no live session of the daemon
    /// stands for: spawns the daemon lost track of when it was killed. Each is named in the
    /// notes with the key it ran for (from the program's own line) and what the key was told.
    async fn count_orphans(&mut self, d: &ChildDaemon, sim: &impd_sim::ImpdSim) {
        let Some(alive) = live_sessions(d).await else {
            return;
        };
        let names: BTreeSet<String> = alive
            .iter()
            .map(|id| impd_client::exec_session_name(id))
            .collect();
        let orphans: BTreeSet<String> = sim
            .imps()
            .iter()
            .flat_map(|imp| imp.sessions.iter())
            .filter(|s| s.exit.is_none() && !names.contains(&s.name))
            .map(|s| s.name.clone())
            .collect();
        self.tally.orphans = orphans.len() as u64;
        let mut found = Vec::new();
        for settled in &self.book.borrow().settled {
            for run in evidence::effects(&settled.task.dir) {
                let name = impd_client::exec_session_name(&run.session);
                if orphans.contains(&name) {
                    found.push(format!(
                        "{} ran as {} and was answered {:?}",
                        settled.task.key, run.session, settled.outcome
                    ));
                }
            }
        }
        for text in found {
            self.tally.note(format!("remote orphan: {text}"));
        }
    }

    /// The last life: every key still without an answer is retried (same key, same body)
    /// until it gets one, in a few rounds.
    async fn settle(&mut self, d: &ChildDaemon, left: Duration) {
        let deadline = Instant::now() + left;
        for _ in 0..SETTLE_ROUNDS {
            if self.book.borrow().pending.is_empty() || Instant::now() >= deadline {
                break;
            }
            let signals = Rc::new(Signals::for_clients(CLIENTS));
            let clients = (0..CLIENTS).map(|_| {
                Client {
                    url: d.url().to_string(),
                    token: d.token().to_string(),
                    keys_dir: self.keys.clone(),
                    prefix: self.prefix.clone(),
                    life: u64::MAX,
                    new_keys: 0,
                }
                .run(self.book.clone(), signals.clone())
            });
            futures_util::future::join_all(clients).await;
        }
    }

    /// Reads the effect files and puts every figure in the report.
    fn figures(&mut self, report: &mut Report, kills: u64, lives: u64) {
        let book = self.book.borrow();
        let mut doubles = Vec::new();
        let mut misnamed = Vec::new();
        let mut without_effect = 0u64;
        let mut answered_by_kind: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut ran_by_kind: BTreeMap<&'static str, u64> = BTreeMap::new();
        let (mut replays, mut lost_answers, mut refused) = (0u64, 0u64, Vec::new());
        let all_tasks = book
            .settled
            .iter()
            .map(|s| (&s.task, Some((&s.outcome, s.life))))
            .chain(book.pending.iter().map(|t| (t, None)));
        for (task, answer) in all_tasks {
            lost_answers += u64::from(task.lost);
            let runs = evidence::effects(&task.dir);
            if !runs.is_empty() {
                *ran_by_kind.entry(task.kind.name()).or_default() += 1;
            }
            if runs.len() > 1 {
                let sessions: Vec<&str> = runs.iter().map(|r| r.session.as_str()).collect();
                doubles.push(format!(
                    "{} ran {} times: {sessions:?}",
                    task.key,
                    runs.len()
                ));
            }
            match answer {
                Some((Outcome::Spawned { session, replayed }, _)) => {
                    *answered_by_kind.entry(task.kind.name()).or_default() += 1;
                    replays += u64::from(*replayed);
                    if runs.is_empty() {
                        without_effect += 1;
                    }
                    if runs.iter().any(|r| &r.session != session) {
                        misnamed.push(format!("{} answered {session}, ran {runs:?}", task.key));
                    }
                }
                Some((Outcome::Refused { status, code }, life)) => refused.push(format!(
                    "{} ({}, life {life}): {status} {code}",
                    task.key,
                    task.kind.name()
                )),
                _ => {}
            }
        }
        let ledger = &self.tally.last_ledger;
        let unknown: Vec<String> = ledger
            .in_state("outcome_unknown")
            .map(|k| {
                let runs = book
                    .settled
                    .iter()
                    .map(|s| &s.task)
                    .chain(book.pending.iter())
                    .find(|t| t.key == k.key)
                    .map(|t| evidence::effects(&t.dir).len())
                    .unwrap_or(0);
                format!(
                    "{} effectRef {} (fleet row: {}, runs: {runs})",
                    k.key,
                    k.effect_ref,
                    ledger.fleet.contains(&k.effect_ref)
                )
            })
            .collect();
        let panics = std::fs::read_dir(&self.logs)
            .map(|dir| {
                dir.flatten()
                    .filter(|e| {
                        std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("panicked"))
                    })
                    .count() as u64
            })
            .unwrap_or(0);

        report.figure("kills", lives as f64, "count", Want::Equal(kills as f64));
        report.info(
            "killsWithSpawnInFlight",
            self.tally.kills_in_flight as f64,
            "count",
        );
        report.info(
            "keys",
            (book.settled.len() + book.pending.len()) as f64,
            "count",
        );
        let answered: u64 = answered_by_kind.values().sum();
        report.info("spawnsAnswered", answered as f64, "count");
        for kind in Kind::ALL {
            let n = answered_by_kind.get(kind.name()).copied().unwrap_or(0);
            let name = format!("spawnsAnswered{}", capitalised(kind.name()));
            report.info(&name, n as f64, "count");
            let ran = ran_by_kind.get(kind.name()).copied().unwrap_or(0);
            let name = format!("keysRan{}", capitalised(kind.name()));
            report.info(&name, ran as f64, "count");
        }
        let per_life = &self.tally.answered_per_life;
        if !per_life.is_empty() {
            let mean = per_life.iter().sum::<u64>() as f64 / per_life.len() as f64;
            report.info("spawnsAnsweredPerLife", mean, "count");
            let min = per_life.iter().copied().min().unwrap_or(0);
            report.info("spawnsAnsweredPerLifeMin", min as f64, "count");
        }
        report.info("answersLost", lost_answers as f64, "count");
        report.info("replaysAnswered", replays as f64, "count");
        report.zero("doubleSpawns", doubles.len() as u64, "count");
        report.zero(
            "answersNamingAnotherSession",
            misnamed.len() as u64,
            "count",
        );
        report.info("answeredWithoutEffect", without_effect as f64, "count");
        report.zero(
            "keysInProgressAfterRestart",
            self.tally.in_progress_after_restart,
            "count",
        );
        report.info("outcomeUnknownKeys", unknown.len() as f64, "count");
        report.zero("fleetRowsLost", self.tally.rows_lost.len() as u64, "count");
        report.zero(
            "answeredRemoteNotReattached",
            self.tally.not_reattached.len() as u64,
            "count",
        );
        // Known defect (see the crate's README, `crashes`): a remote row written before its
        // process's position was, left by a daemon killed in between, is restored as exited
        // while the process runs on in its imp, out of every daemon's reach.
        report.zero("remoteOrphansAtEnd", self.tally.orphans, "count");
        report.zero("integrityFailures", self.tally.integrity_failures, "count");
        report.zero(
            "ledgerReadFailures",
            self.tally.ledger_read_failures,
            "count",
        );
        report.zero("keysUnanswered", book.pending.len() as u64, "count");
        report.info("spawnsRefused", refused.len() as f64, "count");
        report.zero("restartFailures", self.tally.restart_failures, "count");
        report.zero("daemonLogsWithPanics", panics, "count");
        report.latency("restart", &mut self.tally.restarts.clone());
        report.info(
            "remoteSessionsRetired",
            self.tally.remote_retired as f64,
            "count",
        );

        let moments: Vec<String> = self
            .tally
            .moments
            .iter()
            .map(|(m, n)| format!("{m} {n}"))
            .collect();
        report.note(format!("kill moments: {}", moments.join(", ")));
        report.note(
            "integrity_check runs read-only between each kill and its restart; the ledger and \
             fleet are read through a second read-only connection once the new daemon answers",
        );
        for text in self.tally.notes.iter().cloned() {
            report.note(text);
        }
        for (what, list) in [
            ("double spawn", &doubles),
            ("answer naming another session", &misnamed),
            ("outcome_unknown", &unknown),
            ("refused", &refused),
        ] {
            for item in list.iter().take(NOTES) {
                report.note(format!("{what}: {item}"));
            }
            if list.len() > NOTES {
                report.note(format!("{what}: {} more", list.len() - NOTES));
            }
        }
    }
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
