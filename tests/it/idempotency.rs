//! Idempotent spawn: a retried spawn never runs twice (spec §7).

use std::time::Duration;

use atc::sessions::messages::Spawn;
use atc::store::{KeyId, KeyState, StateStore};
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::{json, Value};

/// POST /v1/sessions with an Idempotency-Key (and optionally replay-only); answers status,
/// whether it was marked replayed, and the body.
async fn keyed_spawn(
    d: &TestDaemon,
    key: &str,
    body: Value,
    replay_only: bool,
) -> (u16, bool, Value) {
    d.keyed_spawn(key, &body, replay_only).await
}

fn cat_body() -> Value {
    json!({"agent": "cat", "cwd": "/tmp"})
}

async fn session_count(d: &TestDaemon) -> usize {
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    list["sessions"].as_array().map(Vec::len).unwrap_or(0)
}

#[actix_rt::test]
async fn concurrent_duplicates_under_one_key_start_exactly_one_session() {
    let d = TestDaemon::start().await;
    let answers =
        futures_util::future::join_all((0..8).map(|_| keyed_spawn(&d, "once", cat_body(), false)))
            .await;
    let created: Vec<_> = answers.iter().filter(|a| a.0 == 201).collect();
    let replayed: Vec<_> = answers.iter().filter(|a| a.0 == 200 && a.1).collect();
    assert_eq!(created.len(), 1, "{answers:?}");
    assert_eq!(replayed.len(), 7, "{answers:?}");
    let id = id_of(&created[0].2["session"]);
    assert!(
        answers.iter().all(|a| a.2["session"]["id"] == id.as_str()),
        "{answers:?}"
    );
    assert_eq!(session_count(&d).await, 1);
    d.stop().await;
}

#[actix_rt::test]
async fn a_replay_answers_the_current_descriptor_and_a_different_payload_conflicts() {
    let d = TestDaemon::start().await;
    let (status, replayed, first) = keyed_spawn(&d, "k1", cat_body(), false).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    let id = id_of(&first["session"]);
    d.call(
        "PATCH",
        &format!("/v1/sessions/{id}"),
        Some(json!({"name": "renamed"})),
    )
    .await;
    // Same payload, written differently (key order, an explicit default): still a replay.
    let (status, replayed, again) = keyed_spawn(
        &d,
        "k1",
        json!({"cols": 80, "cwd": "/tmp", "agent": "cat", "rows": 24}),
        false,
    )
    .await;
    assert_eq!((status, replayed), (200, true), "{again}");
    assert_eq!(again["session"]["id"], id.as_str());
    assert_eq!(
        again["session"]["name"], "renamed",
        "a replay shows the current descriptor"
    );
    let (status, _, err) = keyed_spawn(&d, "k1", json!({"agent": "cat", "cwd": "/"}), false).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "idempotency_conflict");
    // Replay-only: a held key replays, an unknown one runs nothing.
    let (status, replayed, _) = keyed_spawn(&d, "k1", cat_body(), true).await;
    assert_eq!((status, replayed), (200, true));
    let (status, _, err) = keyed_spawn(&d, "never-used", cat_body(), true).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "idempotency_key_unknown");
    assert_eq!(session_count(&d).await, 1);
    let tmp = d.stop_keep_dir().await.unwrap();
    // The completed key records the target the session landed on.
    let store = StateStore::open(&tmp.path().join("atc.db")).await.unwrap();
    let row = store.idempotency_get(&key("k1")).await.unwrap().unwrap();
    assert_eq!(row.effect_ref, id);
    assert_eq!(
        row.effect_target,
        Some(("local".into(), "local-pty:44136fa355b3678a".into()))
    );
    store.close().await.unwrap();
}

#[actix_rt::test]
async fn an_effect_that_failed_cleanly_releases_its_key() {
    let d = TestDaemon::start().await;
    for _ in 0..2 {
        let (status, replayed, err) =
            keyed_spawn(&d, "k2", json!({"agent": "ghost", "cwd": "/tmp"}), false).await;
        assert_eq!((status, replayed), (422, false), "{err}");
        assert_eq!(err["error"]["code"], "unsupported");
    }
    // Released, so the key is free for a different payload.
    let (status, _, ok) = keyed_spawn(&d, "k2", cat_body(), false).await;
    assert_eq!(status, 201, "{ok}");
    d.stop().await;
}

#[actix_rt::test]
async fn bad_keys_are_bad_args() {
    let d = TestDaemon::start().await;
    let (status, _, err) = keyed_spawn(&d, &"k".repeat(201), cat_body(), false).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["data"]["field"], "idempotencyKey");
    assert_eq!(session_count(&d).await, 0);
    d.stop().await;
}

fn key(k: &str) -> KeyId {
    KeyId {
        principal: "local".into(),
        operation: "session.spawn".into(),
        key: k.into(),
    }
}

fn cat_spawn_hash() -> String {
    atc::ledger::payload_hash(&atc::ledger::spawn_payload(
        &Spawn {
            id: None,
            agent: "cat".into(),
            cwd: "/tmp".into(),
            name: None,
            size: atc_protocol::TermSize::DEFAULT,
            target: "local".into(),
            target_identity: "local-pty:44136fa355b3678a".into(),
            model: None,
            effort: None,
            workspace: None,
            limits: Default::default(),
            parent: None,
            reach: None,
        },
        None,
    ))
}

#[actix_rt::test]
async fn claims_a_dead_daemon_left_in_progress_are_outcome_unknown_or_completed_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    // A session that exists, so its claim can be found completed after all.
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let existing = id_of(&d.spawn("cat").await);
    d.stop().await;
    // What a daemon killed between claim and completion leaves behind.
    let store = StateStore::open(&tmp.path().join("atc.db")).await.unwrap();
    let lost = uuid::Uuid::new_v4().to_string();
    store
        .idempotency_claim(&key("lost"), &cat_spawn_hash(), &lost, 1)
        .await
        .unwrap();
    store
        .idempotency_claim(&key("landed"), &cat_spawn_hash(), &existing, 1)
        .await
        .unwrap();
    store.close().await.unwrap();

    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (status, _, err) = keyed_spawn(&d, "lost", cat_body(), false).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "outcome_unknown");
    assert_eq!(err["error"]["data"]["effectRef"], lost.as_str());
    // Never runs again, whatever the retries.
    let (status, _, _) = keyed_spawn(&d, "lost", cat_body(), false).await;
    assert_eq!(status, 409);
    let (status, replayed, body) = keyed_spawn(&d, "landed", cat_body(), false).await;
    assert_eq!((status, replayed), (200, true), "{body}");
    assert_eq!(body["session"]["id"], existing.as_str());
    assert_eq!(session_count(&d).await, 1, "nothing new was spawned");
    d.stop().await;
}

#[actix_rt::test]
async fn completed_keys_older_than_the_retention_are_swept_and_unknown_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let store = StateStore::open(&tmp.path().join("atc.db")).await.unwrap();
    let day_and_more = atc::clock::now_ms() - 25 * 3600 * 1000;
    for (k, state) in [
        ("old-done", KeyState::Completed),
        ("old-unknown", KeyState::OutcomeUnknown),
    ] {
        store
            .idempotency_claim(
                &key(k),
                &cat_spawn_hash(),
                &uuid::Uuid::new_v4().to_string(),
                day_and_more,
            )
            .await
            .unwrap();
        store
            .idempotency_finish(&key(k), state, Some("{}"), None, day_and_more)
            .await
            .unwrap();
    }
    store.close().await.unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (status, _, err) = keyed_spawn(&d, "old-done", cat_body(), true).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "idempotency_key_unknown");
    let (status, _, err) = keyed_spawn(&d, "old-unknown", cat_body(), true).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "outcome_unknown");
    d.stop().await;
}

#[actix_rt::test]
async fn the_periodic_sweep_deletes_completed_keys_while_running() {
    let mut config = test_config();
    config.timings.idempotency_retention = Duration::from_millis(1);
    config.timings.idempotency_sweep = Duration::from_millis(50);
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (status, _, _) = keyed_spawn(&d, "short-lived", cat_body(), false).await;
    assert_eq!(status, 201);
    let swept = atc_testkit::poll_ok(atc_testkit::WITHIN, async || {
        let (status, _, body) = keyed_spawn(&d, "short-lived", cat_body(), true).await;
        if status == 404 {
            Ok(body)
        } else {
            Err((status, body))
        }
    })
    .await;
    let body =
        swept.unwrap_or_else(|(status, body)| panic!("the key was never swept: {status} {body}"));
    assert_eq!(body["error"]["code"], "idempotency_key_unknown");
    d.stop().await;
}

#[actix_rt::test]
async fn a_held_key_replays_even_when_the_target_now_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let (status, _, first) = keyed_spawn(&d, "k3", cat_body(), false).await;
    assert_eq!(status, 201, "{first}");
    d.stop().await;
    let broken = atc::config::Config::from_json(b"{ not json");
    let config = atc::config::Config {
        targets: broken.targets,
        ..test_config()
    };
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (status, replayed, again) = keyed_spawn(&d, "k3", cat_body(), false).await;
    assert_eq!((status, replayed), (200, true), "{again}");
    assert_eq!(again["session"]["id"], first["session"]["id"]);
    let (status, _, err) = keyed_spawn(&d, "k4", cat_body(), false).await;
    assert_eq!(status, 503, "{err}");
    assert_eq!(err["error"]["code"], "target_config_invalid");
    let (status, _, err) = keyed_spawn(&d, "k4", cat_body(), true).await;
    assert_eq!(status, 404, "a refused spawn holds no key: {err}");
    d.stop().await;
}
