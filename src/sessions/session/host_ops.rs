//! Host operations on a session (spec §3.7, §5.5): suspending its host with the process
//! inside, the two-step forget of a session whose target destroys hosts (a confirmation
//! token, then the destroy), and forgetting: the process ended, the row and the record file
//! deleted, the removal announced, the actor stopped. The confirmation is plain state
//! ([`ForgetConfirmation`]); the rest drives the provider and the store from the actor.

use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::oneshot;

use super::{provider_of, Ending, Session};
use crate::clock::now_ms;
use crate::providers::host_lifecycle::host_lifecycle;
use crate::providers::refusal::Operation;
use crate::providers::DetachHarness;
use crate::sessions::host_messages::{HostDestroyed, HostSlept};
use crate::sessions::messages::{Killed, ParentKilled, FORGET_CONFIRM_TTL};
use crate::sessions::session_error::{ConfirmProblem, SessionError};
use atc_protocol::capabilities::Capability;
use atc_protocol::{Descriptor, FleetEvent};

/// A minted forget confirmation.
#[derive(Debug)]
struct ForgetToken {
    token: String,
    expires: Instant,
    used: bool,
}

/// The forget confirmation minted last. It is kept one lifetime past its expiry, so an
/// expired token is told apart from an unknown one; minting again replaces it.
#[derive(Debug, Default)]
pub struct ForgetConfirmation {
    minted: Option<ForgetToken>,
}

impl ForgetConfirmation {
    /// Remembers `token`, valid for `ttl` from `now`.
    pub fn mint(&mut self, token: String, now: Instant, ttl: Duration) {
        self.minted = Some(ForgetToken {
            token,
            expires: now + ttl,
            used: false,
        });
    }

    /// Takes `token` for a destroy at `now`: it must be the one minted last, unused and
    /// unexpired. A token is used up even if the destroy then fails.
    pub fn redeem(&mut self, token: &str, now: Instant, ttl: Duration) -> Result<(), SessionError> {
        let refuse = |p: ConfirmProblem| Err(SessionError::BadConfirmation(p));
        match &mut self.minted {
            Some(t) if t.token == token && t.used => refuse(ConfirmProblem::Used),
            Some(t) if t.token == token && now > t.expires + ttl => refuse(ConfirmProblem::Unknown),
            Some(t) if t.token == token && now > t.expires => refuse(ConfirmProblem::Expired),
            Some(t) if t.token == token => {
                t.used = true;
                Ok(())
            }
            _ => refuse(ConfirmProblem::Unknown),
        }
    }
}

impl Session {
    /// A client's kill: see [`crate::sessions::messages::Kill`].
    pub(super) fn kill(&mut self) -> ResponseActFuture<Self, Result<Killed, SessionError>> {
        if let Err(e) = self.refuse(Operation::Kill) {
            return Box::pin(fut::ready(Err(e)));
        }
        if self.harness.is_none() {
            // Spec §3.7: killing a dead session forgets it, unless forgetting would destroy
            // its host: that takes the two-step DELETE.
            if self.deps.refusal.destroys_host(&self.record.target) {
                let id = self.record.id;
                return Box::pin(fut::ready(Err(SessionError::ConfirmationRequired { id })));
            }
            let before = self.descriptor();
            return Box::pin(
                self.forget(false)
                    .map(move |res, _, _| res.map(|()| Killed::Forgotten(before))),
            );
        }
        self.attention.say("killing");
        let done = self.end_process(Ending::Killed, self.deps.timings.kill_grace);
        // A parent's live sub-sessions are stopped with it (spec §3.7); a sub-session has none.
        let children = (self.record.parent.is_none()).then(|| {
            self.deps.children.send(ParentKilled {
                parent: self.record.id,
            })
        });
        Box::pin(
            async move {
                // The sender only goes away with the actor, and then nobody reads the answer.
                let _ = done.await;
                if let Some(children) = children {
                    // A manager that is gone has no sub-sessions left to stop.
                    let _ = children.await;
                }
            }
            .into_actor(self)
            .map(|_, act, _| Ok(Killed::Ended(act.descriptor()))),
        )
    }

    /// Spec §3.7 / §5.5: the host sleeps with the process inside; on success the harness is
    /// let go as suspended (exit reason `suspended`, `lastMsg` `asleep`), and a revive wakes
    /// the host and resumes the same process. `force` skips the idleness check.
    pub(super) fn suspend(
        &mut self,
        force: bool,
    ) -> ResponseActFuture<Self, Result<Descriptor, SessionError>> {
        if let Err(e) = self.refuse(Operation::Suspend) {
            return Box::pin(fut::ready(Err(e)));
        }
        if self.record.on_parents_host() {
            let (id, parent) = (self.record.id, self.record.host_key);
            return Box::pin(fut::ready(Err(SessionError::HostShared { id, parent })));
        }
        if self.harness.is_none() {
            return Box::pin(fut::ready(Err(SessionError::Dead { id: self.record.id })));
        }
        let provider = match provider_of(&self.deps, &self.record.target) {
            Ok(p) => p.clone(),
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        // The whole host's idleness: a sub-session's turn keeps it awake too.
        let idle = (!force).then(|| {
            let mates = self.deps.hosts.idle.clone();
            crate::sessions::host_idle::HostIdleCheck::new(self.record.host_key, mates)
                .start()
                .recipient()
        });
        let slept = match host_lifecycle(provider.as_ref(), Capability::Suspend) {
            Ok(hosts) => hosts.suspend_host(&self.record.host_key.to_string(), idle),
            Err(e) => Box::pin(fut::ready(Err(e))),
        };
        Box::pin(
            slept
                .into_actor(self)
                .then(|res, act, _| {
                    let done = res.is_ok().then(|| act.let_harness_go(true)).flatten();
                    // Every other session on the host sleeps with it (spec §3.7).
                    let mates = res.is_ok().then(|| {
                        act.deps.hosts.slept.send(HostSlept {
                            host_key: act.record.host_key,
                            owner: act.record.id,
                        })
                    });
                    async move {
                        if let Some(rx) = done {
                            // Its sender goes only with the actor; the answer is the sleep's.
                            let _ = rx.await;
                        }
                        if let Some(mates) = mates {
                            // A manager that is gone has no sessions left to mark.
                            let _ = mates.await;
                        }
                        res
                    }
                    .into_actor(act)
                })
                .map(|res, act, _| res.map(|()| act.descriptor()).map_err(SessionError::from)),
        )
    }

    /// Lets the harness go (its host slept or was destroyed); answers once its end is
    /// recorded, `None` when there is no harness.
    pub(super) fn let_harness_go(&mut self, host_asleep: bool) -> Option<oneshot::Receiver<()>> {
        let h = self.harness.as_ref()?;
        let (tx, rx) = oneshot::channel();
        self.exit_waiters.push(tx);
        h.detach.do_send(DetachHarness { host_asleep });
        Some(rx)
    }

    /// The first step of a destroying forget: a fresh token and its expiry (epoch ms).
    pub(super) fn mint_forget_token(&mut self) -> Result<(String, i64), SessionError> {
        self.refuse(Operation::Forget)?;
        self.refuse_if_asleep_in_parents_host()?;
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| {
            tracing::error!(session = %self.record.id, error = %e,
                "no randomness for a confirmation token");
            SessionError::Internal
        })?;
        let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        self.forget_token
            .mint(token.clone(), Instant::now(), FORGET_CONFIRM_TTL);
        Ok((token, now_ms() + FORGET_CONFIRM_TTL.as_millis() as i64))
    }

    /// The second step: with a valid token, destroy the host, then forget the session.
    pub(super) fn forget_destroying(
        &mut self,
        token: &str,
    ) -> ResponseActFuture<Self, Result<(), SessionError>> {
        if let Err(e) = self.refuse(Operation::Forget) {
            return Box::pin(fut::ready(Err(e)));
        }
        let checked = self
            .forget_token
            .redeem(token, Instant::now(), FORGET_CONFIRM_TTL)
            .and_then(|()| self.refuse_if_asleep_in_parents_host());
        if let Err(e) = checked {
            return Box::pin(fut::ready(Err(e)));
        }
        // A sub-session on its parent's host ends its own harness only (spec §3.7).
        if self.record.on_parents_host() {
            return self.forget(true);
        }
        let provider = match provider_of(&self.deps, &self.record.target) {
            Ok(p) => p.clone(),
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        // The host goes first: if it cannot be destroyed, the session stays as it is.
        let destroyed = match host_lifecycle(provider.as_ref(), Capability::Destroy) {
            Ok(hosts) => hosts.destroy_host(&self.record.host_key.to_string()),
            Err(e) => Box::pin(fut::ready(Err(e))),
        };
        Box::pin(destroyed.into_actor(self).then(move |res, act, _| {
            // The process went with its host: let the harness go at once rather than have
            // it retry a connection that cannot come back.
            let gone = res.is_ok().then(|| act.let_harness_go(false)).flatten();
            // Every other session on the host goes with it (spec §3.7).
            let mates = res.is_ok().then(|| {
                act.deps.hosts.destroyed.send(HostDestroyed {
                    host_key: act.record.host_key,
                    owner: act.record.id,
                })
            });
            async move {
                if let Some(rx) = gone {
                    // Its sender goes only with the actor; the answer is the destroy's.
                    let _ = rx.await;
                }
                if let Some(mates) = mates {
                    // A manager that is gone has no sessions left to remove.
                    let _ = mates.await;
                }
                res
            }
            .into_actor(act)
            .then(
                |res, act, _| -> ResponseActFuture<Session, Result<(), SessionError>> {
                    match res {
                        // The host and everything on it is gone already.
                        Ok(()) => act.forget(true),
                        Err(e) => Box::pin(fut::ready(Err(e.into()))),
                    }
                },
            )
        }))
    }

    /// Ends the process, removes the workspace, deletes the row and the record file,
    /// announces the removal and stops the actor. Without `force`, a workspace whose removal
    /// would lose work refuses it all (`workspace_dirty`) before anything ends.
    pub(super) fn forget(
        &mut self,
        force: bool,
    ) -> ResponseActFuture<Self, Result<(), SessionError>> {
        if self.record.workspace.is_none() || force {
            return self.forget_now();
        }
        let (workspaces, id) = (self.deps.workspaces.clone(), self.record.id);
        Box::pin(
            async move { workspaces.check_loss(id).await }
                .into_actor(self)
                .then(
                    |weighed, act, _| -> ResponseActFuture<Session, Result<(), SessionError>> {
                        match weighed {
                            Ok(()) => act.forget_now(),
                            Err(e) => Box::pin(fut::ready(Err(e))),
                        }
                    },
                ),
        )
    }

    fn forget_now(&mut self) -> ResponseActFuture<Self, Result<(), SessionError>> {
        // Forgetting does not wait out a grace: the session is going away for good.
        let done = self.end_process(Ending::Killed, Duration::ZERO);
        self.clients.close_all();
        let id = self.record.id;
        let store = self.deps.store.clone();
        let state_dir = self.deps.state_dir.clone();
        let workspaces = self
            .record
            .workspace
            .is_some()
            .then(|| self.deps.workspaces.clone());
        Box::pin(
            async move {
                // Its sender goes only with the actor; the row is deleted either way.
                let _ = done.await;
                if let Some(workspaces) = workspaces {
                    // After the process, whose files these are. A workspace that cannot be
                    // removed stays as an orphan for `atc workspaces prune`; the session goes.
                    if let Err(e) = workspaces.remove(id).await {
                        tracing::error!(session = %id, error = %e, "the workspace stays");
                    }
                }
                // Off this thread: a file system can take its time over an unlink, and a
                // fleet being forgotten pays it a thousand times.
                let removed = crate::sessions::blocking_threads::run(move || {
                    crate::sessions::record_file::remove(&state_dir, &id)
                });
                if removed.await.is_err() {
                    tracing::warn!(session = %id, "removing the session record did not finish");
                }
                match store.delete_session(id).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => {
                        tracing::error!(session = %id, error = %e, "could not delete the row");
                        Err(SessionError::Internal)
                    }
                    Err(_) => Err(SessionError::Internal),
                }
            }
            .into_actor(self)
            .map(|res, act, ctx| {
                if res.is_ok() {
                    act.dismiss_permissions();
                    act.notify(FleetEvent::Removed { s: act.record.id });
                    ctx.stop();
                }
                res
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn reason(r: Result<(), SessionError>) -> String {
        match r {
            Ok(()) => "ok".into(),
            Err(e) => {
                let wire = crate::server::error::Error::from(e).wire();
                assert_eq!(wire.code.as_str(), "bad_args");
                assert_eq!(
                    wire.data.get("field").and_then(|v| v.as_str()),
                    Some("confirm")
                );
                wire.data["reason"].as_str().unwrap_or_default().to_string()
            }
        }
    }

    #[test]
    fn a_token_is_taken_once() {
        let now = Instant::now();
        let mut c = ForgetConfirmation::default();
        assert_eq!(
            reason(c.redeem("t1", now, TTL)),
            "unknown",
            "nothing minted"
        );
        c.mint("t1".into(), now, TTL);
        assert_eq!(reason(c.redeem("nope", now, TTL)), "unknown");
        assert_eq!(reason(c.redeem("t1", now, TTL)), "ok");
        assert_eq!(reason(c.redeem("t1", now, TTL)), "used");
    }

    #[test]
    fn an_expired_token_is_told_apart_for_one_more_lifetime() {
        let now = Instant::now();
        let mut c = ForgetConfirmation::default();
        c.mint("t".into(), now, TTL);
        assert_eq!(
            reason(c.redeem("t", now + TTL + Duration::from_secs(1), TTL)),
            "expired"
        );
        assert_eq!(
            reason(c.redeem("t", now + 2 * TTL + Duration::from_secs(1), TTL)),
            "unknown"
        );
    }

    #[test]
    fn minting_again_replaces_the_last_token() {
        let now = Instant::now();
        let mut c = ForgetConfirmation::default();
        c.mint("old".into(), now, TTL);
        c.mint("new".into(), now, TTL);
        assert_eq!(reason(c.redeem("old", now, TTL)), "unknown");
        assert_eq!(reason(c.redeem("new", now, TTL)), "ok");
    }
}
