//! The sessions the soak holds: which are up, which kind each is, and which it ended itself.
//! Every session is named `soak-<n>`, so one the soak spawned but never heard back from is
//! still found at teardown. The churn workers borrow sessions from here; a session being turned
//! over is out of the pool, and one the soak killed is remembered as retired, so an `exit`
//! frame seen on it is expected rather than a lost session.
//!
//! Everything runs on the suite's one thread (awc is not `Send`), so plain `RefCell`s are
//! enough; no borrow is held across an await.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::time::Duration;

use atc_client::{routes, ClientError, DaemonClient};
use atc_protocol::{ErrorCode, SessionId};
use futures_util::StreamExt as _;
use tokio::time::Instant;

use crate::rng::Rng;

/// The agent ids of the soak's config.
pub const QUIET_AGENT: &str = "cat";
/// See [`QUIET_AGENT`].
pub const TICKER_AGENT: &str = "ticker";

/// Name prefix of every soak session.
const PREFIX: &str = "soak-";

/// What a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `cat` that prints only what it is typed (the echo sessions).
    Quiet,
    /// Prints steadily (`atc-proof ticker`).
    Ticker,
}

impl Kind {
    /// The agent id that runs it.
    pub fn agent(self) -> &'static str {
        match self {
            Kind::Quiet => QUIET_AGENT,
            Kind::Ticker => TICKER_AGENT,
        }
    }

    /// The `i`-th session's kind: one in ten prints steadily.
    pub fn of_index(i: u64) -> Kind {
        if i % 10 == 9 {
            Kind::Ticker
        } else {
            Kind::Quiet
        }
    }
}

/// One held session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub id: SessionId,
    pub kind: Kind,
}

/// Why a spawn failed: the daemon's answer, or the transport's.
#[derive(Debug, Clone)]
pub struct SpawnRefused {
    /// The daemon's error code, when it answered with one.
    pub code: Option<String>,
    /// Its `data.problem`, when it gave one (which limit a `host_unavailable` ran into).
    pub problem: Option<String>,
    /// The whole message.
    pub message: String,
}

impl std::fmt::Display for SpawnRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The held sessions.
pub struct Fleet {
    cwd: String,
    up: RefCell<Vec<Member>>,
    /// Out of the pool while a worker turns them over.
    turning: RefCell<HashSet<SessionId>>,
    /// Ended by the soak itself.
    retired: RefCell<HashSet<SessionId>>,
    next_name: Cell<u64>,
}

impl Fleet {
    /// An empty fleet whose sessions run in `cwd`.
    pub fn new(cwd: String) -> Fleet {
        Fleet {
            cwd,
            up: RefCell::new(Vec::new()),
            turning: RefCell::new(HashSet::new()),
            retired: RefCell::new(HashSet::new()),
            next_name: Cell::new(0),
        }
    }

    /// Sessions held (up or being turned over).
    pub fn len(&self) -> usize {
        self.up.borrow().len()
    }

    /// The held sessions.
    pub fn members(&self) -> Vec<Member> {
        self.up.borrow().clone()
    }

    /// A random held session of `kind` (any kind for `None`) that is not being turned over.
    pub fn pick(&self, rng: &mut Rng, kind: Option<Kind>) -> Option<Member> {
        let up = self.up.borrow();
        let turning = self.turning.borrow();
        // A few random tries find one in a fleet where most are eligible; the scan after
        // them keeps a fleet of one kind from returning nothing by bad luck.
        let fits = |m: &Member| kind.is_none_or(|k| m.kind == k) && !turning.contains(&m.id);
        for _ in 0..16 {
            if let Some(m) = rng.pick(&up) {
                if fits(m) {
                    return Some(*m);
                }
            }
        }
        let eligible: Vec<&Member> = up.iter().filter(|m| fits(m)).collect();
        rng.pick(&eligible).map(|m| **m)
    }

    /// Whether the soak ended `id` itself.
    pub fn is_retired(&self, id: SessionId) -> bool {
        self.retired.borrow().contains(&id) || self.turning.borrow().contains(&id)
    }

    /// Spawns a session of `kind` and holds it; answers the spawn's latency.
    pub async fn spawn(
        &self,
        client: &DaemonClient,
        kind: Kind,
    ) -> Result<(Member, Duration), SpawnRefused> {
        let n = self.next_name.get();
        self.next_name.set(n + 1);
        let body = serde_json::json!({
            "agent": kind.agent(), "cwd": self.cwd, "name": format!("{PREFIX}{n}"),
            "cols": 80, "rows": 24,
        });
        let sent = Instant::now();
        let answer = client.spawn(&body).await;
        let latency = sent.elapsed();
        match answer {
            Ok(d) => {
                let member = Member { id: d.id, kind };
                self.up.borrow_mut().push(member);
                Ok((member, latency))
            }
            Err(e) => Err(SpawnRefused {
                code: match &e {
                    ClientError::Api(api) => Some(api.code.to_string()),
                    _ => None,
                },
                problem: match &e {
                    ClientError::Api(api) => api
                        .data
                        .get("problem")
                        .and_then(|p| p.as_str())
                        .map(str::to_string),
                    _ => None,
                },
                message: e.to_string(),
            }),
        }
    }

    /// Takes `member` out of the pool for turning over.
    pub fn start_turning(&self, member: Member) {
        self.turning.borrow_mut().insert(member.id);
    }

    /// `member` is ended and forgotten: it is no longer held.
    pub fn retire(&self, member: Member) {
        self.up.borrow_mut().retain(|m| m.id != member.id);
        self.turning.borrow_mut().remove(&member.id);
        self.retired.borrow_mut().insert(member.id);
    }

    /// Ends every soak session the daemon lists or the fleet holds, `concurrency` at a time,
    /// within `limit`; answers how many could not be ended.
    pub async fn end_all(
        &self,
        client: &DaemonClient,
        concurrency: usize,
        limit: Duration,
    ) -> EndAll {
        let mut ids: Vec<SessionId> = self.up.borrow().iter().map(|m| m.id).collect();
        // A spawn whose answer was lost still made a session; its name finds it. A failed
        // listing leaves only those behind, and the daemon's stop ends them with it.
        if let Ok(listed) = client.list_sessions().await {
            let held: HashSet<SessionId> = ids.iter().copied().collect();
            ids.extend(
                listed
                    .iter()
                    .filter(|d| d.name.starts_with(PREFIX) && !held.contains(&d.id))
                    .map(|d| d.id),
            );
        }
        let total = ids.len();
        let ended = Cell::new(0usize);
        let first_error: RefCell<Option<String>> = RefCell::new(None);
        let work = futures_util::stream::iter(ids)
            .map(|id| end_one(client, id))
            .buffer_unordered(concurrency.max(1))
            .for_each(|res| {
                match res {
                    Ok(()) => ended.set(ended.get() + 1),
                    Err(e) => {
                        first_error.borrow_mut().get_or_insert(e);
                    }
                }
                async {}
            });
        let timed_out = tokio::time::timeout(limit, work).await.is_err();
        self.up.borrow_mut().clear();
        EndAll {
            total,
            ended: ended.get(),
            timed_out,
            first_error: first_error.into_inner(),
        }
    }
}

/// How ending the fleet went.
#[derive(Debug, Clone)]
pub struct EndAll {
    pub total: usize,
    pub ended: usize,
    pub timed_out: bool,
    pub first_error: Option<String>,
}

/// Whether the daemon says the session is already gone or already dead.
pub fn is_gone(e: &ClientError) -> bool {
    matches!(e, ClientError::Api(err) if err.status == 404
        || err.is(ErrorCode::NoSuchSession)
        || err.is(ErrorCode::SessionDead))
}

/// Kills `id`, waits (up to 10 s) for its harness to be gone, and forgets it. "Already gone"
/// answers count as done.
pub async fn end_one(client: &DaemonClient, id: SessionId) -> Result<(), String> {
    match client
        .post_json(&routes::session_action(id, "kill"), &serde_json::json!({}))
        .await
    {
        Ok(_) => {}
        Err(e) if is_gone(&e) => {}
        Err(e) => return Err(format!("kill {id}: {e}")),
    }
    // The kill answers once SIGHUP is sent; the forget of a session still alive would kill
    // it again instead of forgetting it, so wait for the harness to be reaped first.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.get_json(&routes::session(id)).await {
            Ok(answer) if answer["session"]["alive"] == serde_json::Value::Bool(false) => break,
            Ok(_) => {}
            Err(e) if is_gone(&e) => return Ok(()),
            Err(e) => return Err(format!("reading {id} after its kill: {e}")),
        }
        if Instant::now() >= deadline {
            return Err(format!("{id} still alive 10 s after its kill"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    match client.delete(&routes::session(id)).await {
        Ok(_) => Ok(()),
        Err(e) if is_gone(&e) => Ok(()),
        Err(e) => Err(format!("forget {id}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u128, kind: Kind) -> Member {
        Member {
            id: SessionId::from(uuid::Uuid::from_u128(n)),
            kind,
        }
    }

    #[test]
    fn one_in_ten_ticks() {
        let tickers = (0..1000)
            .filter(|i| Kind::of_index(*i) == Kind::Ticker)
            .count();
        assert_eq!(tickers, 100);
        assert_eq!(Kind::of_index(0), Kind::Quiet);
    }

    #[test]
    fn picks_only_what_fits() {
        let fleet = Fleet::new("/tmp".into());
        fleet.up.borrow_mut().extend([
            member(1, Kind::Quiet),
            member(2, Kind::Ticker),
            member(3, Kind::Quiet),
        ]);
        let mut rng = Rng::new(5);
        for _ in 0..50 {
            assert_eq!(
                fleet.pick(&mut rng, Some(Kind::Ticker)).map(|m| m.id),
                Some(SessionId::from(uuid::Uuid::from_u128(2)))
            );
        }
        fleet.start_turning(member(2, Kind::Ticker));
        assert_eq!(fleet.pick(&mut rng, Some(Kind::Ticker)), None);
        assert!(fleet.is_retired(SessionId::from(uuid::Uuid::from_u128(2))));
        fleet.retire(member(2, Kind::Ticker));
        assert_eq!(fleet.len(), 2);
        assert!(fleet.is_retired(SessionId::from(uuid::Uuid::from_u128(2))));
        assert!(!fleet.is_retired(SessionId::from(uuid::Uuid::from_u128(1))));
    }
}
