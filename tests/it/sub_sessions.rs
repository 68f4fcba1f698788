//! Sub-sessions (issue 36): a spawn under a parent, one level deep, sharing the parent's imp
//! where it runs on the parent's target (spec §4.5), and everything the host does following
//! its owner: a sub-session's kill ends only its own process, the owner's sleep and revive
//! take the sub-sessions along, its destroy removes them. Against the impd simulator with
//! real processes, and on local PTYs for what needs no host.

use std::path::Path;

use atc::config::Config;
use atc_testkit::broker::{self, auth, bindable_sim, sh_agent, wait_auth, AGENT};
use atc_testkit::git_repo::TestRepo;
use atc_testkit::impd_sim::{ImpState, ImpdSim, SimOptions};
use atc_testkit::{
    id_of, spawn_remote, suspend_when_idle, test_config, with_imp_target, Frame, Remote,
    TestDaemon, WITHIN,
};
use serde_json::{json, Value};

fn imp_config(sim: &ImpdSim) -> Config {
    with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}))
}

/// Two imp targets on one simulator (`box`, the default, and `box2`) and the local one.
fn two_imp_targets(sim: &ImpdSim) -> Config {
    let imp = json!({"provider": "imp", "url": sim.url(), "tokenFile": sim.token_file()});
    let text = json!({
        "targets": {"local": {"provider": "local-pty"}, "box": imp, "box2": imp},
        "defaultTarget": "box",
    });
    let parsed = Config::from_json(text.to_string().as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        targets: parsed.targets,
        ..test_config()
    }
}

/// Spawns `agent` under `parent` with `more` fields; the answer.
async fn spawn_under(d: &TestDaemon, agent: &str, parent: &str, more: Value) -> (u16, Value) {
    let mut body = json!({"agent": agent, "cwd": "/tmp", "parent": parent});
    if let (Some(b), Value::Object(more)) = (body.as_object_mut(), more) {
        b.extend(more);
    }
    d.call("POST", "/v1/sessions", Some(body)).await
}

/// A sub-session of `parent` on the default (imp) target, attached to its process.
async fn sub_on_imp(d: &TestDaemon, parent: &str) -> String {
    let (status, body) = spawn_under(d, "sh", parent, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    d.wait_session(&id, "attached", |s| {
        s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    id
}

/// The pid of session `id`'s process in the simulator's imp `imp`.
fn pid_in(sim: &ImpdSim, imp: &str, id: &str) -> Option<i32> {
    let name = impd_client::exec_session_name(id);
    sim.imp(imp)?
        .sessions
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.pid)
}

#[actix_rt::test]
async fn a_sub_session_runs_in_its_parents_imp_and_its_kill_leaves_the_owner_running() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let sub = sub_on_imp(&d, &owner).await;
    let s = d.session(&sub).await;
    assert_eq!(s["parent"], json!(owner), "{s}");
    assert_eq!(
        s["hostKey"],
        json!(owner),
        "it shares the parent's host: {s}"
    );
    let o = d.session(&owner).await;
    assert!(o.get("parent").is_none_or(Value::is_null), "{o}");
    assert_eq!(o["hostKey"], json!(owner), "{o}");
    // One imp holds both processes, under one lease.
    assert_eq!(sim.imps().len(), 1, "{:#?}", sim.imps());
    assert!(pid_in(&sim, &imp, &owner).is_some() && pid_in(&sim, &imp, &sub).is_some());
    assert_eq!(sim.live_leases(&imp).len(), 1, "{:#?}", sim.imp(&imp));
    // The listing says the same.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    let listed = list["sessions"]
        .as_array()
        .and_then(|all| all.iter().find(|x| x["id"] == json!(sub)).cloned())
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        (&listed["parent"], &listed["hostKey"]),
        (&json!(owner), &json!(owner))
    );
    // Its kill ends its own process; the host and the owner run on.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{sub}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["exitReason"], "killed", "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    assert_eq!(d.session(&owner).await["alive"], true);
    d.submit(&owner, "echo owner-$((6*7))").await;
    d.wait_screen(&owner, "owner-42").await;
    assert_eq!(sim.live_leases(&imp).len(), 1, "the owner keeps the lease");
    d.stop().await;
}

#[actix_rt::test]
async fn a_sub_session_on_another_target_has_a_host_of_its_own() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), two_imp_targets(&sim)).await;
    let Remote { id: owner, .. } = spawn_remote(&d, &sim).await;
    for target in ["box2", "local"] {
        let (status, body) = spawn_under(&d, "sh", &owner, json!({"target": target})).await;
        assert_eq!(status, 201, "{target}: {body}");
        let s = &body["session"];
        assert_eq!(s["parent"], json!(owner), "{target}: {s}");
        assert_eq!(s["hostKey"], s["id"], "{target}: its own host: {s}");
    }
    // The other imp target made an imp of its own.
    sim.wait_until("two imps", |s| s.imps().len() == 2).await;
    d.stop().await;
}

#[actix_rt::test]
async fn an_unknown_parent_is_no_such_session_and_a_grandchild_hangs_under_the_top() {
    let d = TestDaemon::start().await;
    let (status, body) = spawn_under(&d, "sh", "no-such-parent", json!({})).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "no_such_session", "{body}");
    let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(
        sessions["sessions"],
        json!([]),
        "nothing spawned: {sessions}"
    );
    let top = d
        .spawn_with(json!({"agent": "sh", "cwd": "/tmp", "name": "top"}))
        .await;
    let top = id_of(&top);
    // A parent named by its name, as by its id.
    let (status, body) = spawn_under(&d, "sh", "top", json!({})).await;
    assert_eq!(status, 201, "{body}");
    let child = id_of(&body["session"]);
    assert_eq!(body["session"]["parent"], json!(top));
    assert_eq!(
        body["session"]["hostKey"], body["session"]["id"],
        "a local session has no host to share"
    );
    let (status, body) = spawn_under(&d, "sh", &child, json!({})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["session"]["parent"],
        json!(top),
        "one level deep: the grandchild hangs under the top"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn the_owners_sleep_takes_its_sub_session_along_and_its_revive_brings_both_back() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let sub = sub_on_imp(&d, &owner).await;
    let pids = (pid_in(&sim, &imp, &owner), pid_in(&sim, &imp, &sub));
    // A sub-session cannot sleep the host it shares.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{sub}/suspend"), None)
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["data"]["problem"], "host_shared", "{body}");
    let (status, body) = suspend_when_idle(&d, &owner).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["lastMsg"], "asleep", "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Sleeping));
    // The owner's answer comes once the sub-session is recorded asleep too.
    let s = d.session(&sub).await;
    assert_eq!(s["exitReason"], "suspended", "{s}");
    assert_eq!(s["lastMsg"], "asleep", "{s}");
    assert_eq!(s["lifecycle"]["harness"], "suspended", "{s}");
    // Asleep in its parent's host, it cannot be forgotten alone.
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{sub}"), None).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "unsupported_operation", "{body}");
    assert_eq!(body["error"]["data"]["problem"], "host_asleep", "{body}");
    // The owner's revive wakes the host, and the sub-session comes back with it.
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{owner}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&sub, "revived with its host", |s| {
        s["alive"] == true && s["lifecycle"]["attachment"] == "attached"
    })
    .await;
    d.submit(&sub, "echo sub-$((5*5))").await;
    d.wait_screen(&sub, "sub-25").await;
    d.submit(&owner, "echo owner-$((4*4))").await;
    d.wait_screen(&owner, "owner-16").await;
    assert_eq!(
        (pid_in(&sim, &imp, &owner), pid_in(&sim, &imp, &sub)),
        pids,
        "the same processes, woken"
    );
    d.stop().await;
}

/// The two-step forget of `id`; the second answer.
async fn forget_confirmed(d: &TestDaemon, id: &str) -> (u16, Value) {
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    let token = body["confirmToken"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {body}"))
        .to_string();
    d.call(
        "DELETE",
        &format!("/v1/sessions/{id}?confirm={token}"),
        None,
    )
    .await
}

#[actix_rt::test]
async fn forgetting_a_live_sub_session_keeps_the_host_and_destroying_the_owner_removes_both() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let first = sub_on_imp(&d, &owner).await;
    let (status, body) = forget_confirmed(&d, &first).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["destroyed"], false, "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    sim.wait_until("the sub-session's process ended", |s| {
        pid_in(s, &imp, &first).is_none()
            || s.imp(&imp).is_some_and(|i| {
                i.sessions
                    .iter()
                    .any(|x| x.name == impd_client::exec_session_name(&first) && x.exit.is_some())
            })
    })
    .await;
    assert_eq!(d.session(&owner).await["alive"], true);
    // The owner's destroy takes every session on its host.
    let second = sub_on_imp(&d, &owner).await;
    let (status, body) = forget_confirmed(&d, &owner).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["destroyed"], true, "{body}");
    assert!(sim.imp(&imp).is_none(), "the imp was destroyed");
    for id in [&owner, &second] {
        let (status, body) = d.call("GET", &format!("/v1/sessions/{id}"), None).await;
        assert_eq!(status, 404, "{id}: {body}");
    }
    let (_, fleet) = d.call("GET", "/v1/fleet", None).await;
    assert_eq!(fleet["fleet"], json!([]), "{fleet}");
    d.stop().await;
}

#[actix_rt::test]
async fn joining_a_brokered_host_needs_the_parents_auth_and_verifies_its_one_binding() {
    let (sim, _) = bindable_sim(&[("codex-key", "api.openai.com")]);
    let tmp = tempfile::tempdir().unwrap();
    let agent = sh_agent(
        "codex",
        "echo brokered-up; exec sleep 60",
        Some(auth(&["codex-key"], &["OPENAI_API_KEY"])),
    );
    let config = broker::config(&sim, &tmp.path().join("guest"), agent);
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let (status, body) = broker::spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let owner = id_of(&body["session"]);
    wait_auth(&d, &owner, "ready").await;
    let grants = sim.grants();
    // Another agent (no auth) would need a binding of its own on the same host.
    let (status, body) = spawn_under(&d, "sh", &owner, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "auth_binding_mismatch", "{body}");
    assert_eq!(body["error"]["data"]["parent"], json!(owner), "{body}");
    // The same agent joins, verifying the binding it finds: no second imp, no new grant.
    let (status, body) = spawn_under(&d, AGENT, &owner, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let sub = id_of(&body["session"]);
    assert_eq!(body["session"]["hostKey"], json!(owner), "{body}");
    d.wait_screen(&sub, "brokered-up").await;
    assert_eq!(sim.imps().len(), 1, "{:#?}", sim.imps());
    assert_eq!(sim.grants(), grants, "nothing granted again");
    let a = wait_auth(&d, &sub, "ready").await;
    assert_eq!(a["revision"], 1, "{a}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_restart_keeps_parent_and_host_key() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, .. } = spawn_remote(&d, &sim).await;
    let sub = sub_on_imp(&d, &owner).await;
    d.stop().await;
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let s = d
        .wait_session(&sub, "re-attached", |s| {
            s["lifecycle"]["attachment"] == "attached"
        })
        .await;
    assert_eq!(
        (&s["parent"], &s["hostKey"]),
        (&json!(owner), &json!(owner))
    );
    let row = d.fleet_row(&sub).await;
    assert_eq!(row["sessionId"], json!(sub), "{row}");
    d.submit(&sub, "echo back-$((2*9))").await;
    d.wait_screen(&sub, "back-18").await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_restore_revives_top_level_sessions_before_their_sub_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let top = id_of(&d.spawn("sh").await);
    // Spawned after its parent: newest first alone would revive it first.
    let (status, body) = spawn_under(&d, "sh", &top, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let sub = id_of(&body["session"]);
    d.stop().await;

    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let s = d.session(&sub).await;
    assert_eq!((&s["parent"], &s["hostKey"]), (&json!(top), &json!(sub)));
    let mut events = d.ws("/v1/events").await;
    let (status, body) = d.call("POST", "/v1/fleet/restore", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"restored": 2}));
    let mut revived = Vec::new();
    while revived.len() < 2 {
        match events.next_within(WITHIN).await {
            Some(Frame::Text(v)) if v["type"] == "session.state" => {
                let id = v["session"]["id"].as_str().unwrap_or_default().to_string();
                if v["session"]["alive"] == true && !revived.contains(&id) {
                    revived.push(id);
                }
            }
            Some(Frame::Close) | None => panic!("revived so far {revived:?}; {:?}", events.seen),
            Some(_) => {}
        }
    }
    assert_eq!(revived, [top, sub], "the parent first");
    d.stop().await;
}

#[actix_rt::test]
async fn a_sub_session_without_a_workspace_works_in_its_parents_and_leaves_it_on_forget() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let repo = TestRepo::with_files(3);
    let (status, body) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "sh", "cwd": repo.path(), "workspace": {"path": repo.path()}})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let parent = id_of(&body["session"]);
    let copy = body["session"]["workspace"]["dir"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string();
    // A cwd inside the source maps to the same place in the copy; anything else, its root.
    let inside = repo.path().join("src");
    for (cwd, expected) in [
        (inside.as_path(), Path::new(&copy).join("src")),
        (Path::new("/tmp"), Path::new(&copy).to_path_buf()),
    ] {
        let (status, body) = spawn_under(&d, "sh", &parent, json!({"cwd": cwd})).await;
        assert_eq!(status, 201, "{cwd:?}: {body}");
        let s = &body["session"];
        assert_eq!(s["cwd"], json!(expected), "{s}");
        assert!(s.get("workspace").is_none_or(Value::is_null), "{s}");
        // It owns no workspace: its forget leaves the parent's copy.
        let (status, body) = d
            .call("DELETE", &format!("/v1/sessions/{}", id_of(s)), None)
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(Path::new(&copy).join("src").is_dir(), "the copy stays");
    }
    assert_eq!(d.session(&parent).await["alive"], true);
    d.stop().await;
}

#[actix_rt::test]
async fn a_keyed_spawn_under_a_parent_replays_and_another_parent_is_a_conflict() {
    let d = TestDaemon::start().await;
    let a = id_of(&d.spawn("sh").await);
    let b = id_of(&d.spawn("sh").await);
    let under = |parent: &str| json!({"agent": "sh", "cwd": "/tmp", "parent": parent});
    let (status, replayed, first) = d.keyed_spawn("k-sub", &under(&a), false).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    assert_eq!(first["session"]["parent"], json!(a), "{first}");
    let (status, replayed, again) = d.keyed_spawn("k-sub", &under(&a), false).await;
    assert_eq!((status, replayed), (200, true), "{again}");
    assert_eq!(again["session"]["id"], first["session"]["id"]);
    // The parent is part of what the key promised.
    let (status, _, other) = d.keyed_spawn("k-sub", &under(&b), false).await;
    assert_eq!(status, 409, "{other}");
    assert_eq!(other["error"]["code"], "idempotency_conflict", "{other}");
    // The parent gone, its key still replays (spec §7.4: params are not checked again), and
    // a fresh key under it is refused.
    let (status, _) = d.call("DELETE", &format!("/v1/sessions/{a}"), None).await;
    assert_eq!(status, 200);
    let (status, replayed, again) = d.keyed_spawn("k-sub", &under(&a), false).await;
    assert_eq!((status, replayed), (200, true), "{again}");
    assert_eq!(again["session"]["id"], first["session"]["id"]);
    let (status, _, fresh) = d.keyed_spawn("k-new", &under(&a), false).await;
    assert_eq!(status, 404, "{fresh}");
    assert_eq!(fresh["error"]["code"], "no_such_session", "{fresh}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_live_sub_session_outlives_its_forgotten_parent_and_a_dead_one_goes_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let top = id_of(&d.spawn("sh").await);
    let (status, body) = spawn_under(&d, "sh", &top, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let sub = id_of(&body["session"]);
    let (status, body) = spawn_under(&d, "sh", &top, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let dead = id_of(&body["session"]);
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{dead}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{top}"), None).await;
    assert_eq!(status, 200, "{body}");
    atc_testkit::wait_until(WITHIN, "the dead sub-session is forgotten", async || {
        d.call("GET", &format!("/v1/sessions/{dead}"), None).await.0 == 404
    })
    .await;
    let s = d
        .wait_session(&sub, "top-level", |s| {
            s.get("parent").is_none_or(Value::is_null)
        })
        .await;
    assert_eq!(s["alive"], true, "{s}");
    // It can be a parent itself now, and its row says it stands alone.
    let (status, body) = spawn_under(&d, "sh", &sub, json!({})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["session"]["parent"], json!(sub), "{body}");
    d.stop().await;
    let d = TestDaemon::start_on(tmp.path(), test_config()).await;
    let s = d.session(&sub).await;
    assert!(s.get("parent").is_none_or(Value::is_null), "{s}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_sub_sessions_spawn_wakes_its_parents_sleeping_host_and_takes_the_lease() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let (status, body) = suspend_when_idle(&d, &owner).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Sleeping));
    let sub = sub_on_imp(&d, &owner).await;
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    assert_eq!(sim.live_leases(&imp).len(), 1, "{:#?}", sim.imp(&imp));
    d.submit(&sub, "echo woke-$((3*11))").await;
    d.wait_screen(&sub, "woke-33").await;
    // The owner stays as it was until it is revived.
    assert_eq!(d.session(&owner).await["lastMsg"], "asleep");
    d.stop().await;
}

#[actix_rt::test]
async fn a_parents_kill_stops_its_live_sub_sessions_wherever_they_run() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let on_host = sub_on_imp(&d, &owner).await;
    let (status, body) = spawn_under(&d, "sh", &owner, json!({"target": "local"})).await;
    assert_eq!(status, 201, "{body}");
    let here = id_of(&body["session"]);
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{owner}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    // Answered once the sub-sessions' ends are written too.
    for id in [&on_host, &here] {
        let s = d.session(id).await;
        assert_eq!(
            (&s["alive"], &s["exitReason"]),
            (&json!(false), &json!("killed")),
            "{s}"
        );
    }
    assert_eq!(
        sim.imp(&imp).map(|i| i.state),
        Some(ImpState::Running),
        "a kill sleeps no host"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_busy_sub_session_keeps_the_shared_host_awake_until_it_is_quiet() {
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), imp_config(&sim)).await;
    let Remote { id: owner, imp, .. } = spawn_remote(&d, &sim).await;
    let sub = sub_on_imp(&d, &owner).await;
    // The sub-session prints for a few seconds, then goes quiet; the owner is idle throughout
    // (its last output is a second old by the time the sleep is asked for).
    d.submit(
        &sub,
        "i=0; while [ $i -lt 80 ]; do echo tick-$i; sleep 0.05; i=$((i+1)); done; echo quiet-$((3*3))",
    )
    .await;
    d.wait_screen(&sub, "tick-20").await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{owner}/suspend"), None)
        .await;
    assert_eq!(
        status, 503,
        "the sub-session's output keeps the host awake: {body}"
    );
    assert_eq!(body["error"]["data"]["problem"], "busy", "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Running));
    assert_eq!(d.session(&sub).await["alive"], true);
    d.wait_screen(&sub, "quiet-9").await;
    let (status, body) = suspend_when_idle(&d, &owner).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sim.imp(&imp).map(|i| i.state), Some(ImpState::Sleeping));
    d.stop().await;
}
