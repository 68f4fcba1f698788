//! A session's part in principals' reach (spec §2.5): when its tree changes, the clients
//! attached as a principal that no longer reaches the whole tree are closed, since for them
//! the session is gone.

use actix::prelude::*;

use super::Session;
use crate::sessions::messages::TreeChanged;

impl Handler<TreeChanged> for Session {
    type Result = ();

    fn handle(&mut self, msg: TreeChanged, ctx: &mut Self::Context) {
        if self.clients.close_out_of_reach(&msg.tree) {
            tracing::info!(session = %self.record.id,
                "closed attach sockets of a principal the session's tree left");
            self.schedule_resize(ctx);
        }
    }
}
