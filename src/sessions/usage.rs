//! What sessions use, read from their cgroups when a client asks (issue 35): no timer samples
//! it, so a fleet nobody looks at costs nothing. A read is a few small files a session, in
//! the kernel's memory, done off the sessions' thread for a whole listing.

use std::collections::HashMap;
use std::sync::Arc;

use atc_protocol::{Descriptor, SessionId, Usage};

use crate::providers::local::cgroup::SessionCgroups;
use crate::providers::registry::Providers;

/// The cgroups of a session that has one now: live, on a provider that puts its sessions in
/// cgroups.
pub fn cgroups_of(d: &Descriptor, providers: &Providers) -> Option<Arc<SessionCgroups>> {
    if !d.alive {
        return None;
    }
    providers
        .get(&d.locator.target_id)?
        .session_cgroups()
        .cloned()
}

/// Reads the usage of each `(id, cgroups)`; blocking (file reads). A session whose cgroup is
/// gone by now (its process ended meanwhile) is left out.
pub fn read(sessions: Vec<(SessionId, Arc<SessionCgroups>)>) -> HashMap<SessionId, Usage> {
    sessions
        .into_iter()
        .filter_map(|(id, cgroups)| Some((id, cgroups.group(id).usage()?)))
        .collect()
}
