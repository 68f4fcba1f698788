//! The idleness a host's sleep weighs (spec §5.5): the lease asks one [`CheckIdle`], and on a
//! host a sub-session shares that must be every session there, not only the owner that asked
//! for the sleep. [`HostIdleCheck`] answers the lease's question by asking the manager, which
//! knows who shares the host ([`HostIdle`]).

use actix::prelude::*;

use crate::providers::CheckIdle;
use crate::sessions::host_messages::HostIdle;
use atc_protocol::SessionId;

/// Answers [`CheckIdle`] for a whole host; lives as long as the sleep holds its address.
pub struct HostIdleCheck {
    host_key: SessionId,
    mates: Recipient<HostIdle>,
}

impl HostIdleCheck {
    /// A check of the host `host_key`, asked of `mates` (the manager).
    pub fn new(host_key: SessionId, mates: Recipient<HostIdle>) -> HostIdleCheck {
        HostIdleCheck { host_key, mates }
    }
}

impl Actor for HostIdleCheck {
    type Context = Context<Self>;
}

impl Handler<CheckIdle> for HostIdleCheck {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, _: CheckIdle, _: &mut Self::Context) -> Self::Result {
        let ask = self.mates.send(HostIdle {
            host_key: self.host_key,
        });
        // A manager that cannot answer is stopping: nothing is idle enough to sleep then.
        Box::pin(async move { ask.await.unwrap_or(false) })
    }
}
