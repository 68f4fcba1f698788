//! The probe of issue 31 against the HTTP front, step by step: a keep-alive connection whose
//! next head trickles in, a body nobody reads that trickles on, an idle connection, tokenless
//! connections that pile up from one address (and the owner who must still get in while they
//! do, with the descriptor table nearly full), a JSON key given twice, and `nosniff` on every
//! kind of answer.

use std::cell::Cell;
use std::os::unix::process::CommandExt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use atc_testkit::child_daemon::ChildDaemon;
use atc_testkit::raw_answer::{content_length, RawAnswer};
use atc_testkit::{id_of, poll, test_config, TestDaemon, WITHIN};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a connection that should stay open is watched for a close that must not come.
const QUIET: Duration = Duration::from_millis(300);

/// What reading a raw connection came to.
#[derive(Debug)]
enum Read {
    Answer(RawAnswer),
    /// The daemon closed the connection; these bytes came before (no whole answer).
    Closed(Vec<u8>),
    /// Nothing whole yet.
    Nothing,
}

/// One raw TCP connection to the daemon, read answer by answer.
struct Conn {
    stream: TcpStream,
    got: Vec<u8>,
}

impl Conn {
    async fn open(url: &str) -> Conn {
        let addr = url.trim_start_matches("http://");
        Conn {
            stream: TcpStream::connect(addr).await.expect("connect"),
            got: Vec::new(),
        }
    }

    /// Writes `bytes`; false once the daemon has closed the connection.
    async fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok() && self.stream.flush().await.is_ok()
    }

    /// Reads until one whole answer (head and the body its content-length announces) is in,
    /// the connection closes, or `within` passes. Bytes past the answer are kept.
    async fn read(&mut self, within: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(answer) = self.take_answer() {
                return Read::Answer(answer);
            }
            let mut buf = [0u8; 4096];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) => return Read::Nothing,
                Ok(Ok(0)) | Ok(Err(_)) => return Read::Closed(std::mem::take(&mut self.got)),
                Ok(Ok(n)) => self.got.extend_from_slice(&buf[..n]),
            }
        }
    }

    async fn answer(&mut self, within: Duration) -> RawAnswer {
        match self.read(within).await {
            Read::Answer(a) => a,
            other => panic!("no answer within {within:?}: {other:?}"),
        }
    }

    fn take_answer(&mut self) -> Option<RawAnswer> {
        let end = self.got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&self.got[..end]).to_string();
        let len = content_length(&head);
        if self.got.len() < end + len {
            return None;
        }
        let body: Vec<u8> = self.got.drain(..end + len).skip(end).collect();
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some(RawAnswer {
            status,
            head,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        })
    }

    /// Whether the daemon closes the connection within `within`, with no answer first.
    async fn closed_unanswered_within(&mut self, within: Duration) -> bool {
        match self.read(within).await {
            Read::Closed(bytes) => bytes.is_empty(),
            Read::Answer(a) => panic!("an answer instead of a close: {a:?}"),
            Read::Nothing => false,
        }
    }
}

fn get(path: &str, token: Option<&str>) -> Vec<u8> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").into_bytes()
}

#[track_caller]
fn assert_head_too_slow(a: &RawAnswer, within_ms: u64) {
    assert_eq!(a.status, 408, "{a:?}");
    assert_eq!(a.body["error"]["code"], "bad_args", "{a:?}");
    assert_eq!(a.body["error"]["data"]["field"], "head", "{a:?}");
    assert_eq!(a.body["error"]["data"]["withinMs"], within_ms, "{a:?}");
    assert!(a.header("x-request-id").is_some(), "{a:?}");
    assert_eq!(
        a.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
}

async fn daemon_with(
    edit: impl FnOnce(&mut atc::config::Config),
) -> (TestDaemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config();
    edit(&mut config);
    (TestDaemon::start_on(dir.path(), config).await, dir)
}

#[actix_rt::test]
async fn a_second_head_trickled_a_byte_at_a_time_gets_408_at_its_deadline() {
    let deadline = Duration::from_millis(600);
    let (d, _dir) = daemon_with(|c| c.timings.head_read = deadline).await;
    let mut conn = Conn::open(&d.url).await;
    conn.send(&get("/v1/health", None)).await;
    assert_eq!(conn.answer(WITHIN).await.status, 200);

    // The next head, one byte every 100 ms, never complete.
    let head = format!(
        "GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: {}",
        "a".repeat(1000)
    );
    let started = Instant::now();
    let mut bytes = head.bytes();
    let answer = loop {
        let byte = bytes.next().expect("the head outlasts the test");
        conn.send(&[byte]).await;
        match conn.read(Duration::from_millis(100)).await {
            Read::Answer(a) => break a,
            Read::Closed(got) => panic!("closed without an answer: {got:?}"),
            Read::Nothing => assert!(started.elapsed() < WITHIN, "no 408 within {WITHIN:?}"),
        }
    };
    let took = started.elapsed();
    assert_head_too_slow(&answer, 600);
    assert!(
        took >= deadline,
        "refused after {took:?}, before the deadline"
    );
    assert!(
        took < deadline + Duration::from_secs(2),
        "refused only after {took:?}"
    );
    assert!(conn.closed_unanswered_within(WITHIN).await);

    // The first head's deadline runs from the accept: a connection that sends nothing is
    // answered 408 too.
    let mut silent = Conn::open(&d.url).await;
    let started = Instant::now();
    assert_head_too_slow(&silent.answer(WITHIN).await, 600);
    assert!(started.elapsed() >= deadline - Duration::from_millis(50));
    d.stop().await;
}

#[actix_rt::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive() {
    let (d, _dir) = daemon_with(|c| c.timings.head_read = Duration::from_millis(300)).await;
    let mut conn = Conn::open(&d.url).await;
    conn.send(&get("/v1/health", None)).await;
    assert_eq!(conn.answer(WITHIN).await.status, 200);
    let idle_since = Instant::now();
    // Idle is not a head: the short head deadline does not close it.
    let keep_alive = atc_protocol::HTTP_KEEP_ALIVE;
    assert!(
        !conn
            .closed_unanswered_within(keep_alive - Duration::from_secs(1))
            .await
    );
    assert!(conn.closed_unanswered_within(WITHIN).await);
    let idle = idle_since.elapsed();
    assert!(
        idle < keep_alive + Duration::from_secs(2),
        "closed after {idle:?} idle"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_chunked_body_no_route_reads_is_cut_at_twice_the_body_bound() {
    let body_read = Duration::from_millis(300);
    let (d, _dir) = daemon_with(|c| c.timings.body_read = body_read).await;
    let mut conn = Conn::open(&d.url).await;
    conn.send(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await;
    assert_eq!(conn.answer(WITHIN).await.status, 200);
    // The health route never reads the body; actix-http drains it for as long as it comes.
    let started = Instant::now();
    loop {
        if !conn.send(b"1\r\na\r\n").await {
            break;
        }
        match conn.read(Duration::from_millis(100)).await {
            Read::Closed(got) => {
                assert!(got.is_empty(), "{got:?}");
                break;
            }
            Read::Answer(a) => panic!("{a:?}"),
            Read::Nothing => assert!(started.elapsed() < WITHIN, "still open"),
        }
    }
    let took = started.elapsed();
    assert!(
        took < body_read * 2 + Duration::from_secs(2),
        "cut after {took:?}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_full_peer_loses_its_oldest_tokenless_connection_and_the_owner_none() {
    let (d, _dir) = daemon_with(|c| {
        c.limits.tokenless_connections = 4;
        c.timings.head_read = Duration::from_secs(30);
    })
    .await;
    let token = d.token.clone();
    let mut owner = Conn::open(&d.url).await;
    owner.send(&get("/v1/sessions", Some(&token))).await;
    assert_eq!(owner.answer(WITHIN).await.status, 200);

    // Four connections, busy with a head that never ends, fill 127.0.0.1's room.
    let partial = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: a";
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut c = Conn::open(&d.url).await;
        c.send(partial).await;
        busy.push(c);
    }
    // Let the daemon read all four before the fifth comes.
    for c in &mut busy {
        assert!(!c.closed_unanswered_within(QUIET / 3).await);
    }
    let mut fifth = Conn::open(&d.url).await;
    fifth.send(partial).await;
    assert!(
        busy[0].closed_unanswered_within(WITHIN).await,
        "the oldest tokenless connection is closed to make room"
    );
    for c in busy.iter_mut().skip(1).chain([&mut fifth]) {
        assert!(
            !c.closed_unanswered_within(QUIET).await,
            "only the oldest goes"
        );
    }

    // Many more tokenless connections: the owner's, which showed the token, is never closed.
    let mut more = Vec::new();
    for _ in 0..20 {
        let mut c = Conn::open(&d.url).await;
        c.send(partial).await;
        more.push(c);
    }
    owner.send(&get("/v1/sessions", Some(&token))).await;
    assert_eq!(owner.answer(WITHIN).await.status, 200);
    drop((busy, more));
    d.stop().await;
}

/// Connections opened as fast as the daemon takes them, each sending a head it never ends,
/// until `stop` is set; `opened` counts them.
async fn flood(url: String, stop: Rc<Cell<bool>>, opened: Rc<Cell<usize>>) {
    let mut open = Vec::new();
    while !stop.get() {
        for _ in 0..25 {
            let Ok(mut c) = TcpStream::connect(url.trim_start_matches("http://")).await else {
                continue;
            };
            // A closed one fails its write; that is the daemon making room.
            let _ = c
                .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: a")
                .await;
            open.push(c);
            opened.set(open.len());
        }
        // The flood's pace (and a yield to the owner's requests), not a wait for a state.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[actix_rt::test]
async fn the_owner_is_served_while_hundreds_of_tokenless_connections_hold_a_nearly_full_table() {
    const NOFILE: u64 = 192;
    let root = tempfile::tempdir().unwrap();
    let state_dir = root.path().join("state");
    let log = root.path().join("daemon.log");
    let config = json!({"agents": {"sleeper": {"bin": "/bin/sleep", "args": ["600"]}}});
    let mut cmd = ChildDaemon::command(&state_dir, &config, &log);
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(NOFILE),
                maximum: Some(NOFILE),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    let daemon = ChildDaemon::spawn(cmd, &state_dir, &log).await;
    let owner = daemon.api();
    // Sessions hold descriptors too, two each: 32 of them take two thirds of their half.
    let mut sessions = Vec::new();
    for _ in 0..32 {
        let (status, body) = owner
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": "sleeper", "cwd": "/tmp"})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        sessions.push(id_of(&body["session"]));
    }
    let before = fd_count(daemon.pid());

    let (stop, opened) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(0)));
    let flooding = actix_rt::spawn(flood(owner.url.clone(), stop.clone(), opened.clone()));
    // Until hundreds are in (more than the whole table holds) and the tokenless room is full.
    // What follows holds whether or not it got there, so the wait ends either way.
    let mut most = 0;
    let _full = poll(WITHIN, async || {
        most = most.max(fd_count(daemon.pid()));
        (opened.get() >= 2 * NOFILE as usize && most >= before + (NOFILE / 4) as usize - 4)
            .then_some(())
    })
    .await;
    // The owner, meanwhile, on fresh connections (a pooled one would prove less): reads, kills
    // every session, and forgets one.
    let owner_acts = async {
        let mut served = Vec::new();
        for id in &sessions {
            let owner = TestDaemon::connect(&owner.url, &owner.token, &state_dir);
            let (status, body) = owner
                .call("POST", &format!("/v1/sessions/{id}/kill"), None)
                .await;
            served.push((status, body));
            most = most.max(fd_count(daemon.pid()));
        }
        let listed = TestDaemon::connect(&owner.url, &owner.token, &state_dir)
            .call("GET", "/v1/sessions", None)
            .await;
        (served, listed)
    };
    let Ok((served, (status, list))) = tokio::time::timeout(WITHIN, owner_acts).await else {
        panic!(
            "the owner was not served within {WITHIN:?}; log:\n{}",
            daemon.log()
        );
    };
    stop.set(true);
    flooding.await.expect("the flood ran");
    let opened = opened.get();
    let log_text = daemon.log();
    for (status, body) in &served {
        assert_eq!(*status, 200, "{body}\nlog:\n{log_text}");
    }
    assert_eq!(status, 200, "{list}");
    assert!(
        opened >= 2 * NOFILE as usize,
        "only {opened} connections opened"
    );
    eprintln!(
        "{opened} tokenless connections opened; at most {most} of {NOFILE} descriptors open, \
         {before} before"
    );
    assert!(
        most < NOFILE as usize,
        "the table ran full ({most} of {NOFILE}):\n{log_text}"
    );
    assert!(
        most >= before + (NOFILE / 4) as usize - 8,
        "the tokenless room ({} of {NOFILE}) never filled: at most {most}, {before} before",
        NOFILE / 4
    );
    daemon.stop().await;
}

#[actix_rt::test]
async fn a_key_given_twice_is_refused_by_name_not_resolved() {
    let d = TestDaemon::start().await;
    let (status, body) = d
        .post_raw(
            "/v1/sessions",
            "application/json",
            br#"{"agent":"sh","cwd":"/tmp","agent":"cat"}"#.to_vec(),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_args", "{body}");
    assert_eq!(body["error"]["data"]["field"], "agent", "{body}");
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"], json!([]), "nothing was spawned: {list}");

    // The attach socket's control frames are parsed the same way.
    let id = id_of(&d.spawn("cat").await);
    let (mut ws, _, _) = d.attach(&id, "cols=80&rows=24").await;
    ws.send_text(r#"{"type":"resize","cols":100,"rows":30,"cols":50}"#)
        .await;
    let e = ws.next_text("error").await;
    assert_eq!(e["code"], "bad_args", "{e}");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("'cols'")),
        "{e}"
    );
    assert_eq!(d.session(&id).await["cols"], 80, "the size did not change");
    d.stop().await;
}

#[actix_rt::test]
async fn every_kind_of_answer_carries_nosniff() {
    let d = TestDaemon::start().await;
    let token = d.token.clone();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("a public route", get("/v1/health", None), 200),
        ("a route behind the token", get("/v1/sessions", Some(&token)), 200),
        ("an error", get("/v1/sessions/nope", Some(&token)), 404),
        ("no route", get("/v1/nothing-here", Some(&token)), 404),
        ("no token", get("/v1/sessions", None), 401),
        ("a wrong token", get("/v1/sessions", Some("wrong")), 401),
        (
            "a body over the cap, from its head",
            format!(
                "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 2000000\r\n\r\n"
            )
            .into_bytes(),
            413,
        ),
        (
            "a head the guard refuses",
            b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Probe: a\x01b\r\n\r\n".to_vec(),
            400,
        ),
    ];
    for (what, request, status) in cases {
        let mut conn = Conn::open(&d.url).await;
        conn.send(&request).await;
        let a = conn.answer(WITHIN).await;
        assert_eq!(a.status, status, "{what}: {a:?}");
        assert_eq!(
            a.header("x-content-type-options").as_deref(),
            Some("nosniff"),
            "{what}: {a:?}"
        );
    }
    d.stop().await;
}
