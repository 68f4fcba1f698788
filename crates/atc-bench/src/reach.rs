//! Reach phase: what acting as a principal costs a request (issue 36). With `--reach-sessions`
//! sessions of `--agent` held, it times `--reach-requests` requests on each of three paths, as
//! the owner and as a principal (the owner's token with `X-Atc-As`), `--reach-clients` in
//! flight at once: `GET /v1/sessions/{id}` on random ids of the phase's sessions,
//! `GET /v1/sessions`, and `POST /v1/sessions/{id}/resize` to the size the session already has
//! (a write that leaves the screen alone but still goes through the lookup and the session
//! actor, which rewrites its row).
//!
//! The owner's figures are the ceiling: the principal's requests differ from them only in the
//! reach checks (a lookup checks the session's whole tree, a listing is built for the principal
//! where the owner gets the cached body), so each path is reported with principal / owner. The
//! two callers are two clients that differ only in that header, each with connections of its
//! own. They take turns in slices, swapping which goes first, so both sample the same
//! stretches of the machine, and they ask for the same ids in the same order.
//!
//! Before timing, the principal's listing must hold every session of the phase: a principal
//! that does not reach them would be timing a missing session's answer, not a lookup. A
//! request that fails fails the phase for the same reason. Answers are read whole and not
//! parsed, so the bench's own parsing stays out of the figures. The daemon's CPU per request
//! comes from its `/proc` entry when it runs on this machine.

use std::time::Duration;

use anyhow::Context as _;
use futures_util::StreamExt as _;
use serde::Serialize;
use tokio::time::Instant;

use super::api::{ApiError, DaemonApi, SessionId};
use super::cleanup::SessionLedger;
use super::cpu::Ticks;
use super::phase::{Deadline, DeadlinePassed, Figures, Outcome};
use super::spawn::{spawn_batch, spawn_one};
use super::stats::{millis, per_second, round3, Latency};
use super::{Context, TERMINAL};

/// The principal the phase acts as unless told otherwise (`--reach-as`).
pub const PRINCIPAL: &str = "bench";

/// Turns each caller takes on a path. More turns interleave the two more finely; each turn
/// reads the daemon's CPU twice, and procfs counts it in 10 ms ticks.
const SLICES: u32 = 4;

/// Untimed requests each caller sends, per request in flight, before the first timed one, so
/// opening connections is in neither caller's figures.
const WARM_UP_PER_CLIENT: u32 = 2;

/// Ids the daemon refuses in `X-Atc-As`: the owner's own names.
const RESERVED: [&str; 2] = ["local", "owner"];

/// Checks `--reach-as` as the daemon checks `X-Atc-As` (`atc_protocol::is_principal_id`), so
/// a typo fails the run before it spawns a thousand sessions.
pub fn checked_principal(id: &str) -> Result<String, String> {
    if !atc_client::atc_protocol::is_principal_id(id) {
        return Err(format!(
            "--reach-as {id:?} is not a principal's id: lower-case letters, digits, '-' and '_', \
             at most 64"
        ));
    }
    if RESERVED.contains(&id) {
        return Err(format!(
            "--reach-as {id:?} names the owner, not a principal"
        ));
    }
    Ok(id.to_string())
}

/// One of the paths the phase times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReachPath {
    /// `GET /v1/sessions/{id}`: a lookup, which for a principal checks the session's tree.
    Get,
    /// `GET /v1/sessions`: the listing, filtered for a principal.
    List,
    /// `POST /v1/sessions/{id}/resize`: a lookup, then a write through the session.
    Resize,
}

impl ReachPath {
    /// Every path, in the order they are timed and reported.
    pub const ALL: [ReachPath; 3] = [ReachPath::Get, ReachPath::List, ReachPath::Resize];

    /// The route, as the report names it.
    pub fn route(self) -> &'static str {
        match self {
            ReachPath::Get => "GET /v1/sessions/{id}",
            ReachPath::List => "GET /v1/sessions",
            ReachPath::Resize => "POST /v1/sessions/{id}/resize",
        }
    }
}

/// One caller's figures on one path, over all its turns.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallerFigures {
    /// Requests answered with a success.
    pub answered: u64,
    /// Requests that failed (refused, or no answer).
    pub failed: u64,
    /// Wall time of this caller's turns together.
    pub elapsed_ms: f64,
    /// Successes per second of that time.
    pub per_sec: f64,
    /// Latency of the successes, send to the last byte of the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// The daemon's CPU (every thread) over this caller's turns, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us: Option<f64>,
}

/// The principal's figures over the owner's, the ceiling, where both have them: latency and
/// CPU above 1 cost the principal more; a rate below 1 is the principal's being slower.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VsOwner {
    /// Latency p50, principal / owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    /// Latency p99, principal / owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
    /// Requests per second, principal / owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_sec: Option<f64>,
    /// The daemon's CPU per request, principal / owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<f64>,
}

/// `principal / owner`, rounded, when both are positive numbers.
fn over(principal: f64, owner: f64) -> Option<f64> {
    (principal.is_finite() && owner.is_finite() && principal > 0.0 && owner > 0.0)
        .then(|| round3(principal / owner))
}

impl VsOwner {
    /// The ratios of `principal` over `owner`.
    pub fn of(owner: &CallerFigures, principal: &CallerFigures) -> VsOwner {
        let latency = owner.latency.zip(principal.latency);
        VsOwner {
            p50: latency.and_then(|(o, p)| over(p.p50_us, o.p50_us)),
            p99: latency.and_then(|(o, p)| over(p.p99_us, o.p99_us)),
            per_sec: over(principal.per_sec, owner.per_sec),
            server_cpu: owner
                .server_cpu_us
                .zip(principal.server_cpu_us)
                .and_then(|(o, p)| over(p, o)),
        }
    }
}

/// One path, as each caller saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathFigures {
    /// Which path.
    pub path: ReachPath,
    /// The owner acting as itself: the ceiling.
    pub owner: CallerFigures,
    /// The owner's token acting as the principal.
    pub principal: CallerFigures,
    /// principal / owner.
    pub vs_owner: VsOwner,
}

/// What the reach phase measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReachFigures {
    /// The principal's id (`X-Atc-As`).
    pub principal: String,
    /// Sessions the phase held.
    pub sessions: u32,
    /// Sessions in the owner's listing (the phase's, and any others on the daemon).
    pub listed_by_owner: usize,
    /// Sessions in the principal's listing.
    pub listed_by_principal: usize,
    /// Size of the owner's listing, in bytes.
    pub list_bytes: usize,
    /// Requests in flight at once.
    pub clients: usize,
    /// Requests timed per path and caller.
    pub requests: u32,
    /// One entry per path, in [`ReachPath::ALL`]'s order.
    pub paths: Vec<PathFigures>,
    /// The first failed request, when one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Where the deadline cut the phase short: the last path's figures are then partial,
    /// without ratios, and the paths after it are missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl Figures for ReachFigures {
    fn shortfall(&self) -> Option<(Outcome, String)> {
        let failed: u64 = self
            .paths
            .iter()
            .map(|p| p.owner.failed + p.principal.failed)
            .sum();
        if failed > 0 {
            let first = self.first_error.as_deref().unwrap_or("no error kept");
            return Some((
                Outcome::Failed,
                format!("{failed} requests failed; the first: {first}"),
            ));
        }
        self.stopped
            .as_ref()
            .map(|why| (Outcome::TimedOut, why.clone()))
    }
}

/// `total` requests in `slices` turns as even as can be, the larger first; no empty turn.
pub fn slice_sizes(total: u32, slices: u32) -> Vec<u32> {
    let slices = slices.max(1);
    let (each, rest) = (total / slices, total % slices);
    (0..slices)
        .map(|k| each + u32::from(k < rest))
        .filter(|&n| n > 0)
        .collect()
}

/// Random picks among the phase's sessions: a splitmix64 stream from one seed, so a turn's
/// picks are drawn once and given to both callers.
#[derive(Debug, Clone)]
pub struct Picks(u64);

impl Picks {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Picks {
        Picks(seed)
    }

    /// A stream seeded from the OS.
    fn seeded() -> anyhow::Result<Picks> {
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed)
            .map_err(|e| anyhow::anyhow!("reading random bytes for the picks: {e}"))?;
        Ok(Picks::new(u64::from_le_bytes(seed)))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `n` (which must not be 0); the modulo's bias is below 1e-15 for the
    /// thousands of sessions a run holds.
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0, "picks among no sessions");
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// What one caller's turns on one path have gathered so far.
#[derive(Debug, Default)]
struct Tally {
    samples: Vec<Duration>,
    failed: u64,
    first_error: Option<String>,
    elapsed: Duration,
    /// The daemon's CPU over the turns read so far.
    cpu: Option<Duration>,
    /// A turn's CPU could not be read, so the sum is not the turns' CPU.
    cpu_unread: bool,
}

impl Tally {
    fn figures(mut self) -> CallerFigures {
        let answered = self.samples.len() as u64;
        let cpu = self.cpu.filter(|_| !self.cpu_unread);
        CallerFigures {
            answered,
            failed: self.failed,
            elapsed_ms: millis(self.elapsed),
            per_sec: per_second(answered, self.elapsed),
            latency: Latency::from_samples(&mut self.samples),
            server_cpu_us: cpu
                .filter(|_| answered > 0)
                .map(|c| round3(c.as_secs_f64() * 1e6 / answered as f64)),
        }
    }

    fn add_cpu(&mut self, before: Option<Ticks>, after: Option<Ticks>) {
        match after.zip(before).and_then(|(a, b)| a.since(b)) {
            Some(used) => self.cpu = Some(self.cpu.unwrap_or_default() + used),
            None => self.cpu_unread = true,
        }
    }
}

/// One request on `path` (on session `id` where the path has one), timed from send to the
/// answer's last byte.
async fn one(api: &DaemonApi, path: ReachPath, id: &SessionId) -> Result<Duration, ApiError> {
    let sent = Instant::now();
    match path {
        ReachPath::Get => api.session_body(id).await.map(drop)?,
        ReachPath::List => api.list_body().await.map(drop)?,
        // The size it was spawned at: the screen stays as it is.
        ReachPath::Resize => api.resize(id, TERMINAL).await?,
    }
    Ok(sent.elapsed())
}

/// What every turn on one path shares.
struct Turns<'a> {
    cx: &'a Context,
    path: ReachPath,
    /// The phase's sessions; picks index into them.
    ids: &'a [SessionId],
    clients: usize,
    deadline: Deadline,
}

impl Turns<'_> {
    /// One caller's turn: a request for each of `picks`, `clients` in flight, added to
    /// `tally` with the daemon's CPU over the turn; cut at the deadline, what was answered
    /// by then is added all the same.
    async fn take(
        &self,
        api: &DaemonApi,
        picks: &[usize],
        tally: &mut Tally,
    ) -> Result<(), DeadlinePassed> {
        let path = self.path;
        let cpu_before = self.cx.server_cpu();
        let started = Instant::now();
        let Tally {
            samples,
            failed,
            first_error,
            ..
        } = tally;
        let requests = futures_util::stream::iter(picks.iter().filter_map(|&k| self.ids.get(k)))
            .map(|id| one(api, path, id))
            .buffer_unordered(self.clients.max(1))
            .for_each(|answer| {
                match answer {
                    Ok(latency) => samples.push(latency),
                    Err(e) => {
                        *failed += 1;
                        first_error.get_or_insert_with(|| format!("{}: {e}", path.route()));
                    }
                }
                async {}
            });
        let ended = self.deadline.within("timing requests", requests).await;
        tally.elapsed += started.elapsed();
        tally.add_cpu(cpu_before, self.cx.server_cpu());
        ended
    }
}

/// Runs the reach phase; every session goes into `ledger`.
pub async fn run(
    cx: &Context,
    ledger: &SessionLedger,
    deadline: Deadline,
) -> anyhow::Result<ReachFigures> {
    let plan = &cx.plan.reach;
    cx.progress
        .step(&format!("reach: spawning {} sessions", plan.sessions));
    const SPAWNS: &str = "spawning the sessions";
    let batch = spawn_batch(plan.sessions, cx.plan.concurrency, deadline, SPAWNS, |_| {
        spawn_one(cx, ledger)
    })
    .await;
    if batch.timed_out {
        return Err(DeadlinePassed(SPAWNS).into());
    }
    if batch.failed > 0 {
        anyhow::bail!(
            "{} of {} spawns failed; the first: {}",
            batch.failed,
            plan.sessions,
            batch.first_error.unwrap_or_default()
        );
    }
    let ids = ledger.ids();
    let owner = cx.api.sibling(None);
    let principal = cx.api.sibling(Some(&plan.principal));
    let (listed_by_owner, listed_by_principal) =
        check_reach(&owner, &principal, &plan.principal, &ids, deadline).await?;
    let list_bytes = deadline
        .within("listing the sessions", owner.list_body())
        .await??
        .len();

    let mut picks = Picks::seeded()?;
    let mut first_error = None;
    // Untimed: each caller opens its connections on lookups of the phase's sessions.
    let warm: Vec<usize> = (0..WARM_UP_PER_CLIENT * plan.clients as u32)
        .map(|_| picks.below(ids.len()))
        .collect();
    let turns = |path| Turns {
        cx,
        path,
        ids: &ids,
        clients: plan.clients,
        deadline,
    };
    for api in [&owner, &principal] {
        let mut scratch = Tally::default();
        turns(ReachPath::Get).take(api, &warm, &mut scratch).await?;
        if let Some(e) = scratch.first_error {
            anyhow::bail!("warming up: {e}");
        }
    }

    let mut paths = Vec::with_capacity(ReachPath::ALL.len());
    let mut stopped = None;
    for path in ReachPath::ALL {
        cx.progress.step(&format!("reach: {}", path.route()));
        let (mut o, mut p) = (Tally::default(), Tally::default());
        let on_path = turns(path);
        'turns: for (k, size) in slice_sizes(plan.requests, SLICES).into_iter().enumerate() {
            let chosen: Vec<usize> = (0..size).map(|_| picks.below(ids.len())).collect();
            let owner_first = k % 2 == 0;
            for owner_turn in [owner_first, !owner_first] {
                let (api, tally) = match owner_turn {
                    true => (&owner, &mut o),
                    false => (&principal, &mut p),
                };
                if on_path.take(api, &chosen, tally).await.is_err() {
                    stopped = Some(format!(
                        "the deadline passed while timing {}: its figures are partial and \
                         have no ratio, and the paths after it did not run (raise \
                         --phase-timeout-secs)",
                        path.route()
                    ));
                    break 'turns;
                }
            }
        }
        first_error = first_error
            .or(o.first_error.take())
            .or(p.first_error.take());
        let (owner, principal) = (o.figures(), p.figures());
        paths.push(PathFigures {
            path,
            // Cut short, the two callers did not get the same turns.
            vs_owner: match stopped {
                None => VsOwner::of(&owner, &principal),
                Some(_) => VsOwner::default(),
            },
            owner,
            principal,
        });
        if stopped.is_some() {
            break;
        }
    }
    Ok(ReachFigures {
        principal: plan.principal.clone(),
        sessions: plan.sessions,
        listed_by_owner,
        listed_by_principal,
        list_bytes,
        clients: plan.clients,
        requests: plan.requests,
        paths,
        first_error,
        stopped,
    })
}

/// Lists as each caller and checks the principal reaches every session of the phase; the
/// count each listed.
async fn check_reach(
    owner: &DaemonApi,
    principal: &DaemonApi,
    who: &str,
    ids: &[SessionId],
    deadline: Deadline,
) -> anyhow::Result<(usize, usize)> {
    let by_owner = deadline
        .within("listing the sessions as the owner", owner.list())
        .await??;
    let by_principal = deadline
        .within("listing the sessions as the principal", principal.list())
        .await?
        .with_context(|| format!("listing the sessions as principal {who:?} (X-Atc-As)"))?;
    let seen: std::collections::HashSet<SessionId> = by_principal.iter().map(|d| d.id).collect();
    let unseen = ids.iter().filter(|id| !seen.contains(id)).count();
    anyhow::ensure!(
        unseen == 0,
        "principal {who:?} does not reach {unseen} of the phase's {} sessions (it lists {} of \
         the owner's {}): grant it the target they run on, or name one that has it with \
         --reach-as",
        ids.len(),
        by_principal.len(),
        by_owner.len()
    );
    Ok((by_owner.len(), by_principal.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(p50: f64, p99: f64, per_sec: f64, cpu: Option<f64>) -> CallerFigures {
        CallerFigures {
            answered: 100,
            failed: 0,
            elapsed_ms: 100.0,
            per_sec,
            latency: Some(Latency {
                count: 100,
                min_us: p50 / 2.0,
                p50_us: p50,
                p90_us: p99,
                p99_us: p99,
                max_us: p99,
                mean_us: p50,
            }),
            server_cpu_us: cpu,
        }
    }

    #[test]
    fn ratios_are_the_principal_over_the_owner() {
        let owner = caller(100.0, 400.0, 8000.0, Some(50.0));
        let principal = caller(150.0, 500.0, 6000.0, Some(80.0));
        let v = VsOwner::of(&owner, &principal);
        assert_eq!(v.p50, Some(1.5));
        assert_eq!(v.p99, Some(1.25));
        assert_eq!(v.per_sec, Some(0.75));
        assert_eq!(v.server_cpu, Some(1.6));
    }

    #[test]
    fn a_ratio_needs_both_figures() {
        let owner = caller(100.0, 400.0, 8000.0, None);
        let mut principal = caller(150.0, 500.0, 0.0, Some(80.0));
        principal.latency = None;
        assert_eq!(VsOwner::of(&owner, &principal), VsOwner::default());
        assert_eq!(over(1.0, 0.0), None);
        assert_eq!(over(f64::NAN, 1.0), None);
        assert_eq!(over(2.0, 3.0), Some(0.667));
    }

    #[test]
    fn requests_split_into_even_turns_and_no_empty_one() {
        assert_eq!(slice_sizes(2000, 4), vec![500; 4]);
        assert_eq!(slice_sizes(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(slice_sizes(2, 4), vec![1, 1]);
        assert_eq!(slice_sizes(0, 4), Vec::<u32>::new());
        assert_eq!(slice_sizes(5, 0), vec![5]);
    }

    #[test]
    fn picks_stay_in_range_repeat_from_a_seed_and_spread() {
        let draw = |seed| {
            let mut p = Picks::new(seed);
            (0..1000).map(|_| p.below(10)).collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7), "one seed, one stream");
        assert_ne!(a, draw(8));
        assert!(a.iter().all(|&k| k < 10));
        for k in 0..10 {
            let n = a.iter().filter(|&&x| x == k).count();
            assert!((50..=150).contains(&n), "{k} drawn {n} times of 1000");
        }
    }

    #[test]
    fn the_principal_is_checked_as_the_daemon_checks_x_atc_as() {
        assert_eq!(checked_principal("bench"), Ok("bench".into()));
        assert_eq!(checked_principal("ci-bot_2"), Ok("ci-bot_2".into()));
        assert!(checked_principal("").is_err());
        assert!(checked_principal("Bench").is_err());
        assert!(checked_principal("a b").is_err());
        assert!(checked_principal(&"x".repeat(65)).is_err());
        let owner = checked_principal("local").expect_err("the owner's");
        assert!(owner.contains("names the owner"), "{owner}");
    }

    #[test]
    fn a_tally_without_a_cpu_reading_has_no_cpu_figure() {
        let ms = Duration::from_millis;
        let mut t = Tally {
            samples: vec![ms(1), ms(3)],
            elapsed: ms(2),
            ..Tally::default()
        };
        t.add_cpu(Some(Ticks(0)), None);
        t.add_cpu(Some(Ticks(0)), Some(Ticks(1)));
        let f = t.figures();
        assert_eq!((f.answered, f.per_sec), (2, 1000.0));
        assert_eq!(f.server_cpu_us, None);
        let mut t = Tally {
            samples: vec![ms(1), ms(3)],
            elapsed: ms(2),
            ..Tally::default()
        };
        let hz = rustix::param::clock_ticks_per_second();
        t.add_cpu(Some(Ticks(0)), Some(Ticks(hz)));
        assert_eq!(t.figures().server_cpu_us, Some(500_000.0));
    }

    #[test]
    fn failed_requests_fail_the_phase_and_a_deadline_times_it_out() {
        let path = |failed| PathFigures {
            path: ReachPath::Get,
            owner: caller(1.0, 1.0, 1.0, None),
            principal: CallerFigures {
                failed,
                ..caller(1.0, 1.0, 1.0, None)
            },
            vs_owner: VsOwner::default(),
        };
        let mut f = ReachFigures {
            principal: PRINCIPAL.into(),
            sessions: 1,
            listed_by_owner: 1,
            listed_by_principal: 1,
            list_bytes: 1,
            clients: 1,
            requests: 100,
            paths: vec![path(0), path(0)],
            first_error: None,
            stopped: None,
        };
        assert_eq!(f.shortfall(), None);
        f.stopped = Some("the deadline passed".into());
        assert_eq!(
            f.shortfall(),
            Some((Outcome::TimedOut, "the deadline passed".into()))
        );
        f.paths[1] = path(3);
        f.first_error = Some("GET /v1/sessions/{id}: no such session".into());
        let (outcome, why) = f.shortfall().expect("fell short");
        assert_eq!(outcome, Outcome::Failed, "a failure outranks the deadline");
        assert!(
            why.starts_with("3 requests failed; the first: GET"),
            "{why}"
        );
    }
}
