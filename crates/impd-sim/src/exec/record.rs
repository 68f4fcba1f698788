//! What the simulator keeps of each opening message that passed the schema, before any check
//! decides it: the tests' proof of what a client sent (`ImpdSim::exec_opens`). Environment
//! values are never kept, only their keys.

use super::message::Open;
use crate::broker::{ExecOpenRecord, OpenKind};

/// The record of one opening message.
pub(super) fn record(open: &Open) -> ExecOpenRecord {
    let require = |on: bool| {
        if on {
            vec!["broker".to_string()]
        } else {
            Vec::new()
        }
    };
    match open {
        Open::Start(s) => ExecOpenRecord {
            kind: OpenKind::Start,
            imp: s.name.clone(),
            session: s.session.clone(),
            require: require(s.require_broker),
            env_keys: s.env.keys().cloned().collect(),
        },
        Open::Attach(a) => ExecOpenRecord {
            kind: OpenKind::Attach,
            imp: a.name.clone(),
            session: Some(a.session.clone()),
            require: require(a.require_broker),
            env_keys: Vec::new(),
        },
    }
}
