//! Sessions: the supervisor ([`manager`], its table of sessions in [`fleet`]), one actor per
//! session ([`session`], with its parts beside it), their messages, and the pieces a session
//! owns: the screen model, the output ring and the bounded queue of each attached client.

pub mod activity_sweep;
pub mod admission;
pub mod blocking_threads;
pub mod client_queue;
pub mod fleet;
pub mod heap_trim;
pub mod host_idle;
pub mod host_key;
pub mod host_messages;
pub mod input_port;
pub mod launch;
pub mod live_slots;
pub mod manager;
pub mod messages;
pub mod process_cpu;
pub mod reach;
pub mod reach_view;
pub mod record_file;
pub mod report_key;
pub mod ring;
pub mod screen;
pub mod screen_log;
pub mod screen_worker;
pub mod session;
pub mod session_error;
pub mod session_name;
pub mod status_file;
pub mod subscribers;
pub mod trail_sweep;
pub mod usage;
pub mod workspace_step;
pub mod workspace_transfer;

/// The session a fleet event is about; `None` for a resolved permission, which names none.
pub fn fleet_event_session(event: &atc_protocol::FleetEvent) -> Option<atc_protocol::SessionId> {
    use atc_protocol::FleetEvent as E;
    match event {
        E::Added { session } | E::State { session } => Some(session.id),
        E::Renamed { s, .. }
        | E::Removed { s }
        | E::Resized { s, .. }
        | E::PermissionRequested { s, .. } => Some(*s),
        E::PermissionResolved { .. } => None,
    }
}
