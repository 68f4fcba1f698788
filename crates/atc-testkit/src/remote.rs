//! A remote session on the impd simulator, and where it runs there.

use crate::test_daemon::{id_of, TestDaemon};

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
    let session = atc::providers::imp::naming::exec_session_name(&id);
    let imp = sim
        .imps()
        .into_iter()
        .find(|i| i.sessions.iter().any(|s| s.name == session))
        .map(|i| i.name)
        .unwrap_or_else(|| panic!("no imp runs {session}: {:#?}", sim.imps()));
    Remote { id, imp, session }
}
