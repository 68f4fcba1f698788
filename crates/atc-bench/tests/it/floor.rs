//! The floor as the bench uses it: a `--floor-only` run of echo, throughput and fan-out that
//! must deliver every payload byte to every client and echo every byte, and the floor on its own
//! under two attach clients, whose output must arrive byte for byte. Real PTYs, real shells,
//! real WebSockets on loopback; no timing is asserted.

use std::time::Duration;

use atc_bench::floor::Floor;
use atc_client::frame_reader::{AttachReader, Incoming};
use atc_protocol::{AttachFrame, TermSize};
use awc::ws::Message;
use bytes::Bytes;

/// Every wait in these tests; generous, since the machine may be busy.
const LIMIT: Duration = Duration::from_secs(60);

use crate::common;

#[actix_rt::test]
async fn a_floor_only_run_delivers_every_byte_and_echoes_every_trip() {
    let args = common::args(&[
        "--floor-only",
        "--phases",
        "echo,throughput,fanout",
        "--payload-mib",
        "2",
        "--echo-count",
        "50",
        "--fanout-clients",
        "3",
        "--phase-timeout-secs",
        "60",
        // Not the user's $SHELL: an interactive bash reads ~/.bashrc, which on some machines
        // takes seconds (pyenv hooks) and would make the test about that machine.
        "--floor-shell",
        "/bin/sh",
    ]);
    assert!(!args.needs_daemon());
    let (report, json) = common::run(args, String::new(), String::new()).await;

    // Nothing ran against a daemon.
    assert!(json.get("echo").is_none() && json.get("spawn").is_none());
    for s in json["shapes"].as_array().expect("shapes") {
        for phase in ["throughput", "fanout", "slowClient"] {
            assert!(s.get(phase).is_none(), "{phase} ran: {s:#}");
        }
    }
    let payload = 2u64 << 20;

    // Every shape (the default is all of them), each delivered whole: its command prints
    // exactly the payload's size, whatever the bytes.
    let shapes = json["shapes"].as_array().expect("shapes");
    assert_eq!(shapes.len(), 10, "{json:#}");
    for s in shapes {
        let name = &s["shape"];
        let t = &s["floorThroughput"];
        assert_eq!(t["outcome"], "ok", "{name}: {t:#}");
        assert_eq!(t["figures"]["client"]["receivedBytes"], payload, "{name}");
        assert_eq!(t["figures"]["client"]["lostBytes"], 0, "{name}");
        assert!(t["figures"]["serverCpuMs"].is_number(), "{name}: {t:#}");

        let f = &s["floorFanout"];
        assert_eq!(f["outcome"], "ok", "{name}: {f:#}");
        let clients = f["figures"]["clients"].as_array().expect("clients");
        assert_eq!(clients.len(), 3);
        for c in clients {
            assert_eq!(c["receivedBytes"], payload, "{name}: {c:#}");
            assert_eq!(c["lostBytes"], 0, "{name}: {c:#}");
        }
    }

    let e = &json["floorEcho"];
    assert_eq!(e["outcome"], "ok", "{e:#}");
    assert_eq!(e["figures"]["latency"]["count"], 50);
    assert_eq!(e["figures"]["strayBytes"], 0);

    assert_eq!(json["settings"]["floor"], "only");
    assert!(json["vsFloor"].is_object(), "{json:#}");
    let table = report.to_table();
    assert!(table.contains("floor"), "{table}");
}

/// The live output of one attach socket, until `want` bytes past `marker` have arrived.
async fn read_after(socket: &mut AttachReader, marker: &[u8], want: usize) -> Vec<u8> {
    let mut stream = Vec::new();
    let mut attached = false;
    loop {
        let found = stream
            .windows(marker.len())
            .position(|w| w == marker)
            .map(|at| at + marker.len());
        if let Some(start) = found.filter(|s| stream.len() >= s + want) {
            return stream[start..start + want].to_vec();
        }
        let frame = tokio::time::timeout(LIMIT, socket.next())
            .await
            .expect("output in time")
            .expect("an attach frame");
        match frame {
            Incoming::Text(frame) => {
                assert!(
                    matches!(frame, AttachFrame::Attached { prelude: 0, .. }),
                    "{frame:?}"
                );
                attached = true;
            }
            Incoming::Binary(bytes) => {
                assert!(attached, "output before the attached frame");
                stream.extend_from_slice(&bytes);
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

#[actix_rt::test]
async fn two_clients_on_one_floor_pty_get_the_output_byte_for_byte() {
    let floor = Floor::start().expect("the floor starts");
    let id = floor
        .spawn_shell(
            "/bin/sh",
            "/tmp",
            TermSize {
                cols: 120,
                rows: 40,
            },
        )
        .expect("a shell spawns");
    let url = format!("{}/v1/sessions/{id}/attach?cols=120&rows=40", floor.url());
    let client = awc::Client::new();
    let mut sockets = Vec::new();
    for _ in 0..2 {
        let (_, socket) = tokio::time::timeout(LIMIT, client.ws(url.as_str()).connect())
            .await
            .expect("upgrade in time")
            .expect("the floor upgrades");
        sockets.push(AttachReader::new(socket));
    }
    // Output post-processing off, so `seq`'s newlines arrive as they were written; the marker
    // is printed from octal escapes, so the shell's echo of this line cannot contain it.
    let line = "stty -opost -echo; printf '\\001GO\\002'; seq 1 30000; stty opost echo\n";
    sockets[0]
        .send(Message::Binary(Bytes::from(line)))
        .await
        .expect("input is sent");
    let expected: Vec<u8> = (1..=30000)
        .flat_map(|n| format!("{n}\n").into_bytes())
        .collect();
    for socket in &mut sockets {
        let got = read_after(socket, b"\x01GO\x02", expected.len()).await;
        assert!(got == expected, "output differs from seq's");
    }

    // A socket attached later starts at the session's current offset, not at zero.
    let (_, late) = tokio::time::timeout(LIMIT, client.ws(url.as_str()).connect())
        .await
        .expect("upgrade in time")
        .expect("the floor upgrades");
    let mut late = AttachReader::new(late);
    let first = tokio::time::timeout(LIMIT, late.next())
        .await
        .expect("attached in time")
        .expect("an attach frame");
    let Incoming::Text(AttachFrame::Attached { offset, .. }) = first else {
        panic!("{first:?} before attached")
    };
    assert!(offset >= expected.len() as u64, "offset {offset}");

    floor.end_sessions(&[id]);
    // Ending the session closes every socket.
    for socket in sockets.iter_mut().chain([&mut late]) {
        loop {
            match tokio::time::timeout(LIMIT, socket.next())
                .await
                .expect("close in time")
            {
                Ok(Incoming::Closed(_) | Incoming::Ended) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}
