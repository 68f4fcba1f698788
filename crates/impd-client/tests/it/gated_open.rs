//! The last-moment check of a launch (daemon spec §6.4): `open_exec_gated` runs its gate once
//! the `/exec` socket is open and before the opening message is written. A refusal closes
//! the socket with nothing sent; impd (the simulator) records no opening.

use futures_util::StreamExt;
use impd_client::{
    ExecEvent, GatedOpenError, ImpdClient, Opening, Requirement, StartMsg, TokenSource,
};
use impd_sim::{ImpdSim, SimOptions};

fn start() -> Opening {
    Opening::Start(StartMsg {
        name: "box".into(),
        argv: vec!["sh".into(), "-c".into(), "echo gated-ok".into()],
        tty: true,
        cols: 80,
        rows: 24,
        session: Some("gated".into()),
        require: Vec::<Requirement>::new(),
        ..StartMsg::default()
    })
}

#[actix_rt::test]
async fn a_refused_gate_sends_nothing_and_a_passed_one_sends_the_opening() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        ..SimOptions::default()
    });
    let client = ImpdClient::new(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
    );

    let refused = client
        .open_exec_gated(start(), async {
            // The check runs with the socket open: impd holds the connection already.
            assert_eq!(
                sim.open_sockets(),
                1,
                "the gate ran before the socket opened"
            );
            Err::<(), _>("revoked")
        })
        .await;
    assert!(matches!(refused, Err(GatedOpenError::Gate("revoked"))));
    sim.wait_until("closed the refused socket", |s| s.open_sockets() == 0)
        .await;
    assert!(sim.exec_opens().is_empty(), "sent: {:?}", sim.exec_opens());

    let socket = client
        .open_exec_gated(start(), async { Ok::<(), &str>(()) })
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut events = socket.events;
    let first = events.next().await;
    assert!(matches!(first, Some(ExecEvent::Started(_))), "{first:?}");
    assert_eq!(sim.exec_opens().len(), 1);
    sim.stop();
}
