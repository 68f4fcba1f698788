//! A remote session on the impd simulator, where it runs there, and its host put to sleep.

use std::time::Duration;

use serde_json::Value;

use crate::test_daemon::{id_of, TestDaemon};
use crate::wait::{poll_every, WITHIN};

/// One remote `sh` session and its names on the impd simulator.
pub struct Remote {
    /// atc's session id.
    pub id: String,
    /// The imp it runs in.
    pub imp: String,
    /// Its impd session name.
    pub session: String,
}

/// Spawns `sh` on the daemon's default (imp) target and waits until its harness is attached.
pub async fn spawn_remote(d: &TestDaemon, sim: &impd_sim::ImpdSim) -> Remote {
    let id = id_of(&d.spawn("sh").await);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    let session = impd_client::exec_session_name(&id);
    let imp = sim
        .imps()
        .into_iter()
        .find(|i| i.sessions.iter().any(|s| s.name == session))
        .map(|i| i.name)
        .unwrap_or_else(|| panic!("no imp runs {session}: {:#?}", sim.imps()));
    Remote { id, imp, session }
}

/// Suspends session `id`'s host once its output has settled (suspend answers 503 `busy`
/// until then), within [`WITHIN`]; answers the first other answer, or the last `busy` one.
pub async fn suspend_when_idle(d: &TestDaemon, id: &str) -> (u16, Value) {
    let mut last = (0, Value::Null);
    // Each try is a suspend the daemon weighs: a slower beat than a plain read's.
    let settled = poll_every(Duration::from_millis(100), WITHIN, async || {
        let (status, body) = d
            .call("POST", &format!("/v1/sessions/{id}/suspend"), None)
            .await;
        let busy = status == 503 && body["error"]["data"]["problem"] == "busy";
        if busy {
            last = (status, body);
            return None;
        }
        Some((status, body))
    })
    .await;
    settled.unwrap_or(last)
}
