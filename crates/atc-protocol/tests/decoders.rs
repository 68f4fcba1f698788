//! Property tests of the socket frames as clients decode them, on stable inside `cargo test`:
//! random bytes and mutated real frames (the mutations are the daemon's, in
//! `tests/it/decoders/mutate.rs` at the repository root). What must hold is in
//! `decoders/checks.rs`, shared with the fuzz targets.

#[path = "decoders/checks.rs"]
mod checks;
#[path = "../../../tests/it/decoders/mutate.rs"]
mod mutate;

use atc_protocol::{
    AttachFrame, Descriptor, ErrorCode, ExitReason, FleetEvent, LinkState, NamedBy, Replay,
    SessionId,
};
use mutate::{config, mutated};
use proptest::prelude::*;
use serde_json::Value;
use uuid::Uuid;

fn value<T: serde::Serialize>(frame: &T) -> Value {
    serde_json::to_value(frame).expect("a frame serializes")
}

fn descriptor() -> Box<Descriptor> {
    Box::new(Descriptor {
        id: SessionId::from(Uuid::from_u128(7)),
        name: "work".into(),
        agent: "cat".into(),
        cwd: "/tmp".into(),
        alive: true,
        cols: 80,
        rows: 24,
        created_at: 1_700_000_000_000,
        stream: "s1".into(),
        ..Descriptor::default()
    })
}

fn attach_seeds() -> Vec<Value> {
    vec![
        value(&AttachFrame::Attached {
            session: SessionId::from(Uuid::from_u128(7)),
            stream: "s1".into(),
            cols: 80,
            rows: 24,
            offset: 1024,
            prelude: 300,
            replay: Replay::Screen,
        }),
        value(&AttachFrame::Desync { dropped: 65536 }),
        value(&AttachFrame::Resynced {
            offset: 70000,
            prelude: 12,
        }),
        value(&AttachFrame::Exit {
            code: Some(0),
            signal: None,
            reason: ExitReason::Exited,
            detail: String::new(),
        }),
        value(&AttachFrame::Error {
            code: ErrorCode::BadArgs,
            message: "no".into(),
        }),
        value(&AttachFrame::Attachment {
            state: LinkState::Reattaching,
        }),
        value(&AttachFrame::State {
            session: descriptor(),
        }),
    ]
}

fn fleet_seeds() -> Vec<Value> {
    vec![
        value(&FleetEvent::Added {
            session: descriptor(),
        }),
        value(&FleetEvent::Renamed {
            s: SessionId::from(Uuid::from_u128(7)),
            name: "renamed".into(),
            named_by: NamedBy::User,
        }),
        value(&FleetEvent::Removed {
            s: SessionId::from(Uuid::from_u128(7)),
        }),
    ]
}

fn client_seeds() -> Vec<Value> {
    vec![serde_json::json!({"type": "resize", "cols": 80, "rows": 24})]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn attach_frames_from_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        checks::attach_frame(&bytes);
        checks::client_frame(&bytes);
        checks::fleet_event(&bytes);
    }

    #[test]
    fn attach_frames_mutated(bytes in mutated(attach_seeds())) {
        checks::attach_frame(&bytes);
    }

    #[test]
    fn client_frames_mutated(bytes in mutated(client_seeds())) {
        checks::client_frame(&bytes);
    }

    #[test]
    fn fleet_events_mutated(bytes in mutated(fleet_seeds())) {
        checks::fleet_event(&bytes);
    }
}
