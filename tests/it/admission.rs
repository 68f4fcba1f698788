//! Spawn admission under load (`sessions::admission`): a spawn past the bounded queue of spawns
//! in flight answers `busy`, and a spawn on this machine while its available memory is below
//! the floor answers `memory_low`; both are `host_unavailable` with `Retry-After`, leave nothing
//! behind, and a spawn works again once the cause has passed.

use atc::config::Config;
use atc_testkit::impd_sim::{ImpdSim, SimOptions};
use atc_testkit::{http_client, id_of, test_config, with_imp_target, TestDaemon, WITHIN};
use serde_json::{json, Value};

/// A floor no machine reaches (about 95 TiB).
const FLOOR_MIB: u64 = 100_000_000;

/// `POST /v1/sessions` with `body` and `headers`: the status, the `Retry-After` header (if
/// any) and the body.
async fn spawn_answer(
    url: &str,
    token: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, Option<String>, Value) {
    let mut req = http_client()
        .post(format!("{url}/v1/sessions"))
        .bearer_auth(token)
        .timeout(WITHIN);
    for (name, value) in headers {
        req = req.insert_header((*name, *value));
    }
    let mut resp = req.send_json(body).await.expect("spawn request");
    let retry_after = resp
        .headers()
        .get("Retry-After")
        .map(|v| v.to_str().expect("Retry-After is text").to_string());
    let bytes = resp.body().await.expect("spawn body");
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (resp.status().as_u16(), retry_after, json)
}

/// A `Retry-After` of whole seconds, at least one.
fn seconds(retry_after: Option<String>, body: &Value) -> u64 {
    let secs: u64 = retry_after
        .unwrap_or_else(|| panic!("no Retry-After: {body}"))
        .parse()
        .expect("Retry-After is delay-seconds");
    assert!(secs >= 1, "{secs}");
    secs
}

async fn daemon_with(config: Config) -> (TestDaemon, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    (TestDaemon::start_on(tmp.path(), config).await, tmp)
}

#[actix_rt::test]
async fn a_local_spawn_below_the_memory_floor_is_refused_naming_both_figures() {
    let sim = ImpdSim::start(SimOptions::default());
    let mut config = with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    config.limits.memory_floor_mib = Some(FLOOR_MIB);
    let (d, _tmp) = daemon_with(config).await;
    let local = json!({"agent": "cat", "cwd": "/tmp", "target": "local"});

    for headers in [vec![], vec![("Idempotency-Key", "low-1")]] {
        let (status, retry_after, body) = spawn_answer(&d.url, &d.token, &local, &headers).await;
        let error = &body["error"];
        assert_eq!(
            (
                status,
                error["code"].as_str(),
                error["data"]["problem"].as_str()
            ),
            (503, Some("host_unavailable"), Some("memory_low")),
            "{headers:?}: {body}"
        );
        assert_eq!(error["data"]["floorMiB"], FLOOR_MIB, "{body}");
        let available = error["data"]["availableMiB"]
            .as_u64()
            .expect("availableMiB");
        assert!(available > 0 && available < FLOOR_MIB, "{body}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("{available} MiB"))
                && message.contains(&format!("{FLOOR_MIB} MiB")),
            "{message}"
        );
        seconds(retry_after, &body);
    }
    // The keyed refusal left no key behind: a retry with it runs fresh.
    let (status, _, body) = spawn_answer(
        &d.url,
        &d.token,
        &local,
        &[
            ("Idempotency-Key", "low-1"),
            ("Idempotency-Replay-Only", "true"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("idempotency_key_unknown")),
        "{body}"
    );
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"], json!([]), "nothing was started: {list}");

    // An imp's memory is its host's: the floor is not this machine's to apply there.
    let remote = d
        .spawn_with(json!({"agent": "sh", "cwd": "/tmp", "target": "box"}))
        .await;
    assert_eq!(remote["locator"]["targetID"], "box", "{remote}");
    d.stop().await;

    // `null` turns the check off.
    let mut config = test_config();
    config.limits.memory_floor_mib = None;
    let (d, _tmp) = daemon_with(config).await;
    d.spawn("cat").await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_spawn_past_the_queue_is_busy_until_the_one_in_flight_is_answered() {
    let mut config = test_config();
    config.limits.spawn_queue = 1;
    let (d, _tmp) = daemon_with(config).await;
    let cwd = tempfile::tempdir().unwrap();
    // A session to revive while the queue is full: revives are not spawns.
    let dead = id_of(&d.spawn("cat").await);
    d.call("POST", &format!("/v1/sessions/{dead}/kill"), None)
        .await;
    d.wait_session(&dead, "exited", |s| s["alive"] == false)
        .await;

    // A git server that takes the connection and never answers holds a spawn in its clone.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = json!({
        "agent": "cat",
        "cwd": cwd.path(),
        "workspace": {"url": format!("http://127.0.0.1:{port}/x.git")},
    });
    let (url, token) = (d.url.clone(), d.token.clone());
    let in_flight = actix_rt::spawn(async move { spawn_answer(&url, &token, &held, &[]).await });
    let (connection, _) = tokio::time::timeout(WITHIN, listener.accept())
        .await
        .expect("the held spawn's git connected")
        .unwrap();

    let plain = json!({"agent": "cat", "cwd": "/tmp"});
    for headers in [vec![], vec![("Idempotency-Key", "busy-1")]] {
        let (status, retry_after, body) = spawn_answer(&d.url, &d.token, &plain, &headers).await;
        let error = &body["error"];
        assert_eq!(
            (
                status,
                error["code"].as_str(),
                error["data"]["problem"].as_str()
            ),
            (503, Some("host_unavailable"), Some("busy")),
            "{headers:?}: {body}"
        );
        assert_eq!(error["data"]["limit"], 1, "{body}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("limits.spawnQueue")),
            "{body}"
        );
        seconds(retry_after, &body);
    }
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{dead}/revive"), None)
        .await;
    assert_eq!(status, 200, "a revive takes no place in the queue: {body}");

    // The server hangs up: the held spawn is answered, and its place comes back.
    drop((connection, listener));
    let (status, _, body) = tokio::time::timeout(WITHIN, in_flight)
        .await
        .expect("the held spawn was answered")
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("clone_failed")),
        "{body}"
    );
    let (status, retry_after, body) =
        spawn_answer(&d.url, &d.token, &plain, &[("Idempotency-Key", "busy-1")]).await;
    assert_eq!(status, 201, "the busy key runs fresh: {body}");
    assert_eq!(retry_after, None);
    d.spawn("cat").await;
    d.stop().await;
}
