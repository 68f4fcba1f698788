//! What a broker-backed session's descriptor says of its host's binding (`auth: {state,
//! revision}`, issue 9 item 3). The binding actor owns the binding; the session keeps only
//! the last state it learned, so building a descriptor stays synchronous and cheap. It learns
//! when its actor starts (a spawn, and every restore after a daemon restart), whenever its
//! harness (re)attaches (a spawn's binding becomes `ready` before the session hears of the
//! start), and from every answer of `GET .../auth` and `POST .../auth/revoke`, and after every rebind. A change is
//! announced like any other (`SessionState`).

use actix::prelude::*;

use super::start::provider_of;
use super::Session;
use crate::providers::host_lifecycle::auth_of;
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
