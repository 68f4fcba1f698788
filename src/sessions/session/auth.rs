//! What a broker-backed session's descriptor says of its host's binding (`auth: {state,
//! revision}`, issue 9 item 3). The binding actor owns the binding; the session keeps only
//! the last state it learned, so building a descriptor stays synchronous and cheap. It learns
//! when its actor starts (a spawn, and every restore after a daemon restart), whenever its
//! harness (re)attaches (a spawn's binding becomes `ready` before the session hears of the
//! start), and from every answer of `GET .../auth` and `POST .../auth/revoke`, and after every rebind. A change is
//! announced like any other (`SessionState`). The handlers of the binding's routes are here
//! too; each asks the binding of the session's host (its host key: a sub-session on its
//! parent's host shares the parent's binding).

use actix::prelude::*;

use super::start::provider_of;
use super::Session;
use crate::providers::host_lifecycle::auth_of;
use crate::sessions::messages::{
    AuthAnswer, AuthStatusOf, DescribeWithAuth, RebindAuth, RevokeAuth,
};
use crate::sessions::session_error::SessionError;
use atc_protocol::responses::SessionAuth;

impl Session {
    /// Whether the session's agent keeps its credential in impd's broker.
    fn broker_backed(&self) -> bool {
        self.deps
            .catalog
            .broker_launch(&self.record.agent)
            .is_some()
    }

    /// Asks the host's binding for its state, in the background; a session of an agent
    /// without `auth` asks nothing.
    pub(super) fn refresh_auth(&mut self, ctx: &mut Context<Self>) {
        if !self.broker_backed() {
            return;
        }
        let Ok(provider) = provider_of(&self.deps, &self.record.target) else {
            return;
        };
        let host = self.record.host_key.to_string();
        let asked = auth_of(provider.as_ref(), |h| h.auth_status(&host));
        ctx.spawn(
            asked
                .into_actor(self)
                .map(|answer, act, _| act.learn_auth(&answer)),
        );
    }

    /// The descriptor once the binding was read afresh: see
    /// [`crate::sessions::messages::DescribeWithAuth`].
    pub(super) fn describe_with_auth(
        &mut self,
    ) -> ResponseActFuture<Self, atc_protocol::Descriptor> {
        let provider = provider_of(&self.deps, &self.record.target).ok();
        let Some(provider) = provider.filter(|_| self.broker_backed()) else {
            return Box::pin(fut::ready(self.descriptor()));
        };
        let host = self.record.host_key.to_string();
        let asked = auth_of(provider.as_ref(), |h| h.auth_status(&host));
        Box::pin(asked.into_actor(self).map(|answer, act, _| {
            act.learn_auth(&answer);
            act.descriptor()
        }))
    }

    /// Takes in what a binding answer says: a status replaces the cached one (announced
    /// when it changed); an error leaves it (a host without a binding yet, an impd away).
    pub(super) fn learn_auth<E>(
        &mut self,
        answer: &Result<atc_protocol::responses::AuthStatus, E>,
    ) {
        let Ok(status) = answer else {
            return;
        };
        let learned = Some(SessionAuth::from(status));
        if learned != self.auth {
            self.auth = learned;
            self.notify_state();
        }
    }
}

impl Handler<AuthStatusOf> for Session {
    type Result = ResponseActFuture<Self, AuthAnswer>;

    fn handle(&mut self, _: AuthStatusOf, _: &mut Self::Context) -> Self::Result {
        let host = self.record.host_key.to_string();
        let asked = match provider_of(&self.deps, &self.record.target) {
            Ok(p) => auth_of(p.as_ref(), |h| h.auth_status(&host)),
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        Box::pin(asked.into_actor(self).map(|answer, act, _| {
            let answer = answer.map_err(SessionError::from);
            act.learn_auth(&answer);
            answer
        }))
    }
}

impl Handler<DescribeWithAuth> for Session {
    type Result = ResponseActFuture<Self, atc_protocol::Descriptor>;

    fn handle(&mut self, _: DescribeWithAuth, _: &mut Self::Context) -> Self::Result {
        self.describe_with_auth()
    }
}

impl Handler<RevokeAuth> for Session {
    type Result = ResponseActFuture<Self, AuthAnswer>;

    fn handle(&mut self, _: RevokeAuth, _: &mut Self::Context) -> Self::Result {
        let host = self.record.host_key.to_string();
        let asked = match provider_of(&self.deps, &self.record.target) {
            Ok(p) => auth_of(p.as_ref(), |h| h.auth_revoke(&host)),
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        Box::pin(asked.into_actor(self).map(|answer, act, ctx| {
            let answer = answer.map_err(SessionError::from);
            match &answer {
                Ok(_) => act.learn_auth(&answer),
                // A revoke left unconfirmed moved the state all the same.
                Err(_) => act.refresh_auth(ctx),
            }
            answer
        }))
    }
}

impl Handler<RebindAuth> for Session {
    type Result = ResponseActFuture<Self, Result<u32, SessionError>>;

    /// The agent's `auth` is read from the config the daemon runs with now, not the one the
    /// session was spawned with: picking up a changed `auth` is what a rebind is for.
    fn handle(&mut self, _: RebindAuth, _: &mut Self::Context) -> Self::Result {
        let host = self.record.host_key.to_string();
        let agent = &self.record.agent;
        let auth = self.deps.catalog.get(agent).and_then(|a| a.auth.clone());
        let Some(auth) = auth else {
            return Box::pin(fut::ready(Err(
                crate::providers::imp::broker::BrokerError::BindingInvalid {
                    agent: agent.clone(),
                    problem: "no_auth",
                    detail: "the agent has no 'auth' in the daemon's config now, so there is \
                             nothing to rebind to"
                        .into(),
                }
                .into(),
            )));
        };
        let launcher = crate::providers::imp::broker::binder::Launcher {
            agent: agent.clone(),
            auth,
        };
        let asked = match provider_of(&self.deps, &self.record.target) {
            Ok(p) => auth_of(p.as_ref(), |h| h.auth_rebind(&host, launcher)),
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        // Done or failed, the binding moved (a new revision, or `rebind_failed`): the
        // descriptor learns where it stands now.
        Box::pin(asked.into_actor(self).map(|answer, act, ctx| {
            act.refresh_auth(ctx);
            Ok(answer?)
        }))
    }
}
