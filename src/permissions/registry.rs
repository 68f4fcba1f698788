//! `PermissionRegistry`: one per daemon. A session entering `needs_you` opens a request;
//! leaving it, or the session going away, resolves its pending requests as `dismissed`; an
//! unanswered one times out as `deny`. The first response wins; later ones are
//! `already_answered`. Resolved ids are remembered (the newest 1,000) so an answered id is
//! told apart from one that never existed. Every resolution is broadcast exactly once. A client
//! disconnect never resolves anything: only these messages do.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use actix::prelude::*;

use crate::metrics::{Metrics, PermissionResolution};
use atc_protocol::responses::PermissionRequest;
use atc_protocol::{FleetEvent, SessionId};

/// How many resolved ids are remembered (spec §8).
pub const RESOLVED_CAP: usize = 1000;

/// Open a request. Answers its id.
#[derive(Message)]
#[rtype(result = "String")]
pub struct OpenRequest {
    /// The session.
    pub session: SessionId,
    /// The agent's message.
    pub message: String,
    /// Whether it can be answered through the API.
    pub respondable: bool,
}

/// Resolve every pending request of a session as `dismissed`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DismissSession(pub SessionId);

/// Why a permission answer is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermissionError {
    /// The agent asks this in its own terminal; only an attached user can answer.
    #[error("this request is answered in the session's terminal; attach and answer there")]
    NotRespondable {
        /// The request id.
        request: String,
    },
    /// Someone answered it first.
    #[error("this request was already resolved")]
    AlreadyAnswered {
        /// The request id.
        request: String,
    },
    /// No pending request has this id.
    #[error("no such permission request; GET /v1/permissions lists the pending ones")]
    NoSuchRequest {
        /// The request id.
        request: String,
    },
}

/// A client's decision.
#[derive(Message)]
#[rtype(result = "Result<(), PermissionError>")]
pub struct Respond {
    /// The request id.
    pub request: String,
    /// The decision (non-empty).
    pub decision: String,
}

/// The pending requests, oldest first.
#[derive(Message)]
#[rtype(result = "Vec<PermissionRequest>")]
pub struct ListPending;

struct Pending {
    request: PermissionRequest,
    timer: SpawnHandle,
}

/// A permission request opened or resolved, for the fleet's clients: the registry sends it to
/// whoever broadcasts the fleet's events (the session manager), which this module does not
/// otherwise know.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PermissionNotice(pub FleetEvent);

/// The registry.
pub struct PermissionRegistry {
    pending: HashMap<String, Pending>,
    order: VecDeque<String>,
    resolved: HashSet<String>,
    resolved_order: VecDeque<String>,
    next: u64,
    timeout: Duration,
    events: Recipient<PermissionNotice>,
    metrics: Metrics,
}

impl PermissionRegistry {
    /// A registry that times requests out after `timeout`, broadcasts through `events` and
    /// counts resolutions into `metrics`.
    pub fn new(
        timeout: Duration,
        events: Recipient<PermissionNotice>,
        metrics: Metrics,
    ) -> PermissionRegistry {
        PermissionRegistry {
            pending: HashMap::new(),
            order: VecDeque::new(),
            resolved: HashSet::new(),
            resolved_order: VecDeque::new(),
            next: 1,
            timeout,
            events,
            metrics,
        }
    }

    fn resolve(
        &mut self,
        id: &str,
        decision: &str,
        how: PermissionResolution,
        ctx: &mut Context<Self>,
    ) {
        let Some(p) = self.pending.remove(id) else {
            return;
        };
        self.metrics.permission_resolved(how);
        ctx.cancel_future(p.timer);
        self.order.retain(|o| o != id);
        self.resolved.insert(id.to_string());
        self.resolved_order.push_back(id.to_string());
        while self.resolved_order.len() > RESOLVED_CAP {
            if let Some(old) = self.resolved_order.pop_front() {
                self.resolved.remove(&old);
            }
        }
        tracing::info!(request = id, decision, "permission request resolved");
        self.events
            .do_send(PermissionNotice(FleetEvent::PermissionResolved {
                request: id.to_string(),
                decision: decision.to_string(),
            }));
    }
}

impl Actor for PermissionRegistry {
    type Context = Context<Self>;
}

impl Handler<OpenRequest> for PermissionRegistry {
    type Result = String;

    fn handle(&mut self, msg: OpenRequest, ctx: &mut Self::Context) -> String {
        let id = format!("p{}", self.next);
        self.next += 1;
        let timer = ctx.run_later(self.timeout, {
            let id = id.clone();
            move |act, ctx| act.resolve(&id, "deny", PermissionResolution::TimedOut, ctx)
        });
        let request = PermissionRequest {
            request: id.clone(),
            session: msg.session,
            message: msg.message,
            respondable: msg.respondable,
        };
        self.events
            .do_send(PermissionNotice(FleetEvent::PermissionRequested {
                request: id.clone(),
                s: request.session,
                message: request.message.clone(),
                respondable: request.respondable,
            }));
        self.pending.insert(id.clone(), Pending { request, timer });
        self.order.push_back(id.clone());
        id
    }
}

impl Handler<DismissSession> for PermissionRegistry {
    type Result = ();

    fn handle(&mut self, msg: DismissSession, ctx: &mut Self::Context) {
        let ids: Vec<String> = self
            .order
            .iter()
            .filter(|id| {
                self.pending
                    .get(*id)
                    .is_some_and(|p| p.request.session == msg.0)
            })
            .cloned()
            .collect();
        for id in ids {
            self.resolve(&id, "dismissed", PermissionResolution::Dismissed, ctx);
        }
    }
}

impl Handler<Respond> for PermissionRegistry {
    type Result = Result<(), PermissionError>;

    fn handle(&mut self, msg: Respond, ctx: &mut Self::Context) -> Self::Result {
        match self.pending.get(&msg.request) {
            Some(p) if !p.request.respondable => Err(PermissionError::NotRespondable {
                request: msg.request,
            }),
            Some(_) => {
                self.resolve(
                    &msg.request,
                    &msg.decision,
                    PermissionResolution::Answered,
                    ctx,
                );
                Ok(())
            }
            None if self.resolved.contains(&msg.request) => Err(PermissionError::AlreadyAnswered {
                request: msg.request,
            }),
            None => Err(PermissionError::NoSuchRequest {
                request: msg.request,
            }),
        }
    }
}

impl Handler<ListPending> for PermissionRegistry {
    type Result = MessageResult<ListPending>;

    fn handle(&mut self, _: ListPending, _: &mut Self::Context) -> Self::Result {
        MessageResult(
            self.order
                .iter()
                .filter_map(|id| self.pending.get(id))
                .map(|p| p.request.clone())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects broadcast events.
    struct Probe(std::sync::Arc<std::sync::Mutex<Vec<FleetEvent>>>);
    impl Actor for Probe {
        type Context = Context<Self>;
    }
    impl Handler<PermissionNotice> for Probe {
        type Result = ();
        fn handle(&mut self, msg: PermissionNotice, _: &mut Self::Context) {
            if let Ok(mut v) = self.0.lock() {
                v.push(msg.0);
            }
        }
    }

    fn registry(
        timeout: Duration,
    ) -> (
        Addr<PermissionRegistry>,
        std::sync::Arc<std::sync::Mutex<Vec<FleetEvent>>>,
    ) {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let probe = Probe(seen.clone()).start();
        (
            PermissionRegistry::new(timeout, probe.recipient(), Metrics::new()).start(),
            seen,
        )
    }

    fn resolutions(seen: &std::sync::Mutex<Vec<FleetEvent>>) -> Vec<(String, String)> {
        seen.lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                FleetEvent::PermissionResolved { request, decision } => {
                    Some((request.clone(), decision.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn open(respondable: bool) -> OpenRequest {
        OpenRequest {
            session: SessionId::new(),
            message: "allow?".into(),
            respondable,
        }
    }

    #[actix_rt::test]
    async fn first_answer_wins_and_later_ones_are_already_answered() {
        let (reg, seen) = registry(Duration::from_secs(60));
        let id = reg.send(open(true)).await.unwrap();
        let answers = futures_util::future::join_all((0..5).map(|i| {
            reg.send(Respond {
                request: id.clone(),
                decision: format!("d{i}"),
            })
        }))
        .await;
        let ok = answers.iter().filter(|a| matches!(a, Ok(Ok(())))).count();
        assert_eq!(ok, 1, "{answers:?}");
        for a in answers.iter().filter(|a| !matches!(a, Ok(Ok(())))) {
            assert!(
                matches!(a, Ok(Err(e)) if matches!(e, PermissionError::AlreadyAnswered { .. }))
            );
        }
        reg.send(ListPending).await.unwrap();
        assert_eq!(resolutions(&seen).len(), 1, "resolved exactly once");
    }

    #[actix_rt::test]
    async fn each_resolution_is_counted_once_by_how_it_came() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let probe = Probe(seen.clone()).start();
        let metrics = Metrics::new();
        let reg = PermissionRegistry::new(
            Duration::from_millis(30),
            probe.recipient(),
            metrics.clone(),
        )
        .start();
        let answered = reg.send(open(true)).await.unwrap();
        let dismissed = open(false);
        let session = dismissed.session;
        reg.send(dismissed).await.unwrap();
        reg.send(open(false)).await.unwrap();
        for _ in 0..2 {
            // The second answer is already_answered and counts nothing.
            let _ = reg
                .send(Respond {
                    request: answered.clone(),
                    decision: "allow".into(),
                })
                .await;
        }
        reg.send(DismissSession(session)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while resolutions(&seen).len() < 3 {
            assert!(std::time::Instant::now() < deadline, "never timed out");
            actix_rt::time::sleep(Duration::from_millis(10)).await;
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, metrics.registry()).unwrap();
        for how in ["answered", "dismissed", "timed_out"] {
            let line = format!("atc_permission_requests_resolved_total{{resolution=\"{how}\"}} 1");
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }

    #[actix_rt::test]
    async fn unanswered_requests_time_out_as_deny() {
        let (reg, seen) = registry(Duration::from_millis(30));
        let id = reg.send(open(true)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while resolutions(&seen).is_empty() {
            assert!(std::time::Instant::now() < deadline, "never timed out");
            actix_rt::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(resolutions(&seen), vec![(id.clone(), "deny".to_string())]);
        let late = reg
            .send(Respond {
                request: id,
                decision: "allow".into(),
            })
            .await
            .unwrap();
        assert!(matches!(
            late.unwrap_err(),
            PermissionError::AlreadyAnswered { .. }
        ));
    }

    #[actix_rt::test]
    async fn unknown_and_not_respondable_requests_are_refused() {
        let (reg, _) = registry(Duration::from_secs(60));
        let id = reg.send(open(false)).await.unwrap();
        let e = reg
            .send(Respond {
                request: id,
                decision: "allow".into(),
            })
            .await
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, PermissionError::NotRespondable { .. }));
        let e = reg
            .send(Respond {
                request: "p999".into(),
                decision: "allow".into(),
            })
            .await
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, PermissionError::NoSuchRequest { .. }));
    }

    #[actix_rt::test]
    async fn only_the_newest_thousand_resolved_ids_are_remembered() {
        let (reg, _) = registry(Duration::from_secs(60));
        let mut ids = Vec::new();
        for _ in 0..=RESOLVED_CAP {
            let id = reg.send(open(true)).await.unwrap();
            reg.send(Respond {
                request: id.clone(),
                decision: "allow".into(),
            })
            .await
            .unwrap()
            .unwrap();
            ids.push(id);
        }
        let oldest = reg
            .send(Respond {
                request: ids[0].clone(),
                decision: "x".into(),
            })
            .await
            .unwrap();
        assert!(
            matches!(oldest.unwrap_err(), PermissionError::NoSuchRequest { .. }),
            "evicted: reads as unknown"
        );
        let kept = reg
            .send(Respond {
                request: ids[1].clone(),
                decision: "x".into(),
            })
            .await
            .unwrap();
        assert!(matches!(
            kept.unwrap_err(),
            PermissionError::AlreadyAnswered { .. }
        ));
    }

    #[actix_rt::test]
    async fn dismissing_a_session_resolves_its_requests_only() {
        let (reg, seen) = registry(Duration::from_secs(60));
        let a = open(false);
        let session = a.session;
        let id_a = reg.send(a).await.unwrap();
        let _id_b = reg.send(open(false)).await.unwrap();
        reg.send(DismissSession(session)).await.unwrap();
        assert_eq!(resolutions(&seen), vec![(id_a, "dismissed".to_string())]);
        assert_eq!(reg.send(ListPending).await.unwrap().len(), 1);
    }
}
