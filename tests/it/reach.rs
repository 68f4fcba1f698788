//! Principals' reach (spec §2.5) through the HTTP API and the sockets: a session out of reach
//! answers exactly as one that does not exist, on every route of the route table; lists, the
//! fleet, the trail, permissions and the events socket leave it out; owner-only routes refuse
//! a principal; idempotency keys are kept per principal; a ticket acts as its principal.
//!
//! Most tests act as a principal through the owner's token and `X-Atc-As` on a daemon without
//! a `principals` key, where every principal reaches `local` only; the last uses principals'
//! own tokens (their files: tests/it/principals.rs; their rotation: token_rotation.rs).

use atc::config::Config;
use atc::server::route_table::{Access, Endpoint, ROUTES};
use atc_testkit::test_daemon::Acting;
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::{json, Value};

/// `local`, and `side`: another local target the principal is not granted.
fn two_targets() -> Config {
    with_principals("")
}

/// [`two_targets`] with config `principals` when `principals` is not empty.
fn with_principals(principals: &str) -> Config {
    let principals = match principals {
        "" => String::new(),
        p => format!(r#", "principals": {p}"#),
    };
    let text = format!(
        r#"{{"targets": {{"local": {{"provider": "local-pty"}},
                         "side": {{"provider": "local-pty", "note": "not granted"}}}},
             "defaultTarget": "local"{principals}}}"#
    );
    let parsed = Config::from_json(text.as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        targets: parsed.targets,
        principals: parsed.principals,
        ..test_config()
    }
}

/// The token in principal `id`'s file.
fn token_of(d: &TestDaemon, id: &str) -> String {
    std::fs::read_to_string(d.state_dir.join("principals").join(id))
        .expect("the principal's token file")
        .trim()
        .to_string()
}

fn bot(d: &TestDaemon) -> Acting<'_> {
    Acting {
        token: &d.token,
        act_as: Some("bot"),
    }
}

async fn spawn_on(d: &TestDaemon, target: &str, name: &str) -> String {
    let body = json!({"agent": "sh", "cwd": "/tmp", "target": target, "name": name});
    id_of(&d.spawn_with(body).await)
}

/// What each route is, for a principal asking about a session out of its reach.
enum Probe {
    /// It names a session: ask it with this body (one a session in reach would accept).
    Session(Option<Value>),
    /// It lists sessions or what belongs to them (tested below, one by one).
    Listing,
    /// Only the owner may call it.
    OwnerOnly,
    /// It tells nothing about any session.
    NoSessions,
}

/// Every endpoint's probe. A new endpoint does not compile until it says what it is.
fn probe(endpoint: Endpoint) -> Probe {
    use Endpoint as E;
    match endpoint {
        E::GetSession
        | E::Screen
        | E::Workspace
        | E::ResumeCommand
        | E::Kill
        | E::Forget
        | E::Ack
        | E::Attach => Probe::Session(None),
        E::UpdateSession => Probe::Session(Some(json!({"pinned": true}))),
        E::Input => Probe::Session(Some(json!({"data": "x"}))),
        E::Submit => Probe::Session(Some(json!({"text": "x"}))),
        E::Resize => Probe::Session(Some(json!({"cols": 90, "rows": 30}))),
        E::Revive => Probe::Session(Some(json!({}))),
        E::Suspend => Probe::Session(Some(json!({}))),
        E::ListSessions | E::Fleet | E::Trail | E::Permissions | E::Events | E::Dirs => {
            Probe::Listing
        }
        // A permission request names a session by its request id; tested with the listing.
        E::Respond => Probe::Listing,
        E::Quit
        | E::Restore
        | E::AuthStatus
        | E::AuthRevoke
        | E::AuthRebind
        | E::Metrics
        | E::Orphans
        | E::Prune
        | E::Principals => Probe::OwnerOnly,
        E::Health | E::OpenApi | E::Daemon | E::Agents | E::Spawn | E::Tickets => Probe::NoSessions,
    }
}

/// An answer with the session key it was asked with replaced, to compare two answers.
fn masked(answer: (u16, Value), key: &str) -> (u16, String) {
    (answer.0, answer.1.to_string().replace(key, "<key>"))
}

#[actix_rt::test]
async fn a_session_out_of_reach_answers_as_a_missing_one_on_every_route() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let hidden = spawn_on(&d, "side", "hidden").await;
    let missing = uuid::Uuid::new_v4().to_string();
    let mut probed = 0;
    for route in ROUTES {
        let expect_owner_only = matches!(probe(route.endpoint), Probe::OwnerOnly);
        assert_eq!(
            expect_owner_only,
            route.access == Access::Owner,
            "{} {}: the probe and the table disagree on owner-only",
            route.method.as_str(),
            route.path
        );
        let Probe::Session(body) = probe(route.endpoint) else {
            continue;
        };
        for key in [hidden.as_str(), "hidden"] {
            let at = |k: &str| route.path.replace("{id}", k);
            if route.endpoint == Endpoint::Attach {
                let a = d.try_ws_acting(bot(&d), &at(key)).await.err();
                let m = d.try_ws_acting(bot(&d), &at(&missing)).await.err();
                assert_eq!(
                    a.map(|e| e.0),
                    m.map(|e| e.0),
                    "attach to {key} as for a missing session"
                );
                continue;
            }
            let method = route.method.as_str();
            let out = d.call_acting(bot(&d), method, &at(key), body.clone()).await;
            let absent = d
                .call_acting(bot(&d), method, &at(&missing), body.clone())
                .await;
            assert_eq!(
                out.1["error"]["code"], "no_such_session",
                "{method} {}: {}",
                route.path, out.1
            );
            assert_eq!(
                masked(out, key),
                masked(absent, &missing),
                "{method} {} answers an out-of-reach session as a missing one",
                route.path
            );
        }
        probed += 1;
    }
    assert!(probed >= 14, "only {probed} session routes probed");
    // The owner still reaches it, and the session was left as it was by all of that.
    let (s, got) = d.call("GET", &format!("/v1/sessions/{hidden}"), None).await;
    assert_eq!(
        (s, got["session"]["alive"].clone()),
        (200, json!(true)),
        "{got}"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn lists_the_fleet_the_trail_and_the_events_socket_leave_out_what_is_out_of_reach() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let shown = spawn_on(&d, "local", "shown").await;
    let hidden = spawn_on(&d, "side", "hidden").await;
    let ids = |v: &Value, list: &str, field: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap_or_else(|| panic!("{list}: {v}"))
            .iter()
            .map(|s| s[field].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let (_, all) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(ids(&all, "sessions", "id").len(), 2);
    let (_, mine) = d.call_acting(bot(&d), "GET", "/v1/sessions", None).await;
    assert_eq!(ids(&mine, "sessions", "id"), vec![shown.clone()]);
    let (_, fleet) = d.call_acting(bot(&d), "GET", "/v1/fleet", None).await;
    assert_eq!(
        ids(&fleet, "fleet", "sessionId"),
        vec![shown.clone()],
        "{fleet}"
    );
    let (_, owner_fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(
        ids(&owner_fleet, "fleet", "sessionId").len(),
        2,
        "{owner_fleet}"
    );
    let (_, dirs) = d.call_acting(bot(&d), "GET", "/v1/dirs", None).await;
    assert_eq!(
        dirs["dirs"],
        json!(["/tmp"]),
        "granted local's spawns: {dirs}"
    );

    // Each session reports a hook, so each has a trail.
    for (id, message) in [
        (&shown, "from the shown one"),
        (&hidden, "from the hidden one"),
    ] {
        let report = json!({"hook_event_name": "Notification", "message": message});
        atc_testkit::hook(&d, id, report).await;
    }
    let trail_of = |act_as: Option<&'static str>| {
        let d = &d;
        async move {
            let who = Acting {
                token: &d.token,
                act_as,
            };
            let (_, t) = d
                .call_acting(who, "GET", "/v1/events/trail?limit=200", None)
                .await;
            t.to_string()
        }
    };
    let both = atc_testkit::poll_ok(atc_testkit::WITHIN, async || {
        let t = trail_of(None).await;
        match t.contains(&shown) && t.contains(&hidden) {
            true => Ok(()),
            false => Err(t),
        }
    })
    .await;
    assert!(both.is_ok(), "the owner's trail has both: {both:?}");
    let trail = trail_of(Some("bot")).await;
    assert!(trail.contains(&shown), "{trail}");
    assert!(
        !trail.contains(&hidden),
        "the trail leaves out what is out of reach: {trail}"
    );

    // The events socket's snapshot, then a change to each session: only ours is heard of.
    let mut events = d
        .try_ws_acting(bot(&d), "/v1/events")
        .await
        .expect("events");
    let added = events.next_text("session.added").await;
    assert_eq!(added["session"]["id"], shown.as_str(), "{added}");
    for id in [&hidden, &shown] {
        let (s, _) = d
            .call(
                "PATCH",
                &format!("/v1/sessions/{id}"),
                Some(json!({"name": format!("{id}-renamed")})),
            )
            .await;
        assert_eq!(s, 200);
    }
    let next = events.next_text("session.renamed").await;
    assert_eq!(
        next["s"],
        shown.as_str(),
        "the hidden rename never arrived first: {next}"
    );
    events.close().await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_principal_may_not_spawn_off_its_grants_nor_call_owner_only_routes() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let (s, err) = d
        .call_acting(
            bot(&d),
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp", "target": "side"})),
        )
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (403, Some("target_forbidden")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["target"], "side");
    let (s, spawned) = d
        .call_acting(
            bot(&d),
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": "/tmp"})),
        )
        .await;
    assert_eq!(s, 201, "the default target is granted: {spawned}");
    for (method, path) in [
        ("POST", "/v1/fleet/restore"),
        ("GET", "/metrics"),
        ("POST", "/v1/daemon/quit"),
        ("GET", "/v1/workspaces/orphans"),
    ] {
        let (s, err) = d.call_acting(bot(&d), method, path, None).await;
        assert_eq!(
            (s, err["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{path}: {err}"
        );
    }
    let (s, err) = d
        .call_acting(
            Acting {
                token: &d.token,
                act_as: Some("Not An Id"),
            },
            "GET",
            "/v1/sessions",
            None,
        )
        .await;
    assert_eq!(
        (s, err["error"]["data"]["field"].as_str()),
        (400, Some("X-Atc-As")),
        "{err}"
    );
    // The daemon is still up: the quit was refused.
    let (s, _) = d.call("GET", "/v1/daemon", None).await;
    assert_eq!(s, 200);
    d.stop().await;
}

#[actix_rt::test]
async fn one_idempotency_key_under_two_principals_is_two_spawns() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let body = json!({"agent": "cat", "cwd": "/tmp"});
    let keyed = |act_as: Option<&'static str>| {
        let body = body.clone();
        let token = d.token.clone();
        let d = &d;
        async move {
            let mut headers = vec![("Idempotency-Key", "same-key")];
            if let Some(a) = act_as {
                headers.push(("X-Atc-As", a));
            }
            d.call_headers("POST", "/v1/sessions", Some(body), Some(&token), &headers)
                .await
        }
    };
    let (s1, a) = keyed(Some("bot")).await;
    let (s2, b) = keyed(Some("ci")).await;
    let (s3, c) = keyed(None).await;
    let (s4, again) = keyed(Some("bot")).await;
    assert_eq!(
        (s1, s2, s3, s4),
        (201, 201, 201, 200),
        "{a} {b} {c} {again}"
    );
    let ids = [&a, &b, &c].map(|v| id_of(&v["session"]));
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    assert_eq!(
        id_of(&again["session"]),
        ids[0],
        "bot's key replays bot's spawn"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_ticket_opens_a_socket_as_the_principal_that_asked_for_it() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let hidden = spawn_on(&d, "side", "hidden").await;
    let (s, ticket) = d.call_acting(bot(&d), "POST", "/v1/tickets", None).await;
    assert_eq!(s, 200, "{ticket}");
    let t = ticket["ticket"].as_str().expect("ticket");
    let url = format!(
        "{}/v1/sessions/{hidden}/attach?ticket={t}",
        d.url.replace("http://", "ws://")
    );
    let refused = atc_testkit::ws::ws_at(&url, None, None).await.err();
    assert_eq!(
        refused.map(|e| e.0),
        Some(404),
        "the ticket's socket acts as bot"
    );
    // The owner's own ticket attaches.
    let (_, ticket) = d.call("POST", "/v1/tickets", None).await;
    let t = ticket["ticket"].as_str().expect("ticket");
    let url = format!(
        "{}/v1/sessions/{hidden}/attach?ticket={t}",
        d.url.replace("http://", "ws://")
    );
    assert!(atc_testkit::ws::ws_at(&url, None, None).await.is_ok());
    d.stop().await;
}

#[actix_rt::test]
async fn a_principals_own_token_reaches_its_grants_and_x_atc_as_only_narrows_it() {
    let d = TestDaemon::start_on(
        &tempfile::tempdir().unwrap().keep(),
        with_principals(r#"{"ci": {"targets": ["local", "side"]}, "bot": {"targets": ["local"]}}"#),
    )
    .await;
    let (ci_token, bot_token) = (token_of(&d, "ci"), token_of(&d, "bot"));
    let ci = Acting {
        token: &ci_token,
        act_as: None,
    };
    let bot_own = Acting {
        token: &bot_token,
        act_as: None,
    };
    let side = json!({"agent": "cat", "cwd": "/tmp", "target": "side"});
    let (s, spawned) = d
        .call_acting(ci, "POST", "/v1/sessions", Some(side.clone()))
        .await;
    assert_eq!(s, 201, "ci is granted side: {spawned}");
    let on_side = id_of(&spawned["session"]);
    let (s, err) = d
        .call_acting(bot_own, "POST", "/v1/sessions", Some(side.clone()))
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (403, Some("target_forbidden")),
        "{err}"
    );
    let get = format!("/v1/sessions/{on_side}");
    assert_eq!(d.call_acting(ci, "GET", &get, None).await.0, 200);
    assert_eq!(d.call_acting(bot_own, "GET", &get, None).await.0, 404);
    // ci acting as bot sees what both reach; bot acting as ci never gets more than its own.
    let ci_as_bot = Acting {
        act_as: Some("bot"),
        ..ci
    };
    let bot_as_ci = Acting {
        act_as: Some("ci"),
        ..bot_own
    };
    assert_eq!(d.call_acting(ci_as_bot, "GET", &get, None).await.0, 404);
    assert_eq!(
        d.call_acting(bot_as_ci, "GET", &get, None).await.0,
        404,
        "never widened"
    );
    let (s, err) = d
        .call_acting(ci_as_bot, "POST", "/v1/sessions", Some(side))
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (403, Some("target_forbidden")),
        "{err}"
    );
    // Owner-only, whoever the principal is.
    for who in [ci, bot_own] {
        let (s, err) = d.call_acting(who, "POST", "/v1/fleet/restore", None).await;
        assert_eq!(
            (s, err["error"]["code"].as_str()),
            (401, Some("unauthorized")),
            "{err}"
        );
        assert_eq!(
            d.call_acting(who, "GET", "/v1/principals", None).await.0,
            401
        );
    }
    // A ticket ci asks for opens a socket as ci (on_side is in its reach), bot's as bot.
    for (who, attaches) in [(ci, true), (bot_own, false)] {
        let (_, ticket) = d.call_acting(who, "POST", "/v1/tickets", None).await;
        let t = ticket["ticket"].as_str().expect("ticket");
        let url = format!(
            "{}/v1/sessions/{on_side}/attach?ticket={t}",
            d.url.replace("http://", "ws://")
        );
        let opened = atc_testkit::ws::ws_at(&url, None, None).await;
        assert_eq!(opened.is_ok(), attaches, "{:?}", opened.err());
    }
    // One key under ci and under bot: two sessions.
    let keyed = |token: String| {
        let d = &d;
        async move {
            let headers = [("Idempotency-Key", "shared")];
            let body = json!({"agent": "cat", "cwd": "/tmp"});
            let (s, v) = d
                .call_headers("POST", "/v1/sessions", Some(body), Some(&token), &headers)
                .await;
            assert_eq!(s, 201, "{v}");
            id_of(&v["session"])
        }
    };
    assert_ne!(
        keyed(ci_token.clone()).await,
        keyed(bot_token.clone()).await
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_session_bound_to_a_targets_old_identity_leaves_reach_and_comes_back_with_it() {
    // A target's identity is constant for a daemon's life (spec §4.2): it changes across a
    // restart with other options, and the principal's view follows at once.
    let dir = tempfile::tempdir().unwrap().keep();
    let grants = r#"{"ci": {"targets": ["local", "side"]}}"#;
    let moved = |config: Config| {
        let parsed = Config::from_json(
            br#"{"targets": {"local": {"provider": "local-pty"},
                             "side": {"provider": "local-pty", "note": "moved"}},
                 "defaultTarget": "local"}"#,
        );
        Config {
            targets: parsed.targets,
            ..config
        }
    };
    let d = TestDaemon::start_on(&dir, with_principals(grants)).await;
    let ci_token = token_of(&d, "ci");
    let ci = Acting {
        token: &ci_token,
        act_as: None,
    };
    let side = json!({"agent": "cat", "cwd": "/tmp", "target": "side", "name": "on-side"});
    let (s, spawned) = d.call_acting(ci, "POST", "/v1/sessions", Some(side)).await;
    assert_eq!(s, 201, "{spawned}");
    let id = id_of(&spawned["session"]);
    let get = format!("/v1/sessions/{id}");
    d.stop().await;

    let snapshot_names = |d: &TestDaemon| {
        let token = ci_token.clone();
        let url = format!("{}/v1/events", d.url.replace("http://", "ws://"));
        let owner = d.token.clone();
        async move {
            // A marker session the principal sees, so the snapshot's end is known.
            let marker = json!({"agent": "cat", "cwd": "/tmp"});
            let http = atc_testkit::http_client();
            let base = url.replace("ws://", "http://").replace("/v1/events", "");
            let mut resp = http
                .post(format!("{base}/v1/sessions"))
                .bearer_auth(&owner)
                .send_json(&marker)
                .await
                .expect("marker spawn");
            assert_eq!(resp.status().as_u16(), 201);
            let body: Value = resp.json().await.expect("marker");
            let marker = id_of(&body["session"]);
            let mut ws = atc_testkit::ws::ws_at(&url, Some(&token), None)
                .await
                .expect("events");
            let mut ids = Vec::new();
            loop {
                let added = ws.next_text("session.added").await;
                let seen = added["session"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if seen == marker {
                    break;
                }
                ids.push(seen);
            }
            ws.close().await;
            ids
        }
    };

    let d = TestDaemon::start_on(&dir, moved(with_principals(grants))).await;
    let (s, err) = d.call_acting(ci, "GET", &get, None).await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (404, Some("no_such_session")),
        "{err}"
    );
    assert!(
        !snapshot_names(&d).await.contains(&id),
        "left out of the principal's events"
    );
    assert_eq!(
        d.call("GET", &get, None).await.0,
        200,
        "the owner still sees it"
    );
    d.stop().await;

    let d = TestDaemon::start_on(&dir, with_principals(grants)).await;
    assert_eq!(
        d.call_acting(ci, "GET", &get, None).await.0,
        200,
        "back in reach"
    );
    assert!(
        snapshot_names(&d).await.contains(&id),
        "added back to its events"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_tree_leaves_reach_with_a_sub_session_off_the_grants_and_comes_back_without_it() {
    let d = TestDaemon::start_on(&tempfile::tempdir().unwrap().keep(), two_targets()).await;
    let top = spawn_on(&d, "local", "top").await;
    let mut events = d
        .try_ws_acting(bot(&d), "/v1/events")
        .await
        .expect("events");
    let added = events.next_text("session.added").await;
    assert_eq!(added["session"]["id"], top.as_str());
    let mut attached = d
        .try_ws_acting(bot(&d), &format!("/v1/sessions/{top}/attach"))
        .await
        .expect("bot attaches to a session in reach");
    attached.next_text("attached").await;
    // The owner starts a sub-session on a target bot is not granted: the tree leaves reach.
    let body = json!({"agent": "cat", "cwd": "/tmp", "target": "side", "parent": top});
    let (s, sub) = d.call("POST", "/v1/sessions", Some(body)).await;
    assert_eq!(s, 201, "{sub}");
    let sub = id_of(&sub["session"]);
    let removed = events.next_text("session.removed").await;
    assert_eq!(removed["s"], top.as_str(), "{removed}");
    assert!(
        attached.closed_unanswered_within(atc_testkit::WITHIN).await,
        "bot's attach socket to the tree's session closes"
    );
    let (s, _) = d
        .call_acting(bot(&d), "GET", &format!("/v1/sessions/{top}"), None)
        .await;
    assert_eq!(s, 404, "out of reach now");
    // Forgotten, the foreign sub-session takes nothing with it: the tree comes back.
    let (s, _) = d
        .call("DELETE", &format!("/v1/sessions/{sub}?force=true"), None)
        .await;
    assert_eq!(s, 200);
    let back = events.next_text("session.added").await;
    assert_eq!(back["session"]["id"], top.as_str(), "{back}");
    assert!(
        !events.seen.concat().contains(&sub),
        "bot never heard of the sub-session: {:?}",
        events.seen
    );
    events.close().await;
    d.stop().await;
}
