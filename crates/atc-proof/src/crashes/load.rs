//! The load of one daemon life: careful clients sending keyed spawns, and the moment the
//! daemon is killed under them.
//!
//! A client takes a key whose answer was lost first (same key, same body, as a careful
//! client retries), else a new one, and sends it; a transport failure means the daemon is gone,
//! so the key goes back to the book and the client stops for this life. A definite answer (a
//! session, `outcome_unknown`, a refusal) settles the key for good. [`Signals`] tells the
//! killer when requests go out and answers come back, so [`kill_moment`] can land the kill
//! right after a send, in the middle of a spawn, or between an answer and the next request.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::rng::Rng;

/// Where a key's session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A local PTY.
    Local,
    /// The imp target, on the simulator.
    Imp,
    /// The imp target with the broker-backed agent (an `auth` section).
    Broker,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Local, Kind::Imp, Kind::Broker];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Local => "local",
            Kind::Imp => "imp",
            Kind::Broker => "broker",
        }
    }

    /// The agent and target this kind spawns.
    fn agent_and_target(self) -> (&'static str, &'static str) {
        match self {
            Kind::Local => (super::MARK_AGENT, "local"),
            Kind::Imp => (super::MARK_AGENT, super::IMP_TARGET),
            Kind::Broker => (super::BROKER_AGENT, super::IMP_TARGET),
        }
    }
}

/// One idempotency key and the request sent under it, every time.
#[derive(Debug, Clone)]
pub struct KeyTask {
    pub key: String,
    pub kind: Kind,
    /// The spawn body; never changes between retries.
    pub body: Value,
    /// The key's own cwd, where its program leaves its evidence.
    pub dir: PathBuf,
    /// Requests sent under the key.
    pub attempts: u32,
    /// Of those, how many got no answer (the daemon died under them).
    pub lost: u32,
    /// Answers that asked for a retry (5xx), which a careful client retries too.
    pub retried: u32,
}

/// A definite answer for a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// 201, or 200 replayed: the session it names.
    Spawned { session: String, replayed: bool },
    /// 409 `outcome_unknown`: the earlier effect may or may not stand.
    Unknown { effect_ref: String },
    /// The key completed but its session is not listed (`no_such_session` with effectRef).
    NotListed { effect_ref: String },
    /// Any other refusal (a 4xx, or a 5xx that kept coming).
    Refused { status: u16, code: String },
}

/// A key with its definite answer.
#[derive(Debug, Clone)]
pub struct Settled {
    pub task: KeyTask,
    pub outcome: Outcome,
    /// The life in which the answer came.
    pub life: u64,
}

/// Every key of the run: the ones waiting for a retry and the settled ones.
#[derive(Debug, Default)]
pub struct Book {
    pub pending: Vec<KeyTask>,
    pub settled: Vec<Settled>,
    next_key: u64,
}

impl Book {
    /// A key whose answer was lost, else a new one of the next kind.
    fn next_task(&mut self, keys_dir: &std::path::Path, prefix: &str) -> KeyTask {
        if let Some(task) = self.pending.pop() {
            return task;
        }
        self.next_key += 1;
        // Kinds take turns, so every kind lands under kills in a short run too.
        let kind = Kind::ALL[(self.next_key % 3) as usize];
        let key = format!("{prefix}-{}-{}", kind.name(), self.next_key);
        let dir = keys_dir.join(&key);
        let (agent, target) = kind.agent_and_target();
        let body = json!({
            "agent": agent,
            "cwd": dir.to_string_lossy(),
            "target": target,
            "name": key,
        });
        KeyTask {
            key,
            kind,
            body,
            dir,
            attempts: 0,
            lost: 0,
            retried: 0,
        }
    }
}

/// What the killer hears from the clients.
#[derive(Default)]
pub struct Signals {
    sent: Cell<u64>,
    answered: Cell<u64>,
    /// Clients still sending in this life.
    running: Cell<usize>,
    /// Mean time of an answered spawn so far (ms), for kills aimed inside one.
    mean_ms: Cell<f64>,
    changed: Notify,
}

impl Signals {
    /// Signals for a life of `clients` clients, counted as running from the start: the
    /// killer may be polled before any client is, and must not take the life for over.
    pub fn for_clients(clients: usize) -> Signals {
        let signals = Signals::default();
        signals.running.set(clients);
        signals
    }

    fn bump(&self, counter: &Cell<u64>) {
        counter.set(counter.get() + 1);
        self.changed.notify_waiters();
    }

    fn answered_in(&self, took: Duration) {
        let n = self.answered.get() as f64;
        let ms = took.as_secs_f64() * 1000.0;
        self.mean_ms.set((self.mean_ms.get() * n + ms) / (n + 1.0));
        self.bump(&self.answered);
    }

    /// Requests sent and not answered yet.
    pub fn in_flight(&self) -> u64 {
        self.sent.get().saturating_sub(self.answered.get())
    }

    /// Waits until `cond` holds or `deadline` passes; answers whether it held.
    async fn until(&self, deadline: Instant, cond: impl Fn(&Signals) -> bool) -> bool {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a change between check and wait is not missed.
            notified.as_mut().enable();
            if cond(self) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                return cond(self);
            }
        }
    }
}

/// When in a life the daemon is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillMoment {
    /// Within 3 ms of a request going out.
    AfterSend,
    /// At a random point of a spawn's usual duration after a request went out.
    MidSpawn,
    /// Right after an answer came back, before the client's next request.
    AfterAnswer,
    /// Anywhere in the first 800 ms.
    Anytime,
}

impl KillMoment {
    pub fn pick(rng: &mut Rng) -> KillMoment {
        // Biased towards landing inside spawns.
        match rng.below(10) {
            0..=2 => KillMoment::AfterSend,
            3..=5 => KillMoment::MidSpawn,
            6..=8 => KillMoment::AfterAnswer,
            _ => KillMoment::Anytime,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KillMoment::AfterSend => "afterSend",
            KillMoment::MidSpawn => "midSpawn",
            KillMoment::AfterAnswer => "afterAnswer",
            KillMoment::Anytime => "anytime",
        }
    }
}

/// How a life warms up before its kill moment.
#[derive(Debug, Clone, Copy)]
pub struct Warmup {
    /// Answers to wait for, so each life answers some spawns.
    pub answers: u64,
    /// Time to let pass, so the slow spawns (an imp created, a broker binding granted) get
    /// to finish in some lives instead of always dying half-way.
    pub time: Duration,
}

/// Waits for the life's kill moment: the warmup first, then the moment itself. Returns
/// early when every client stopped or `limit` ran out, since there is nothing left to wait
/// for.
pub async fn kill_moment(
    signals: &Signals,
    moment: KillMoment,
    warmup: Warmup,
    rng: &mut Rng,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    let all_stopped = |s: &Signals| s.running.get() == 0;
    tokio::time::sleep(warmup.time.min(limit)).await;
    signals
        .until(deadline, |s| {
            s.answered.get() >= warmup.answers || all_stopped(s)
        })
        .await;
    match moment {
        KillMoment::AfterSend | KillMoment::MidSpawn => {
            let sent = signals.sent.get();
            signals
                .until(deadline, |s| s.sent.get() > sent || all_stopped(s))
                .await;
            let us = match moment {
                KillMoment::AfterSend => rng.below(3_000),
                _ => rng.below((signals.mean_ms.get().max(5.0) * 1000.0) as u64),
            };
            pause_us(us).await;
        }
        KillMoment::AfterAnswer => {
            let answered = signals.answered.get();
            signals
                .until(deadline, |s| s.answered.get() > answered || all_stopped(s))
                .await;
        }
        KillMoment::Anytime => {
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(Duration::from_millis(rng.below(800)).min(left)).await;
        }
    }
}

/// A short pause: 0 only yields, so the kill lands as soon as the executor is back.
async fn pause_us(us: u64) {
    if us < 200 {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(Duration::from_micros(us)).await;
    }
}

/// What one request under a key came back with.
enum Reply {
    /// No answer: the connection failed or timed out.
    Lost,
    /// A 5xx a careful client retries.
    Retry,
    Definite(Outcome),
}

/// One client of one life.
pub struct Client {
    pub url: String,
    pub token: String,
    pub keys_dir: PathBuf,
    pub prefix: String,
    pub life: u64,
    /// At most this many new keys in this life (the settling life sends none).
    pub new_keys: u64,
}

/// How many times a 5xx is retried within a life before the key is settled as refused.
const RETRIES: u32 = 3;

impl Client {
    /// Sends keyed spawns until the daemon is gone or the life's keys are used up. `signals`
    /// counts this client as running until it returns ([`Signals::for_clients`]).
    pub async fn run(self, book: Rc<RefCell<Book>>, signals: Rc<Signals>) {
        let http = awc::Client::builder()
            .timeout(Duration::from_secs(20))
            .finish();
        let mut new_keys = self.new_keys;
        loop {
            let take_new = book.borrow().pending.is_empty();
            if take_new && new_keys == 0 {
                break;
            }
            if take_new {
                new_keys -= 1;
            }
            let mut task = book.borrow_mut().next_task(&self.keys_dir, &self.prefix);
            if let Err(e) = std::fs::create_dir_all(&task.dir) {
                // Without its cwd the spawn would be refused for the wrong reason.
                book.borrow_mut().settled.push(Settled {
                    outcome: Outcome::Refused {
                        status: 0,
                        code: format!("cannot make the key's dir: {e}"),
                    },
                    task,
                    life: self.life,
                });
                continue;
            }
            task.attempts += 1;
            let began = Instant::now();
            signals.bump(&signals.sent);
            let reply = self.send(&http, &task).await;
            signals.answered_in(began.elapsed());
            match reply {
                Reply::Lost => {
                    task.lost += 1;
                    book.borrow_mut().pending.push(task);
                    break;
                }
                Reply::Retry if task.retried < RETRIES => {
                    task.retried += 1;
                    book.borrow_mut().pending.push(task);
                }
                Reply::Retry => book.borrow_mut().settled.push(Settled {
                    task,
                    outcome: Outcome::Refused {
                        status: 500,
                        code: "retried 5xx".into(),
                    },
                    life: self.life,
                }),
                Reply::Definite(outcome) => book.borrow_mut().settled.push(Settled {
                    task,
                    outcome,
                    life: self.life,
                }),
            }
        }
        signals.running.set(signals.running.get() - 1);
        signals.changed.notify_waiters();
    }

    async fn send(&self, http: &awc::Client, task: &KeyTask) -> Reply {
        let sent = http
            .post(format!("{}/v1/sessions", self.url))
            .bearer_auth(&self.token)
            .insert_header(("Idempotency-Key", task.key.as_str()))
            .send_json(&task.body)
            .await;
        let mut resp = match sent {
            Ok(resp) => resp,
            Err(_) => return Reply::Lost,
        };
        let status = resp.status().as_u16();
        let body = match resp.body().limit(1 << 20).await {
            Ok(bytes) => serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            // The head came but the body did not: the answer is lost all the same.
            Err(_) => return Reply::Lost,
        };
        classify(status, &body)
    }
}

/// Sorts an answer into the four a careful client tells apart.
fn classify(status: u16, body: &Value) -> Reply {
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    let effect_ref = body["error"]["data"]["effectRef"]
        .as_str()
        .map(str::to_string);
    match (status, code.as_str(), effect_ref) {
        (200 | 201, _, _) => match body["session"]["id"].as_str() {
            Some(id) => Reply::Definite(Outcome::Spawned {
                session: id.to_string(),
                replayed: status == 200,
            }),
            None => Reply::Definite(Outcome::Refused {
                status,
                code: "an answer without a session".into(),
            }),
        },
        (_, "outcome_unknown", Some(effect_ref)) => {
            Reply::Definite(Outcome::Unknown { effect_ref })
        }
        (_, "no_such_session", Some(effect_ref)) => {
            Reply::Definite(Outcome::NotListed { effect_ref })
        }
        (500..=599, _, _) => Reply::Retry,
        _ => Reply::Definite(Outcome::Refused { status, code }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_sort_into_what_a_careful_client_does_next() {
        let spawned = classify(201, &json!({"session": {"id": "s1"}}));
        assert!(matches!(
            spawned,
            Reply::Definite(Outcome::Spawned { ref session, replayed: false }) if session == "s1"
        ));
        let unknown = json!({"error": {"code": "outcome_unknown", "data": {"effectRef": "e"}}});
        assert!(matches!(
            classify(409, &unknown),
            Reply::Definite(Outcome::Unknown { .. })
        ));
        assert!(matches!(
            classify(503, &json!({"error": {"code": "host_unavailable"}})),
            Reply::Retry
        ));
        assert!(matches!(
            classify(409, &json!({"error": {"code": "idempotency_conflict"}})),
            Reply::Definite(Outcome::Refused { status: 409, .. })
        ));
    }
}
