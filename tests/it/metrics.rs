//! `GET /metrics`: scraped before and after real work (spawns, keyed spawns, input and
//! output, attach and detach, a permission request, reporter lines, a slow client, a remote
//! reconnect), checking that exactly the right figures moved; the token on the main
//! listener; the metrics-only listener; and that every scrape is well-formed exposition text.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::time::Duration;

use atc::daemon::{Daemon, DaemonOptions, MetricsListen, StartError};
use atc_testkit::impd_sim::{ImpdSim, SimOptions, When};
use atc_testkit::{
    agent_shells_daemon, hook, id_of, poll_ok, spawn_remote, test_config, with_imp_target,
    TestDaemon, WITHIN,
};
use serde_json::{json, Value};

/// One scrape: its status, `Content-Type` and body.
struct Scrape {
    status: u16,
    content_type: String,
    text: String,
}

async fn get(url: &str, token: Option<&str>) -> Scrape {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish();
    let mut req = client.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let mut resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp.body().limit(16 * 1024 * 1024).await.expect("body");
    Scrape {
        status: resp.status().as_u16(),
        content_type,
        text: String::from_utf8(body.to_vec()).expect("utf-8"),
    }
}

/// Scrapes the main listener with the token, checks the text is well-formed, and answers
/// its samples.
async fn scrape(d: &TestDaemon) -> Samples {
    let s = get(&format!("{}/metrics", d.url), Some(&d.token)).await;
    assert_eq!(s.status, 200, "{}", s.text);
    Samples::parse(&s.text)
}

/// The samples of one scrape, by `name{labels}` as written.
#[derive(Debug, Clone)]
struct Samples {
    values: BTreeMap<String, f64>,
    text: String,
}

/// The suffixes a sample may add to its family's name, by family type (OpenMetrics).
fn family_of<'a>(sample: &'a str, types: &BTreeMap<String, String>) -> &'a str {
    for (suffix, kinds) in [
        ("_total", &["counter"][..]),
        ("_created", &["counter", "histogram"][..]),
        ("_bucket", &["histogram"][..]),
        ("_count", &["histogram"][..]),
        ("_sum", &["histogram"][..]),
    ] {
        if let Some(base) = sample.strip_suffix(suffix) {
            if types.get(base).is_some_and(|t| kinds.contains(&t.as_str())) {
                return base;
            }
        }
    }
    sample
}

impl Samples {
    /// Parses exposition text, asserting what Prometheus needs of it: every sample's family
    /// has HELP and TYPE lines before its first sample, every value is a number, names are
    /// ours, no family is described twice, and the text ends with `# EOF`.
    fn parse(text: &str) -> Samples {
        let mut help = BTreeSet::new();
        let mut types = BTreeMap::new();
        let mut values = BTreeMap::new();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.last(),
            Some(&"# EOF"),
            "no `# EOF` at the end:\n{text}"
        );
        for line in &lines[..lines.len() - 1] {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, what) = rest.split_once(' ').unwrap_or((rest, ""));
                assert!(!what.trim().is_empty(), "empty HELP: {line}");
                assert!(help.insert(name.to_string()), "HELP twice: {line}");
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                assert!(
                    types.insert(name.to_string(), kind.to_string()).is_none(),
                    "TYPE twice: {line}"
                );
            } else if line.starts_with("# UNIT ") {
            } else {
                assert!(!line.starts_with('#'), "unknown comment line: {line}");
                let (key, value) = line.rsplit_once(' ').expect("sample value");
                let name = key.split('{').next().unwrap_or(key);
                let family = family_of(name, &types);
                assert!(family.starts_with("atc_"), "not ours: {line}");
                assert!(help.contains(family), "no HELP before {line}");
                assert!(types.contains_key(family), "no TYPE before {line}");
                let value: f64 = value
                    .parse()
                    .unwrap_or_else(|_| panic!("not a number: {line}"));
                assert!(
                    values.insert(key.to_string(), value).is_none(),
                    "sample twice: {line}"
                );
            }
        }
        Samples {
            values,
            text: text.to_string(),
        }
    }

    /// One sample's value; a missing one fails the test with the scrape.
    fn get(&self, key: &str) -> f64 {
        *self
            .values
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in:\n{}", self.text))
    }

    /// How much each sample changed since `before`, leaving out the ones that did not, the
    /// process's own figures, and the histograms' sums and buckets (their counts stay).
    fn moved_since(&self, before: &Samples) -> BTreeMap<String, f64> {
        self.values
            .iter()
            // Read from the kernel at each scrape, and moving on their own: the daemon's
            // process and its sessions' cgroups (tests/it/limits.rs checks the latter).
            .filter(|(k, _)| !k.starts_with("atc_process_"))
            .filter(|(k, _)| {
                ![
                    "atc_sessions_memory",
                    "atc_sessions_cpu",
                    "atc_sessions_pids",
                ]
                .iter()
                .any(|p| k.starts_with(p))
            })
            .filter(|(k, _)| !k.contains("_bucket{") && !k.ends_with("_sum"))
            .map(|(k, v)| (k.clone(), v - before.values.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d != 0.0)
            .collect()
    }
}

/// Scrapes until `pred` holds, or fails with the last scrape.
async fn scrape_until(d: &TestDaemon, what: &str, pred: impl Fn(&Samples) -> bool) -> Samples {
    poll_ok(WITHIN, async || {
        let s = scrape(d).await;
        if pred(&s) {
            Ok(s)
        } else {
            Err(s.text)
        }
    })
    .await
    .unwrap_or_else(|text| panic!("the metrics never showed {what}; last scrape:\n{text}"))
}

/// A spawn under an `Idempotency-Key`; answers the status and body.
async fn keyed_spawn(d: &TestDaemon, body: &Value, key: &str) -> (u16, Value) {
    let (status, _, body) = d.keyed_spawn(key, body, false).await;
    (status, body)
}

/// The moves a test expects, as [`Samples::moved_since`] answers them (no zeros).
fn moved(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs
        .iter()
        .filter(|(_, v)| *v != 0.0)
        .map(|(k, v)| (k.to_string(), *v))
        .collect()
}

#[actix_rt::test]
async fn the_main_listener_wants_the_token_and_answers_openmetrics_text() {
    let d = TestDaemon::start().await;
    let url = format!("{}/metrics", d.url);
    let refused = get(&url, None).await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    let wrong = get(&url, Some("not-the-token")).await;
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    assert!(
        !refused.text.contains("atc_"),
        "a refusal shows no metrics: {}",
        refused.text
    );

    let s = get(&url, Some(&d.token)).await;
    assert_eq!(s.status, 200, "{}", s.text);
    assert!(
        s.content_type.starts_with("application/openmetrics-text"),
        "{}",
        s.content_type
    );
    let samples = Samples::parse(&s.text);
    // A fresh daemon: every family is there, at zero where it counts things.
    for (key, value) in [
        ("atc_sessions{state=\"running\",target=\"local\"}", 0.0),
        ("atc_attached_clients", 0.0),
        ("atc_input_bytes_total", 0.0),
        ("atc_output_bytes_total", 0.0),
        ("atc_client_desyncs_total", 0.0),
        ("atc_client_dropped_bytes_total", 0.0),
        ("atc_spawns_total{outcome=\"started\"}", 0.0),
        ("atc_spawn_duration_seconds_count", 0.0),
        ("atc_launch_wait_seconds_count", 0.0),
        ("atc_launch_duration_seconds_count", 0.0),
        ("atc_remote_reconnects_total{outcome=\"reattached\"}", 0.0),
        ("atc_remote_reconnect_duration_seconds_count", 0.0),
        ("atc_leases_held", 0.0),
        ("atc_ledger_answers_total{kind=\"outcome_unknown\"}", 0.0),
        (
            "atc_permission_requests_resolved_total{resolution=\"answered\"}",
            0.0,
        ),
        ("atc_reporter_lines_total{result=\"dropped\"}", 0.0),
    ] {
        assert_eq!(samples.get(key), value, "{key}");
    }
    assert!(samples.get("atc_process_resident_memory_bytes") > 0.0);
    assert!(samples.get("atc_process_open_fds") > 0.0);
    // Present, whatever start-up wrote (`get` fails the test on a missing sample).
    samples.get("atc_store_write_duration_seconds_count");
    samples.get("atc_remote_reconnects_total{outcome=\"ended\"}");
    d.stop().await;
}

#[actix_rt::test]
async fn spawns_io_attach_and_the_ledger_move_exactly_their_counters() {
    let d = TestDaemon::start().await;
    let before = scrape(&d).await;

    // A keyed spawn, its replay, and the same key with another payload.
    let body = json!({"agent": "sh", "cwd": "/tmp", "name": "metered"});
    let (status, created) = keyed_spawn(&d, &body, "metrics-key").await;
    assert_eq!(status, 201, "{created}");
    let id = id_of(&created["session"]);
    let (status, replay) = keyed_spawn(&d, &body, "metrics-key").await;
    assert_eq!(status, 200, "{replay}");
    let other = json!({"agent": "sh", "cwd": "/", "name": "metered"});
    let (status, conflict) = keyed_spawn(&d, &other, "metrics-key").await;
    assert_eq!(status, 409, "{conflict}");
    // A spawn that reaches the manager and fails there: its program is not installed.
    let (status, failed) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "ghost", "cwd": "/tmp"})),
        )
        .await;
    assert_ne!(status, 201, "{failed}");
    let after_spawns = scrape(&d).await;
    let store_writes = "atc_store_write_duration_seconds_count";
    let mut moves = after_spawns.moved_since(&before);
    assert!(
        moves.remove(store_writes).is_some_and(|n| n > 0.0),
        "the spawn's row was written: {moves:?}"
    );
    assert_eq!(
        moves,
        moved(&[
            ("atc_sessions{state=\"running\",target=\"local\"}", 1.0),
            ("atc_spawns_total{outcome=\"started\"}", 1.0),
            ("atc_spawns_total{outcome=\"failed\"}", 1.0),
            ("atc_spawn_duration_seconds_count", 2.0),
            // Only the started spawn launched a process.
            ("atc_launch_wait_seconds_count", 1.0),
            ("atc_launch_duration_seconds_count", 1.0),
            ("atc_ledger_answers_total{kind=\"created\"}", 1.0),
            ("atc_ledger_answers_total{kind=\"replayed\"}", 1.0),
            ("atc_ledger_answers_total{kind=\"conflict\"}", 1.0),
            // Whatever the shell printed at start.
            (
                "atc_output_bytes_total",
                after_spawns.get("atc_output_bytes_total")
            ),
        ]),
        "after the spawns"
    );

    // Attached, the client sees the stream from `offset` on: so after typing a command and
    // reading through its output, offset plus what it read is every byte the process wrote.
    let (mut ws, attached, prelude) = d.attach(&id, "cols=80&rows=24").await;
    let offset = attached["offset"].as_u64().expect("offset");
    let attached_now = scrape(&d).await;
    assert_eq!(attached_now.get("atc_attached_clients"), 1.0);
    let typed = b"echo metered-$((6*7))\r";
    ws.send_binary(typed).await;
    let read = ws.read_until(b"metered-42\r\n").await;
    let after_io = scrape(&d).await;
    assert_eq!(
        after_io.get("atc_output_bytes_total"),
        (offset + read.len() as u64) as f64,
        "output counted is the stream's length (prelude {} bytes)",
        prelude.len()
    );
    assert_eq!(
        after_io.get("atc_input_bytes_total") - after_spawns.get("atc_input_bytes_total"),
        typed.len() as f64
    );
    ws.close().await;
    let detached = scrape_until(&d, "the client detached", |s| {
        s.get("atc_attached_clients") == 0.0
    })
    .await;
    let mut moves = detached.moved_since(&after_spawns);
    moves.remove(store_writes);
    assert_eq!(
        moves,
        moved(&[
            ("atc_input_bytes_total", typed.len() as f64),
            (
                "atc_output_bytes_total",
                detached.get("atc_output_bytes_total") - after_spawns.get("atc_output_bytes_total")
            ),
        ]),
        "after the attach, the input and the detach"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_permission_request_and_reporter_lines_are_counted_by_how_they_ended() {
    let (d, _tmp) = agent_shells_daemon().await;
    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("claude").await);
    let before = scrape(&d).await;

    hook(
        &d,
        &id,
        json!({"hook_event_name": "Notification", "message": "Allow rm?"}),
    )
    .await;
    events.next_text("permission.requested").await;
    let waiting = scrape_until(&d, "the report accepted", |s| {
        s.get("atc_reporter_lines_total{result=\"accepted\"}") == 1.0
    })
    .await;
    assert_eq!(
        waiting.get("atc_sessions{state=\"needs_you\",target=\"local\"}"),
        1.0
    );
    hook(
        &d,
        &id,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "ok"}),
    )
    .await;
    let resolved = events.next_text("permission.resolved").await;
    assert_eq!(resolved["decision"], "dismissed");
    // A line naming no session, straight onto the reporter socket.
    {
        use std::io::Write;
        let mut conn = std::os::unix::net::UnixStream::connect(d.state_dir.join("atc.sock"))
            .expect("reporter socket");
        conn.write_all(br#"{"atcId":"no-such-session","event":"Stop","payload":{}}"#)
            .expect("write");
    }
    let after = scrape_until(&d, "both reports and the stray line", |s| {
        s.get("atc_reporter_lines_total{result=\"accepted\"}") == 2.0
            && s.get("atc_reporter_lines_total{result=\"dropped\"}") == 1.0
    })
    .await;
    let mut moves = after.moved_since(&before);
    // The hooks were typed into the shell, which echoed them and ran them.
    for key in [
        "atc_input_bytes_total",
        "atc_output_bytes_total",
        "atc_store_write_duration_seconds_count",
    ] {
        assert!(
            moves.remove(key).is_some_and(|n| n > 0.0),
            "{key}: {moves:?}"
        );
    }
    // `running` may or may not have moved, depending on what the session shows now; what
    // the permission request did is exact.
    moves.retain(|k, _| !k.starts_with("atc_sessions{"));
    assert_eq!(
        moves,
        moved(&[
            (
                "atc_permission_requests_resolved_total{resolution=\"dismissed\"}",
                1.0
            ),
            ("atc_reporter_lines_total{result=\"accepted\"}", 2.0),
            ("atc_reporter_lines_total{result=\"dropped\"}", 1.0),
        ])
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_slow_client_desync_counts_once_with_the_bytes_it_was_told_it_missed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    config.limits.queue_bytes = 256 * 1024;
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let id = id_of(&d.spawn("sh").await);
    let (mut fast, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let (mut slow, _, _) = d.attach(&id, "cols=80&rows=24").await;
    // Far more than the socket buffers of the client that does not read can take.
    fast.send_binary(b"head -c 16000000 /dev/zero | tr '\\0' '\\132'; printf 'fin%s\\n' ished\r")
        .await;
    fast.read_until(b"finished").await;
    let desync = slow.next_text("desync").await;
    let dropped = desync["dropped"].as_u64().expect("dropped");
    assert!(dropped > 0, "{desync}");
    let s = scrape(&d).await;
    assert_eq!(s.get("atc_client_desyncs_total"), 1.0);
    assert_eq!(s.get("atc_client_dropped_bytes_total"), dropped as f64);
    d.stop().await;
}

/// A daemon whose default target `box` is an imp target on `sim`, reconnecting after each of
/// `delays_ms` before it gives up.
async fn imp_daemon(sim: &ImpdSim, delays_ms: &[u64]) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    config.timings.imp_reconnect_delays = delays_ms
        .iter()
        .copied()
        .map(Duration::from_millis)
        .collect();
    (TestDaemon::start_on(tmp.path(), config).await, tmp)
}

#[actix_rt::test]
async fn a_dropped_remote_link_counts_a_reconnect_and_the_lease_while_held() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = imp_daemon(&sim, &[20, 50, 100, 200, 400]).await;
    let remote = spawn_remote(&d, &sim).await;
    let before = scrape(&d).await;
    assert_eq!(before.get("atc_leases_held"), 1.0);
    assert_eq!(
        before.get("atc_sessions{state=\"running\",target=\"box\"}"),
        1.0
    );
    assert!(
        sim.faults().drop_output(&remote.imp, &remote.session),
        "no viewer to drop"
    );
    let after = scrape_until(&d, "the reconnect", |s| {
        s.get("atc_remote_reconnects_total{outcome=\"reattached\"}") == 1.0
    })
    .await;
    assert_eq!(
        after.get("atc_remote_reconnect_duration_seconds_count"),
        1.0
    );
    assert_eq!(
        after.get("atc_remote_reconnects_total{outcome=\"ended\"}"),
        0.0
    );
    d.submit(&remote.id, "exit 0").await;
    scrape_until(&d, "the lease given back", |s| {
        s.get("atc_leases_held") == 0.0
    })
    .await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_remote_link_that_never_comes_back_counts_an_ended_reconnect() {
    let sim = ImpdSim::start(SimOptions::default());
    let (d, _tmp) = imp_daemon(&sim, &[20, 40]).await;
    let remote = spawn_remote(&d, &sim).await;
    // Every reconnect fails until the delays run out and the harness ends.
    sim.faults()
        .drop_next_connections(1_000, When::BeforeStarted, 1011);
    assert!(
        sim.faults().drop_output(&remote.imp, &remote.session),
        "no viewer to drop"
    );
    let after = scrape_until(&d, "the reconnect given up", |s| {
        s.get("atc_remote_reconnects_total{outcome=\"ended\"}") == 1.0
    })
    .await;
    assert_eq!(
        after.get("atc_remote_reconnects_total{outcome=\"reattached\"}"),
        0.0
    );
    assert_eq!(
        after.get("atc_remote_reconnect_duration_seconds_count"),
        0.0,
        "only a reconnect that came back has a latency"
    );
    sim.faults().cancel_connection_drops();
    d.stop().await;
}

fn options(dir: &std::path::Path, metrics: MetricsListen, allow_remote: bool) -> DaemonOptions {
    DaemonOptions {
        allow_remote,
        // The metrics listener is held to the main one's rule: remote needs TLS or this.
        insecure_plaintext: allow_remote,
        metrics_listen: Some(metrics),
        ..atc_testkit::loopback_options(dir, test_config())
    }
}

#[actix_rt::test]
async fn the_metrics_listener_serves_metrics_without_a_token_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let handle = Daemon::start(options(tmp.path(), MetricsListen::Bound(listener), false))
        .await
        .expect("starts");
    let metrics = handle.metrics_addr.expect("a metrics listener");
    let open = get(&format!("http://{metrics}/metrics"), None).await;
    assert_eq!(open.status, 200, "{}", open.text);
    assert!(open
        .content_type
        .starts_with("application/openmetrics-text"));
    let samples = Samples::parse(&open.text);
    assert_eq!(samples.get("atc_attached_clients"), 0.0);
    // Only /metrics, and only GET: the API is not there, token or not.
    for path in ["/v1/health", "/v1/sessions", "/", "/metrics/x"] {
        let other = get(&format!("http://{metrics}{path}"), Some(&handle.token)).await;
        assert_eq!(other.status, 404, "{path}: {}", other.text);
        assert!(
            other.text.contains("unknown_method"),
            "{path}: {}",
            other.text
        );
    }
    let post = awc::Client::default()
        .post(format!("http://{metrics}/metrics"))
        .send()
        .await
        .expect("post");
    assert_eq!(post.status().as_u16(), 404);
    // The main listener still wants the token for the same path.
    let main = get(&format!("http://{}/metrics", handle.addr), None).await;
    assert_eq!(main.status, 401);
    handle.stop().await;
    // Stopped with the daemon.
    let gone = awc::Client::default()
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await;
    assert!(gone.is_err(), "the metrics listener outlived the daemon");
}

#[actix_rt::test]
async fn a_non_loopback_metrics_address_needs_allow_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let anywhere = || MetricsListen::Addr("0.0.0.0:0".parse().unwrap());
    match Daemon::start(options(tmp.path(), anywhere(), false)).await {
        Err(StartError::RemoteRefused(addr)) => assert!(addr.ip().is_unspecified()),
        Err(e) => panic!("expected RemoteRefused, got {e}"),
        Ok(_) => panic!("a non-loopback metrics address started without --allow-remote"),
    }
    let mut in_clear = options(tmp.path(), anywhere(), true);
    in_clear.insecure_plaintext = false;
    match Daemon::start(in_clear).await {
        Err(StartError::PlaintextRefused(addr)) => assert!(addr.ip().is_unspecified()),
        Err(e) => panic!("expected PlaintextRefused, got {e}"),
        Ok(_) => panic!("a non-loopback metrics address started in plain HTTP without the flag"),
    }
    assert!(
        !tmp.path().join("daemon.json").exists(),
        "a refused start must not advertise itself"
    );
    let handle = Daemon::start(options(tmp.path(), anywhere(), true))
        .await
        .expect("with --allow-remote it starts");
    assert!(handle.metrics_addr.is_some_and(|a| a.ip().is_unspecified()));
    handle.stop().await;
}
