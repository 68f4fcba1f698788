//! The impd client (`impd-client`) against the impd simulator, through real loopback HTTP and
//! WebSockets: the oRPC envelope and its errors, auth and transport failures, features, imps,
//! leases, `/exec` sessions and plain runs, and `/tunnel` reverse forwards.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use impd_client::error::ImpdCode;
use impd_client::{
    AttachMsg, CreateImp, ExecEvent, ExecEvents, ImpdClient, ImpdTimeouts, Opening, Resume,
    ResumeFrom, RunSpec, StartMsg, TokenSource,
};
use impd_sim::{Features, ImpState, ImpdSim, Scope, SimOptions, When};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Generous bound for things that should happen quickly; it only bounds failure.
const WITHIN: Duration = Duration::from_secs(10);

/// A simulator with one running imp named `box`.
fn sim_with_box() -> ImpdSim {
    ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        ..SimOptions::default()
    })
}

/// A client reading the simulator's token file.
fn client(sim: &ImpdSim) -> ImpdClient {
    ImpdClient::new(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
    )
}

/// A client with a token that is not the simulator's.
fn wrong_token_client(sim: &ImpdSim) -> (ImpdClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "not-the-token\n").unwrap();
    (ImpdClient::new(&sim.url(), TokenSource::File(path)), dir)
}

/// A tty session start on `box` running `script` under `sh -c`.
fn session_start(session: &str, script: &str) -> Opening {
    Opening::Start(StartMsg {
        name: "box".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        tty: true,
        cols: 80,
        rows: 24,
        session: Some(session.into()),
        ..StartMsg::default()
    })
}

/// The next event within [`WITHIN`].
async fn next_event(events: &mut ExecEvents) -> ExecEvent {
    match tokio::time::timeout(WITHIN, events.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the event stream ended without Closed"),
        Err(_) => panic!("no event within {WITHIN:?}"),
    }
}

/// Collects output until it contains `needle`; any other event is a failure.
async fn data_until(events: &mut ExecEvents, needle: &str) -> Vec<u8> {
    let mut out = Vec::new();
    while !String::from_utf8_lossy(&out).contains(needle) {
        match next_event(events).await {
            ExecEvent::Data { channel: 1, bytes } => out.extend_from_slice(&bytes),
            other => panic!(
                "waiting for {needle:?}, got {other:?} after {:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    out
}

/// Skips output until an event that is not data.
async fn next_non_data(events: &mut ExecEvents) -> ExecEvent {
    loop {
        match next_event(events).await {
            ExecEvent::Data { .. } => {}
            other => return other,
        }
    }
}

/// The next event must be `Closed` with `code`, and then the stream ends.
async fn closed_with(events: &mut ExecEvents, code: u16) {
    match next_non_data(events).await {
        ExecEvent::Closed { code: got, reason } => assert_eq!(got, Some(code), "{reason}"),
        other => panic!("expected Closed {code}, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(WITHIN, events.next())
            .await
            .expect("the stream ends after Closed")
            .is_none(),
        "an event after Closed"
    );
}

/// A port with nothing listening on it.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

// ---------------------------------------------------------------------------------------
// Envelope, auth, transport, features.

#[actix_rt::test]
async fn system_info_reads_version_and_every_feature() {
    let sim = sim_with_box();
    let info = client(&sim).system_info().await.unwrap();
    assert_eq!(info.version, "0.30.1");
    assert!(info.features.session_offsets);
    assert!(info.features.leases);
    assert!(info.features.exec_require);
}

#[actix_rt::test]
async fn an_impd_without_features_supports_nothing_and_has_no_leases() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        features: None,
        ..SimOptions::default()
    });
    let c = client(&sim);
    let info = c.system_info().await.unwrap();
    assert!(!info.features.session_offsets);
    assert!(!info.features.leases);
    assert!(!info.features.exec_require);
    let e = c.leases_acquire("box", "atc-d", 600).await.unwrap_err();
    assert!(e.is(ImpdCode::UnknownProcedure), "{e:?}");
    assert_eq!(e.status, Some(404));
    let imp = c.imps_get("box").await.unwrap().expect("box exists");
    assert!(imp.leases.is_none());
}

#[actix_rt::test]
async fn a_flag_sent_as_false_is_off() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        features: Some(Features {
            exec_require: false,
            leases: false,
            ..Features::all()
        }),
        ..SimOptions::default()
    });
    let c = client(&sim);
    let info = c.system_info().await.unwrap();
    assert!(info.features.session_offsets);
    assert!(!info.features.exec_require);
    assert!(!info.features.leases);
    let e = c.leases_release("box", "atc-d").await.unwrap_err();
    assert!(e.is(ImpdCode::UnknownProcedure), "{e:?}");
}

#[actix_rt::test]
async fn a_wrong_token_is_unauthorized_on_calls_and_upgrades() {
    let sim = sim_with_box();
    let (c, _dir) = wrong_token_client(&sim);
    let e = c.system_info().await.unwrap_err();
    assert!(e.is(ImpdCode::Unauthorized), "{e:?}");
    assert_eq!(e.status, Some(401));
    let e = c
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .err()
        .expect("the upgrade is refused");
    assert!(e.is(ImpdCode::Unauthorized), "{e:?}");
    assert_eq!(e.status, Some(401));
    let e = c.listen_unix("box", "/tmp/x.sock").await.err().unwrap();
    assert!(e.is(ImpdCode::Unauthorized), "{e:?}");
    let none = ImpdClient::new(&sim.url(), TokenSource::None);
    assert!(none
        .imps_get("box")
        .await
        .unwrap_err()
        .is(ImpdCode::Unauthorized));
}

#[actix_rt::test]
async fn a_dead_port_is_unreachable() {
    let c = ImpdClient::new(&dead_url(), TokenSource::None);
    let e = c.system_info().await.unwrap_err();
    assert!(e.is(ImpdCode::Unreachable), "{e:?}");
    let e = c
        .open_exec(session_start("s1", "true"))
        .await
        .err()
        .unwrap();
    assert!(e.is(ImpdCode::Unreachable), "{e:?}");
}

#[actix_rt::test]
async fn a_hung_upgrade_is_unreachable_after_the_open_timeout() {
    let sim = sim_with_box();
    sim.faults().hang_next_upgrades(1);
    let c = ImpdClient::with_timeouts(
        &sim.url(),
        TokenSource::File(sim.token_file().to_path_buf()),
        ImpdTimeouts {
            open: Duration::from_millis(300),
            call: Duration::from_secs(10),
        },
    );
    let began = tokio::time::Instant::now();
    let e = c
        .open_exec(session_start("s1", "true"))
        .await
        .err()
        .unwrap();
    assert!(e.is(ImpdCode::Unreachable), "{e:?}");
    assert!(began.elapsed() < Duration::from_secs(5));
}

#[actix_rt::test]
async fn an_upgrade_refused_with_another_status_is_upgrade_refused() {
    let sim = sim_with_box();
    sim.faults().refuse_next_upgrades(1, 503);
    let e = client(&sim)
        .open_exec(session_start("s1", "true"))
        .await
        .err()
        .unwrap();
    assert!(e.is(ImpdCode::UpgradeRefused), "{e:?}");
    assert_eq!(e.status, Some(503));
}

#[actix_rt::test]
async fn the_token_file_is_reread_before_every_call() {
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, format!("  {}\n", sim.token())).unwrap();
    let c = ImpdClient::new(&sim.url(), TokenSource::File(path.clone()));
    assert!(c.imps_get("box").await.unwrap().is_some());
    std::fs::write(&path, "rotated-away\n").unwrap();
    assert!(c
        .imps_get("box")
        .await
        .unwrap_err()
        .is(ImpdCode::Unauthorized));
    let named = sim.faults().add_token(Scope::Manage, None);
    std::fs::write(&path, format!("{named}\n")).unwrap();
    assert!(c.imps_get("box").await.unwrap().is_some());
    // Sockets read it too.
    let socket = c.open_exec(session_start("s1", "exec sleep 60")).await;
    assert!(socket.is_ok());
    std::fs::remove_file(&path).unwrap();
    assert!(c
        .imps_get("box")
        .await
        .unwrap_err()
        .is(ImpdCode::Unauthorized));
}

#[actix_rt::test]
async fn call_passes_any_procedure_through_the_envelope() {
    let sim = sim_with_box();
    let c = client(&sim);
    let list = c.call("imps.list", serde_json::Value::Null).await.unwrap();
    assert_eq!(list[0]["name"], "box");
    let e = c
        .call("imps.get", json!({"name": "nobody"}))
        .await
        .unwrap_err();
    assert!(e.is(ImpdCode::NotFound));
    assert_eq!(e.status, Some(404));
    assert_eq!(e.data["kind"], "imp");
    let e = c
        .call("nothing.here", serde_json::Value::Null)
        .await
        .unwrap_err();
    assert!(e.is(ImpdCode::UnknownProcedure), "{e:?}");
}

// ---------------------------------------------------------------------------------------
// Imps and leases.

#[actix_rt::test]
async fn imps_get_create_sleep_wake_and_destroy() {
    let sim = ImpdSim::start(SimOptions::default());
    let c = client(&sim);
    assert_eq!(c.imps_get("atc-one").await.unwrap(), None);
    let created = c
        .imps_create(CreateImp {
            name: "atc-one".into(),
            image: None,
            memory_mib: Some(2048),
        })
        .await
        .unwrap();
    assert_eq!(created.state, "running");
    assert_eq!(created.memory_mib, Some(2048));
    let got = c.imps_get("atc-one").await.unwrap().unwrap();
    assert_eq!(got.id, created.id);
    let e = c
        .imps_create(CreateImp {
            name: "atc-one".into(),
            ..CreateImp::default()
        })
        .await
        .unwrap_err();
    assert!(e.is(ImpdCode::Conflict), "{e:?}");
    assert_eq!(e.status, Some(409));
    let slept = c.imps_sleep("atc-one", false).await.unwrap();
    assert_eq!(slept.state, "sleeping");
    assert_eq!(sim.imp("atc-one").unwrap().state, ImpState::Sleeping);
    let woken = c.imps_wake("atc-one").await.unwrap();
    assert_eq!(woken.state, "running");
    c.imps_destroy("atc-one").await.unwrap();
    assert_eq!(c.imps_get("atc-one").await.unwrap(), None);
    assert!(c
        .imps_destroy("atc-one")
        .await
        .unwrap_err()
        .is(ImpdCode::NotFound));
}

#[actix_rt::test]
async fn the_ram_budget_refusal_carries_its_data() {
    let sim = ImpdSim::start(SimOptions::default());
    sim.faults().refuse_ram_next(1);
    let e = client(&sim)
        .imps_create(CreateImp {
            name: "atc-big".into(),
            ..CreateImp::default()
        })
        .await
        .unwrap_err();
    assert!(e.is(ImpdCode::RamBudgetExceeded), "{e:?}");
    assert_eq!(e.status, Some(503));
    assert!(e.data.get("budgetMib").is_some(), "{}", e.data);
}

#[actix_rt::test]
async fn leases_acquire_renew_release_and_block_a_sleep() {
    let sim = sim_with_box();
    let c = client(&sim);
    let lease = c.leases_acquire("box", "atc-d1", 600).await.unwrap();
    assert_eq!(lease.name, "box");
    assert_eq!(lease.owner["label"], "atc-d1");
    assert!(lease.until.is_some());
    let renewed = c.leases_renew("box", "atc-d1", 900).await.unwrap();
    assert!(renewed.until.is_some());
    let imp = c.imps_get("box").await.unwrap().unwrap();
    assert_eq!(imp.leases.unwrap()["leases"][0]["owner"]["label"], "atc-d1");
    let e = c.imps_sleep("box", false).await.unwrap_err();
    assert!(e.is(ImpdCode::Leased), "{e:?}");
    assert_eq!(e.data["leases"][0]["owner"]["label"], "atc-d1");
    assert!(c.leases_release("box", "atc-d1").await.unwrap());
    assert!(!c.leases_release("box", "atc-d1").await.unwrap());
    let e = c.leases_renew("box", "atc-d1", 600).await.unwrap_err();
    assert!(e.is(ImpdCode::LeaseNotHeld), "{e:?}");
    let e = c.leases_acquire("box", "hold", 600).await.unwrap_err();
    assert!(e.is(ImpdCode::BadRequest), "{e:?}");
    assert!(c
        .leases_release("nobody", "atc-d1")
        .await
        .unwrap_err()
        .is(ImpdCode::NotFound));
}

#[actix_rt::test]
async fn a_forced_sleep_ends_our_lease() {
    let sim = sim_with_box();
    let c = client(&sim);
    c.leases_acquire("box", "atc-d1", 600).await.unwrap();
    let slept = c.imps_sleep("box", true).await.unwrap();
    assert_eq!(slept.state, "sleeping");
    let e = c.leases_renew("box", "atc-d1", 600).await.unwrap_err();
    assert!(e.is(ImpdCode::LeaseNotHeld), "{e:?}");
}

// ---------------------------------------------------------------------------------------
// /exec sessions.

#[actix_rt::test]
async fn a_session_starts_takes_input_and_exits() {
    let sim = sim_with_box();
    let socket = client(&sim)
        .open_exec(session_start(
            "s1",
            "printf hello; read x; echo \"got $x\"; exit 7",
        ))
        .await
        .unwrap();
    let (writer, mut events) = (socket.writer, socket.events);
    let ExecEvent::Started(started) = next_event(&mut events).await else {
        panic!("no started")
    };
    assert!(started.pid > 0);
    assert_eq!(started.session.as_deref(), Some("s1"));
    assert_eq!(started.created, Some(true));
    let output = started.output.expect("an impd with offsets sends output");
    assert!(output.has_offsets());
    assert_eq!((output.offset, output.prelude), (0, 0));
    assert_eq!(output.cold_boots[0].cause, "start");
    assert_eq!(
        Some(output.boot_id.as_str()),
        sim.imp("box").unwrap().boot_id.as_deref()
    );
    data_until(&mut events, "hello").await;
    writer.resize(100, 30).unwrap();
    writer.input(Bytes::from_static(b"world\r")).unwrap();
    let seen = data_until(&mut events, "got world").await;
    assert!(!seen.is_empty());
    match next_non_data(&mut events).await {
        ExecEvent::Exit {
            code,
            signal,
            offset,
        } => {
            assert_eq!((code, signal), (Some(7), None));
            assert!(offset.unwrap() > 0);
        }
        other => panic!("expected exit, got {other:?}"),
    }
    closed_with(&mut events, 1000).await;
    assert!(writer.input(Bytes::from_static(b"late")).is_err());
}

#[actix_rt::test]
async fn an_attach_resumes_from_an_offset_and_sighup_ends_the_process() {
    let sim = sim_with_box();
    let c = client(&sim);
    let first = c
        .open_exec(session_start("s1", "printf abcdef; exec sleep 60"))
        .await
        .unwrap();
    let mut events = first.events;
    let ExecEvent::Started(started) = next_event(&mut events).await else {
        panic!("no started")
    };
    let generation = started.output.unwrap().execution_generation;
    data_until(&mut events, "abcdef").await;
    // Closing a session socket detaches: the process runs on.
    first.writer.close().unwrap();
    // impd echoes our close (1000); the simulator just ends the connection (no code).
    match next_non_data(&mut events).await {
        ExecEvent::Closed { code, .. } => assert!(matches!(code, Some(1000) | None), "{code:?}"),
        other => panic!("expected Closed, got {other:?}"),
    }
    sim.wait_until("the viewer is gone", |s| {
        s.session("box", "s1").is_some_and(|v| !v.attached)
    })
    .await;
    assert!(sim.session("box", "s1").unwrap().exit.is_none());

    let second = c
        .open_exec(Opening::Attach(AttachMsg {
            name: "box".into(),
            session: "s1".into(),
            cols: 80,
            rows: 24,
            resume_from: Some(ResumeFrom {
                execution_generation: generation.clone(),
                offset: 3,
            }),
            wake: false,
            require: Vec::new(),
        }))
        .await
        .unwrap();
    let mut events = second.events;
    let ExecEvent::Started(started) = next_event(&mut events).await else {
        panic!("no started")
    };
    assert_eq!(started.created, Some(false));
    let output = started.output.unwrap();
    assert_eq!(output.resume, Some(Resume::Exact));
    assert_eq!(output.execution_generation, generation);
    assert_eq!(output.offset, 3);
    assert_eq!(output.end, 6);
    assert_eq!(data_until(&mut events, "def").await, b"def");
    second.writer.signal("SIGHUP").unwrap();
    match next_non_data(&mut events).await {
        ExecEvent::Exit {
            code,
            signal,
            offset,
        } => {
            assert_eq!(code, None);
            assert_eq!(signal.as_deref(), Some("SIGHUP"));
            assert_eq!(offset, Some(6));
        }
        other => panic!("expected exit, got {other:?}"),
    }
    closed_with(&mut events, 1000).await;
}

#[actix_rt::test]
async fn an_attach_to_nothing_is_no_session_then_close_1011() {
    let sim = sim_with_box();
    let socket = client(&sim)
        .open_exec(Opening::Attach(AttachMsg {
            name: "box".into(),
            session: "nobody".into(),
            cols: 80,
            rows: 24,
            wake: false,
            ..AttachMsg::default()
        }))
        .await
        .unwrap();
    let mut events = socket.events;
    match next_event(&mut events).await {
        ExecEvent::Error(e) => {
            assert!(e.is(ImpdCode::NoSession), "{e:?}");
            let ns = impd_client::NoSession::from_data(&e.data).expect("boot history");
            assert_eq!(
                Some(ns.boot_id.as_str()),
                sim.imp("box").unwrap().boot_id.as_deref()
            );
        }
        other => panic!("expected NO_SESSION, got {other:?}"),
    }
    closed_with(&mut events, 1011).await;
}

#[actix_rt::test]
async fn a_schema_violation_is_an_error_without_a_code() {
    let sim = sim_with_box();
    // A session needs a tty.
    let socket = client(&sim)
        .open_exec(Opening::Start(StartMsg {
            name: "box".into(),
            argv: vec!["true".into()],
            tty: false,
            cols: 80,
            rows: 24,
            session: Some("s1".into()),
            ..StartMsg::default()
        }))
        .await
        .unwrap();
    let mut events = socket.events;
    match next_event(&mut events).await {
        ExecEvent::Error(e) => assert_eq!(e.code, ImpdCode::Absent, "{e:?}"),
        other => panic!("expected an error, got {other:?}"),
    }
    closed_with(&mut events, 1011).await;
}

#[actix_rt::test]
async fn a_bare_close_after_started_is_closed_with_its_code() {
    let sim = sim_with_box();
    sim.faults()
        .drop_next_connections(1, When::AfterStarted, 1011);
    let socket = client(&sim)
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    assert!(matches!(
        next_event(&mut events).await,
        ExecEvent::Started(_)
    ));
    closed_with(&mut events, 1011).await;
    assert!(socket.writer.is_closed());
}

#[actix_rt::test]
async fn an_unparseable_message_is_one_bad_message_error_and_the_socket_closes() {
    let sim = sim_with_box();
    sim.faults().garble_next_exec(1);
    let socket = client(&sim)
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    match next_event(&mut events).await {
        ExecEvent::Error(e) => assert!(e.is(ImpdCode::BadMessage), "{e:?}"),
        other => panic!("expected BAD_MESSAGE, got {other:?}"),
    }
    // The real answer may still arrive before the close; no second terminal event does.
    loop {
        match next_event(&mut events).await {
            ExecEvent::Started(_) | ExecEvent::Data { .. } => {}
            ExecEvent::Closed { .. } => break,
            other => panic!("after BAD_MESSAGE: {other:?}"),
        }
    }
}

#[actix_rt::test]
async fn a_revoked_token_closes_the_socket_with_1008() {
    let sim = sim_with_box();
    let token = sim.faults().add_token(Scope::Manage, None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, &token).unwrap();
    let c = ImpdClient::new(&sim.url(), TokenSource::File(path));
    let socket = c
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    assert!(matches!(
        next_event(&mut events).await,
        ExecEvent::Started(_)
    ));
    assert!(sim.faults().revoke_token(&token));
    closed_with(&mut events, 1008).await;
}

// ---------------------------------------------------------------------------------------
// Plain runs.

#[actix_rt::test]
async fn a_run_feeds_stdin_in_chunks_and_reports_output_and_exit_code() {
    let sim = sim_with_box();
    // Over 2 MiB, so it cannot go as one message (the simulator's limit).
    let stdin: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    let result = client(&sim)
        .run(RunSpec {
            name: "box".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                "cat; echo \"err $GREETING\" >&2; exit 3".into(),
            ],
            cwd: Some("/".into()),
            env: [("GREETING".to_string(), "hi".to_string())].into(),
            stdin: Bytes::from(stdin.clone()),
        })
        .await
        .unwrap();
    assert_eq!(result.code, Some(3));
    assert_eq!(result.signal, None);
    assert!(!result.success());
    assert_eq!(result.stderr, Bytes::from_static(b"err hi\n"));
    assert_eq!(result.stdout.len(), stdin.len());
    assert!(result.stdout == stdin, "stdout differs from stdin");
}

#[actix_rt::test]
async fn a_run_that_exits_before_reading_stdin_still_reports_its_exit() {
    let sim = sim_with_box();
    let result = client(&sim)
        .run(RunSpec {
            name: "box".into(),
            argv: vec!["sh".into(), "-c".into(), "echo early".into()],
            stdin: Bytes::from(vec![b'x'; 4 * 1024 * 1024]),
            ..RunSpec::default()
        })
        .await
        .unwrap();
    assert!(result.success());
    assert_eq!(result.stdout, Bytes::from_static(b"early\n"));
}

#[actix_rt::test]
async fn a_run_on_a_missing_imp_is_not_found() {
    let sim = sim_with_box();
    let e = client(&sim)
        .run(RunSpec {
            name: "nobody".into(),
            argv: vec!["true".into()],
            ..RunSpec::default()
        })
        .await
        .unwrap_err();
    assert!(e.is(ImpdCode::NotFound), "{e:?}");
}

#[actix_rt::test]
async fn unpack_tar_unpacks_a_real_archive_into_a_new_directory() {
    let sim = sim_with_box();
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("sub")).unwrap();
    std::fs::write(src.path().join("a.txt"), "alpha").unwrap();
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(src.path().join("sub/big.bin"), &big).unwrap();
    let archive = std::process::Command::new("tar")
        .args(["-c", "-f", "-", "-C"])
        .arg(src.path())
        .arg(".")
        .output()
        .unwrap()
        .stdout;
    let dest = tempfile::tempdir().unwrap();
    let target = dest.path().join("deep/unpacked");
    let result = client(&sim)
        .unpack_tar("box", target.to_str().unwrap(), Bytes::from(archive))
        .await
        .unwrap();
    assert!(
        result.success(),
        "{:?}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(target.join("a.txt")).unwrap(),
        "alpha"
    );
    assert!(std::fs::read(target.join("sub/big.bin")).unwrap() == big);
}

// ---------------------------------------------------------------------------------------
// Reverse forwards.

#[actix_rt::test]
async fn a_reverse_forward_relays_both_ways_with_flow_control_and_eofs() {
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("run")).unwrap();
    let path = dir.path().join("run/s9.sock");
    let path_str = path.to_str().unwrap();
    let mut forward = client(&sim).listen_unix("box", path_str).await.unwrap();
    assert_eq!(forward.path(), path_str);
    assert!(!forward.listener().is_empty());

    let mut guest = tokio::net::UnixStream::connect(&path).await.unwrap();
    let id = tokio::time::timeout(WITHIN, forward.next())
        .await
        .expect("a connection within the deadline")
        .expect("the forward is open")
        .expect("a connection id");
    let mut relay = forward.accept(id).await.unwrap();

    guest.write_all(b"ping\n").await.unwrap();
    let mut got = Vec::new();
    while got.len() < 5 {
        let bytes = tokio::time::timeout(WITHIN, relay.read())
            .await
            .unwrap()
            .unwrap();
        got.extend_from_slice(&bytes);
    }
    assert_eq!(got, b"ping\n");

    relay.write(Bytes::from_static(b"pong\n")).await.unwrap();
    let mut pong = [0u8; 5];
    guest.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"pong\n");

    // More than the 1 MiB window: the write has to wait for the guest to read.
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 247) as u8).collect();
    let mut received = vec![0u8; big.len()];
    let (sent, read) = tokio::time::timeout(WITHIN, async {
        tokio::join!(
            relay.write(Bytes::from(big.clone())),
            guest.read_exact(&mut received)
        )
    })
    .await
    .expect("the big write finishes");
    sent.unwrap();
    read.unwrap();
    assert!(received == big, "the guest got other bytes");

    // The guest half-closes: our read ends cleanly; our eof ends the guest's read.
    guest.shutdown().await.unwrap();
    let end = tokio::time::timeout(WITHIN, relay.read()).await.unwrap();
    assert_eq!(end, None);
    assert!(relay.end_error().is_none(), "{:?}", relay.end_error());
    relay.eof().unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(WITHIN, guest.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_empty());
}

#[actix_rt::test]
async fn a_lost_listener_ends_the_forward_with_lost() {
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fwd.sock");
    let mut forward = client(&sim)
        .listen_unix("box", path.to_str().unwrap())
        .await
        .unwrap();
    assert!(sim.faults().lose_listeners("box"));
    let end = tokio::time::timeout(WITHIN, forward.next())
        .await
        .unwrap()
        .expect("an error item");
    let e = end.unwrap_err();
    assert!(e.is(ImpdCode::Lost), "{e:?}");
    assert_eq!(e.data["closeCode"], 4000);
    assert!(tokio::time::timeout(WITHIN, forward.next())
        .await
        .unwrap()
        .is_none());
}

#[actix_rt::test]
async fn a_listen_refusal_is_the_error_of_listen_unix() {
    let sim = sim_with_box();
    let dir = tempfile::tempdir().unwrap();
    // The directory does not exist.
    let path = dir.path().join("missing/fwd.sock");
    let e = client(&sim)
        .listen_unix("box", path.to_str().unwrap())
        .await
        .err()
        .unwrap();
    assert!(e.is(ImpdCode::ListenFailed), "{e:?}");
    let e = client(&sim)
        .listen_unix("nobody", path.to_str().unwrap())
        .await
        .err()
        .unwrap();
    assert!(e.is(ImpdCode::NotFound), "{e:?}");
}

#[actix_rt::test]
async fn an_agent_without_offsets_reports_continuity_none() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        agent_offsets: false,
        ..SimOptions::default()
    });
    let socket = client(&sim)
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    let ExecEvent::Started(started) = next_event(&mut events).await else {
        panic!("no started")
    };
    let output = started.output.expect("impd itself has offsets");
    assert_eq!(output.continuity, "none");
    assert!(!output.has_offsets());
}

#[actix_rt::test]
async fn an_impd_before_offsets_sends_no_output() {
    let sim = ImpdSim::start(SimOptions {
        imps: vec!["box".into()],
        features: None,
        ..SimOptions::default()
    });
    let socket = client(&sim)
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    let ExecEvent::Started(started) = next_event(&mut events).await else {
        panic!("no started")
    };
    assert_eq!(started.output, None);
}

#[actix_rt::test]
async fn an_impd_restart_closes_exec_sockets_with_1012_and_ends_forwards() {
    let sim = sim_with_box();
    let c = client(&sim);
    let socket = c
        .open_exec(session_start("s1", "exec sleep 60"))
        .await
        .unwrap();
    let mut events = socket.events;
    assert!(matches!(
        next_event(&mut events).await,
        ExecEvent::Started(_)
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fwd.sock");
    let mut forward = c.listen_unix("box", path.to_str().unwrap()).await.unwrap();
    sim.faults().restart(Duration::from_millis(300));
    closed_with(&mut events, 1012).await;
    let e = tokio::time::timeout(WITHIN, forward.next())
        .await
        .unwrap()
        .expect("an error item")
        .unwrap_err();
    assert!(e.is(ImpdCode::Closed), "{e:?}");
    assert_eq!(e.data["closeCode"], 1012);
}
