//! The `remote` suite (issue 12 item 3): impd faults under remote sessions with output
//! flowing and an atc client attached. The impd simulator runs in this process; the daemon is
//! a child ([`crate::child`]) whose default target is an imp target on the simulator.
//!
//! Each run of a fault kind: let the session's numbered lines flow for a random moment,
//! inject the fault, wait for the outcome the client sees (its link attached again, or the
//! session's exit) and check it against [`kinds::Kind::expected`], then confirm the stream
//! goes on (after a revive, for a suspending fault). The client ([`client`]) checks every line
//! ([`lines`]): bytes lost and repeated must be 0 wherever offsets hold; a fresh replay is a
//! counted gap reset. Kinds run in sequence; a session serves many runs while the fault
//! leaves it running (or suspended, then revived), and a fault that ends it gets a fresh
//! session for the next run. The simulator repeats a few bytes on every exact resume
//! (at-least-once, as impd may), so the daemon's de-duplication is under test too.

mod client;
mod kinds;
mod lines;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use atc_protocol::frames::LinkState;
use impd_sim::{BootEnd, ImpdSim, Scope, SimOptions, When};
use serde_json::json;

use crate::report::{Report, Want};
use crate::rng::Rng;
use crate::{Plan, Suite};
use atc_testkit::{ChildDaemon, DaemonSpec};

use client::{Seen, Watcher};
use kinds::{Expected, Kind, Observed};
use lines::LineCounts;

/// The session's program: numbered lines, five every 10 ms, forever.
const LINES_SCRIPT: &str = "i=0; while :; do j=0; while [ $j -lt 5 ]; do i=$((i+1)); \
                            j=$((j+1)); echo L$i; done; sleep 0.01; done";

/// Bytes the simulator repeats before the asked offset on an exact resume.
const RESUME_OVERLAP: u64 = 48;

/// How long one fault may take to show its outcome; reconnects under the spec's default
/// delays take well under a second, a give-up about 15 s.
const OUTCOME_WITHIN: Duration = Duration::from_secs(25);

/// Lines that must arrive after an outcome to show the stream goes on (about 40 ms of
/// output), and how long they may take.
const LINES_AFTER: u64 = 20;
const FLOW_WITHIN: Duration = Duration::from_secs(15);

/// How long impd refuses connections when it restarts: shorter than the first reconnect
/// delay, so the reconnect reaches the restarted impd.
const RESTART_DOWN: Duration = Duration::from_millis(100);

/// Consecutive runs that could not even be set up before the suite gives up.
const SETUP_FAILURES_MAX: u32 = 5;

/// Notes kept in full about wrong outcomes.
const NOTES_MAX: usize = 12;

/// One kind's figures.
#[derive(Debug, Default)]
struct KindTally {
    runs: u64,
    lost: u64,
    repeated: u64,
    gap_resets: u64,
    garbled: u64,
    wrong: u64,
    client_drops: u64,
    reconnect: Vec<Duration>,
    revive: Vec<Duration>,
}

/// The session under test.
struct Live {
    id: String,
    imp: String,
    session: String,
    watcher: Watcher,
}

/// Everything a run needs.
struct Bench {
    sim: ImpdSim,
    daemon: ChildDaemon,
    token: String,
    token_file: PathBuf,
    rng: Rng,
    live: Option<Live>,
    tallies: BTreeMap<Kind, KindTally>,
    /// Line counts of sessions that are gone, for the suite-wide figures.
    retired: LineCounts,
    stream_lost: u64,
    stream_repeated: u64,
    client_resumes: u64,
    resume_repaints: u64,
    desyncs: u64,
    notes: Vec<String>,
    wrong_notes: usize,
}

/// Runs the suite.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let count = plan.count_or(100);
    let deadline = Instant::now() + plan.limit;
    let mut report = Report::new(Suite::Remote, plan.seed);
    std::fs::create_dir_all(&plan.work_dir)
        .with_context(|| format!("creating {}", plan.work_dir.display()))?;
    let sim = ImpdSim::try_start(SimOptions::default()).context("starting the impd simulator")?;
    sim.faults().set_resume_overlap(RESUME_OVERLAP);
    let token_file = plan.work_dir.join("impd-token");
    let token = sim.faults().add_token(Scope::Manage, None);
    write_token(&token_file, &token)?;
    let spec = DaemonSpec::new(plan.daemon_bin.clone(), config(&sim.url(), &token_file));
    let daemon = ChildDaemon::launch(
        &spec,
        &plan.work_dir.join("state"),
        &plan.work_dir.join("daemon.log"),
    )
    .await?;
    let mut bench = Bench {
        sim,
        daemon,
        token,
        token_file,
        rng: Rng::new(plan.seed),
        live: None,
        tallies: BTreeMap::new(),
        retired: LineCounts::default(),
        stream_lost: 0,
        stream_repeated: 0,
        client_resumes: 0,
        resume_repaints: 0,
        desyncs: 0,
        notes: Vec::new(),
        wrong_notes: 0,
    };
    let cut_short = bench.all(count, deadline).await;
    bench.retire().await;
    for note in bench.notes.drain(..) {
        report.note(note);
    }
    if cut_short {
        report.note(format!(
            "cut short by the {} s limit before every kind ran {count} times",
            plan.limit.as_secs()
        ));
    }
    for kind in Kind::ALL {
        let t = bench.tallies.remove(&kind).unwrap_or_default();
        let name = kind.name();
        report.figure(
            &format!("{name}Runs"),
            t.runs as f64,
            "count",
            Want::Equal(count as f64),
        );
        let lost_want = if kind.offsets_hold() {
            Want::Zero
        } else {
            Want::Info
        };
        report.figure(
            &format!("{name}BytesLost"),
            t.lost as f64,
            "bytes",
            lost_want,
        );
        report.zero(&format!("{name}BytesRepeated"), t.repeated, "bytes");
        // The session's output (about 4 KB/s) takes a minute to move impd's 256 KiB ring
        // past anything a reconnect here misses: where offsets hold, a fresh replay means the
        // daemon lost its place.
        let gap_want = if kind.offsets_hold() {
            Want::Zero
        } else {
            Want::Info
        };
        report.figure(
            &format!("{name}GapResets"),
            t.gap_resets as f64,
            "count",
            gap_want,
        );
        report.zero(&format!("{name}Garbled"), t.garbled, "lines");
        report.zero(&format!("{name}WrongOutcome"), t.wrong, "count");
        let mut reconnect = t.reconnect;
        report.latency(&format!("{name}Reconnect"), &mut reconnect);
        let mut revive = t.revive;
        report.latency(&format!("{name}Revive"), &mut revive);
        if t.client_drops > 0 {
            report.info(
                &format!("{name}ClientDrops"),
                t.client_drops as f64,
                "count",
            );
        }
    }
    report.zero("streamBytesLost", bench.stream_lost, "bytes");
    report.zero("streamBytesRepeated", bench.stream_repeated, "bytes");
    report.zero("resumeRepaints", bench.resume_repaints, "count");
    report.info("clientResumes", bench.client_resumes as f64, "count");
    report.info("clientDesyncs", bench.desyncs as f64, "count");
    report.info("linesChecked", bench.retired.lines as f64, "lines");
    let Bench { sim, daemon, .. } = bench;
    if !daemon.stop_within(Duration::from_secs(15)).await {
        report.note("the daemon did not stop within 15 s of SIGTERM and was killed");
    }
    sim.stop();
    Ok(report)
}

/// The daemon's config: the line printer as the only agent, the simulator as the default
/// target.
fn config(url: &str, token_file: &Path) -> serde_json::Value {
    json!({
        "agents": {"lines": {"bin": "/bin/sh", "args": ["-c", LINES_SCRIPT]}},
        "targets": {"box": {"provider": "imp", "url": url, "tokenFile": token_file}},
        "defaultTarget": "box",
    })
}

fn write_token(path: &Path, token: &str) -> anyhow::Result<()> {
    std::fs::write(path, format!("{token}\n"))
        .with_context(|| format!("writing the impd token file {}", path.display()))
}

impl Bench {
    /// Every kind `count` times, until `deadline`; true when cut short.
    async fn all(&mut self, count: u64, deadline: Instant) -> bool {
        let mut setup_failures = 0;
        for kind in Kind::ALL {
            let mut done = 0;
            while done < count {
                if Instant::now() >= deadline {
                    return true;
                }
                match self.one(kind).await {
                    Ok(()) => {
                        setup_failures = 0;
                        done += 1;
                    }
                    Err(e) => {
                        setup_failures += 1;
                        self.note(format!("{}: a run could not be set up: {e:#}", kind.name()));
                        self.retire().await;
                        if setup_failures >= SETUP_FAILURES_MAX {
                            self.note(format!(
                                "gave up after {SETUP_FAILURES_MAX} runs in a row could not \
                                 be set up"
                            ));
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    fn note(&mut self, text: String) {
        if self.notes.len() < NOTES_MAX * 2 {
            self.notes.push(text);
        }
    }

    /// One run of `kind`. An error means the run could not be set up (no session would
    /// spawn); a wrong outcome is counted, not an error.
    async fn one(&mut self, kind: Kind) -> anyhow::Result<()> {
        if self.live.is_none() {
            self.live = Some(self.spawn().await?);
        }
        // A random moment of the stream for the fault to land on.
        let pause = self.rng.between(5, 60);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let Some(live) = self.live.as_mut() else {
            anyhow::bail!("no session");
        };
        live.watcher.drain();
        let before = live.watcher.counts();
        let drop_while_away = kind.waits_to_reconnect() && self.rng.chance(0.5);
        let (observed, mut took, t0) =
            inject_and_watch(&self.sim, &self.token, kind, live, drop_while_away).await;
        let expected = kind.expected();
        let mut right = expected.matches(&observed);
        let mut revive_took = None;
        let mut client_drop = false;
        let mut flow_note = None;
        if right {
            match expected {
                Expected::Reattached => {
                    client_drop = self.rng.chance(0.5);
                    if client_drop {
                        live.watcher.drop_socket();
                    }
                    if !flows_on(&live.watcher).await {
                        right = false;
                        flow_note = Some("the stream did not go on after reattaching");
                    }
                    // A fault that drops the reconnect too (right after its `started`) has
                    // the link attached twice: the reconnect time runs to the last one, and
                    // an exit after it is a wrong outcome.
                    while let Some(seen) = live.watcher.try_next() {
                        match seen {
                            Seen::Link(LinkState::Attached, at) => {
                                took = Some(at.duration_since(t0));
                            }
                            Seen::Link(LinkState::Reattaching, _) => {}
                            Seen::Exit { .. } | Seen::Failed(_) => {
                                right = false;
                                flow_note = Some("the session ended after reattaching");
                            }
                        }
                    }
                }
                Expected::Suspended => match revive(&self.daemon, live).await {
                    Ok(took) => revive_took = Some(took),
                    Err(e) => {
                        right = false;
                        self.notes.push(format!("{}: revive: {e:#}", kind.name()));
                    }
                },
                Expected::Ended(_) => {}
            }
        }
        let after = live.watcher.counts();
        let tally = self.tallies.entry(kind).or_default();
        tally.runs += 1;
        tally.lost += after.lost - before.lost;
        tally.repeated += after.repeated - before.repeated;
        tally.gap_resets += after.gap_resets - before.gap_resets;
        tally.garbled += after.garbled - before.garbled;
        tally.client_drops += u64::from(client_drop) + u64::from(drop_while_away);
        if let Some(took) = took {
            tally.reconnect.push(took);
        }
        if let Some(took) = revive_took {
            tally.revive.push(took);
        }
        if !right {
            tally.wrong += 1;
            if self.wrong_notes < NOTES_MAX {
                self.wrong_notes += 1;
                let detail = flow_note.map(str::to_string).unwrap_or_default();
                self.notes.push(format!(
                    "{} run {}: expected {expected:?}, saw {observed:?} {detail}",
                    kind.name(),
                    tally.runs
                ));
            }
        }
        // A session the fault ended (or left in doubt) is replaced for the next run.
        let keep = right && !matches!(expected, Expected::Ended(_));
        if !keep {
            self.retire().await;
        }
        if matches!(kind, Kind::TokenRevoked | Kind::RevokeDuringReconnect) {
            self.token = self.sim.faults().add_token(Scope::Manage, None);
            write_token(&self.token_file, &self.token)?;
        }
        Ok(())
    }

    /// A fresh session of the line printer, attached, its lines flowing.
    async fn spawn(&mut self) -> anyhow::Result<Live> {
        let client = self.daemon.client();
        let spawned = client
            .spawn(&json!({"agent": "lines", "cwd": "/tmp"}))
            .await
            .context("spawning a remote session")?;
        let id = spawned.id.to_string();
        let session = impd_client::exec_session_name(&id);
        let until = Instant::now() + OUTCOME_WITHIN;
        let imp = loop {
            let found = self
                .sim
                .imps()
                .into_iter()
                .find(|i| i.sessions.iter().any(|s| s.name == session))
                .map(|i| i.name);
            if let Some(imp) = found {
                break imp;
            }
            if Instant::now() >= until {
                anyhow::bail!("no imp runs {session} within {OUTCOME_WITHIN:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let watcher = Watcher::start(client, id.clone());
        if !watcher
            .wait_line(LINES_AFTER, Instant::now() + FLOW_WITHIN)
            .await
        {
            watcher.stop().await;
            anyhow::bail!("session {id} printed no lines within {FLOW_WITHIN:?}");
        }
        Ok(Live {
            id,
            imp,
            session,
            watcher,
        })
    }

    /// Lets the session under test go: its client stops, its counts join the totals, and a
    /// process the fault left running in the simulator is ended there.
    async fn retire(&mut self) {
        let Some(live) = self.live.take() else {
            return;
        };
        let c = live.watcher.counts();
        self.retired.lines += c.lines;
        live.watcher.with_tally(|t| {
            self.stream_lost += t.stream_lost;
            self.stream_repeated += t.stream_repeated;
            self.client_resumes += t.resumes;
            self.resume_repaints += t.resume_repaints;
            self.desyncs += t.desyncs;
        });
        live.watcher.stop().await;
        if self.sim.session(&live.imp, &live.session).is_some() {
            // A cold boot left stopped ends every process of the imp; the session is over
            // for the daemon already, and this keeps its program from printing forever.
            self.sim
                .faults()
                .cold_boot(&live.imp, "recovery", BootEnd::Stopped);
        }
    }
}

/// Injects `kind` on `live` and waits for what the client sees, with the time from the fault
/// to that outcome and the fault's moment.
async fn inject_and_watch(
    sim: &ImpdSim,
    token: &str,
    kind: Kind,
    live: &mut Live,
    drop_client_while_away: bool,
) -> (Observed, Option<Duration>, Instant) {
    let faults = sim.faults();
    let (imp, session) = (live.imp.as_str(), live.session.as_str());
    let mut t0 = Instant::now();
    let injected = match kind {
        Kind::DropBeforeStarted => {
            faults.drop_next_connections(1, When::BeforeStarted, 1011);
            faults.drop_output(imp, session)
        }
        Kind::DropAfterStarted => {
            faults.drop_next_connections(1, When::AfterStarted, 1001);
            faults.drop_output(imp, session)
        }
        Kind::Close1011 => faults.drop_output(imp, session),
        Kind::SlowDetach => faults.detach_slow(imp, session),
        Kind::SleepDuringOutput => faults.sleep_imp(imp),
        Kind::ImpdRestart => {
            faults.restart(RESTART_DOWN);
            true
        }
        Kind::Reboot(cause) => faults.cold_boot(imp, cause.wire(), BootEnd::Running),
        Kind::TokenRevoked => faults.revoke_token(token),
        Kind::RevokeDuringReconnect => {
            // Keep the harness away, revoke while it waits, then let its next attempt in.
            faults.drop_next_connections(10_000, When::BeforeStarted, 1011);
            let dropped = faults.drop_output(imp, session);
            let away = dropped && wait_link(live, LinkState::Reattaching).await;
            t0 = Instant::now();
            let revoked = away && faults.revoke_token(token);
            faults.cancel_connection_drops();
            revoked
        }
    };
    if !injected {
        return (Observed::Nothing, None, t0);
    }
    if drop_client_while_away {
        // The client's own socket goes too, while the harness is away: it must come back by
        // stream + offset and still see the outcome.
        if wait_link(live, LinkState::Reattaching).await {
            live.watcher.drop_socket();
        }
    }
    let deadline = t0 + OUTCOME_WITHIN;
    // A fault that must end the session may still see the link attached for a moment (a
    // revoke racing a reconnect whose socket impd had let in before it): only an exit, or the
    // run's bound passing, decides it.
    let wants_exit = kind.expected() != Expected::Reattached;
    let mut attached_at = None;
    loop {
        match live.watcher.next_by(deadline).await {
            Some(Seen::Link(LinkState::Attached, at)) if wants_exit => {
                attached_at = Some(at.duration_since(t0));
            }
            Some(Seen::Link(LinkState::Attached, at)) => {
                return (Observed::Reattached, Some(at.duration_since(t0)), t0)
            }
            Some(Seen::Link(LinkState::Reattaching, _)) => {}
            Some(Seen::Exit { reason, detail, at }) => {
                return (
                    Observed::Exit { reason, detail },
                    Some(at.duration_since(t0)),
                    t0,
                )
            }
            Some(Seen::Failed(why)) => return (Observed::ClientFailed(why), None, t0),
            None if attached_at.is_some() => return (Observed::Reattached, attached_at, t0),
            None => return (Observed::Nothing, None, t0),
        }
    }
}

/// Waits for the client to see the link go to `state`.
async fn wait_link(live: &mut Live, state: LinkState) -> bool {
    let deadline = Instant::now() + OUTCOME_WITHIN;
    loop {
        match live.watcher.next_by(deadline).await {
            Some(Seen::Link(s, _)) if s == state => return true,
            Some(Seen::Link(..)) => {}
            Some(Seen::Exit { .. }) | Some(Seen::Failed(_)) | None => return false,
        }
    }
}

/// Whether more lines arrive after the outcome.
async fn flows_on(watcher: &Watcher) -> bool {
    let from = watcher.last_line().unwrap_or(0);
    watcher
        .wait_line(from + LINES_AFTER, Instant::now() + FLOW_WITHIN)
        .await
}

/// Revives a suspended session and attaches the client again, by stream + offset; the time
/// from the revive's request to lines flowing again.
async fn revive(daemon: &ChildDaemon, live: &mut Live) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    daemon
        .client()
        .post_json(
            &format!("/v1/sessions/{}/revive", live.id),
            &json!({"cols": 100, "rows": 30}),
        )
        .await
        .context("POST revive")?;
    live.watcher.reattach();
    if !flows_on(&live.watcher).await {
        anyhow::bail!("no lines within {FLOW_WITHIN:?} of the revive");
    }
    Ok(t0.elapsed())
}
