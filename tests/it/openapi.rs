//! The OpenAPI document (`GET /v1/openapi.json`) against the live daemon: its routes are the
//! ones the router serves (and only those), and what every route answers, errors included,
//! and the first frames of both sockets validate against the document's schemas.

use std::collections::BTreeSet;

use atc_testkit::{agent_shells_daemon, hook, id_of, TestDaemon, WITHIN};
use serde_json::{json, Value};

const METHODS: [&str; 5] = ["GET", "POST", "PATCH", "DELETE", "PUT"];

/// The document as the daemon serves it (without a token: it is public).
async fn document(d: &TestDaemon) -> Value {
    let (status, doc) = d.call_with("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["openapi"], "3.1.0");
    doc
}

/// Every (METHOD, path template) the document describes.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            let upper = method.to_uppercase();
            if METHODS.contains(&upper.as_str()) {
                ops.insert((upper, path.clone()));
            }
        }
    }
    ops
}

/// `template` with each `{param}` segment replaced by `value`.
fn fill(template: &str, value: &str) -> String {
    template
        .split('/')
        .map(|seg| if seg.starts_with('{') { value } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// `doc`'s components made strict for testing: an object schema with declared properties
/// admits no others (and `Empty` none at all), so a field the daemon sends that its type lacks
/// fails the test. The document itself stays open, as wire types must tolerate new fields.
fn strict_components(doc: &Value) -> Value {
    fn tighten(v: &mut Value) {
        match v {
            Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".into(), Value::Bool(false));
                }
                map.values_mut().for_each(tighten);
            }
            Value::Array(items) => items.iter_mut().for_each(tighten),
            _ => {}
        }
    }
    let mut components = doc["components"].clone();
    tighten(&mut components);
    components["schemas"]["Empty"]["additionalProperties"] = Value::Bool(false);
    components
}

/// What is wrong with `instance` against `schema`, resolving `#/components/...` refs in `doc`
/// (made strict, see [`strict_components`]).
fn violations(doc: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": strict_components(doc),
        "allOf": [schema],
    });
    let validator = jsonschema::draft202012::new(&root)
        .unwrap_or_else(|e| panic!("the document's schema does not compile: {e}"));
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Asserts that `instance` matches `schema`.
fn check(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let errors = violations(doc, schema, instance);
    assert!(
        errors.is_empty(),
        "{what}: the answer does not match the document:\n{}\nanswer: {instance}",
        errors.join("\n")
    );
}

/// The schema of a component.
fn component(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// Validates one recorded answer against the document's response for (method, template,
/// status) and records the operation as covered.
struct Recorder {
    doc: Value,
    covered: BTreeSet<(String, String)>,
}

impl Recorder {
    fn record(&mut self, method: &str, template: &str, status: u16, body: &Value) {
        let what = format!("{method} {template} → {status}");
        let response =
            &self.doc["paths"][template][method.to_lowercase()]["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{what}: the document does not describe this status; answer: {body}"
        );
        let schema = &response["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{what}: no JSON schema in the document");
        check(&self.doc, schema, body, &what);
        self.covered
            .insert((method.to_string(), template.to_string()));
    }

    /// Calls `method path` and records its answer under `template`; answers the status and
    /// body.
    async fn call(
        &mut self,
        d: &TestDaemon,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (status, answer) = d.call(method, path, body).await;
        self.record(method, template, status, &answer);
        (status, answer)
    }
}

#[actix_rt::test]
async fn the_check_refuses_answers_that_break_the_document() {
    let d = TestDaemon::start().await;
    let doc = document(&d).await;
    let (_, health) = d.call_with("GET", "/v1/health", None, None).await;
    assert!(violations(&doc, &component("Health"), &health).is_empty());
    let mut extra = health.clone();
    extra["uptime"] = json!(1);
    let mut wrong = health.clone();
    wrong["status"] = json!("fine");
    for bad in [json!({"status": "ok"}), extra, wrong, json!({"foo": 1})] {
        assert!(
            !violations(&doc, &component("Health"), &bad).is_empty(),
            "{bad} passed as a Health"
        );
    }
    // Refs are followed into nested types: a descriptor with a state outside its set fails.
    let s = d.spawn("cat").await;
    let mut broken = json!({ "session": s });
    assert!(violations(&doc, &component("SessionEnvelope"), &broken).is_empty());
    broken["session"]["state"] = json!("asleep");
    assert!(!violations(&doc, &component("SessionEnvelope"), &broken).is_empty());
    assert!(!violations(&doc, &component("Empty"), &json!({"x": 1})).is_empty());
    d.stop().await;
}

#[actix_rt::test]
async fn the_document_lists_exactly_the_routes_the_router_serves() {
    let d = TestDaemon::start().await;
    let doc = document(&d).await;
    let ops = documented(&doc);

    // The document is the route table, both ways.
    let table: BTreeSet<(String, String)> = atc::server::route_table::ROUTES
        .iter()
        .map(|r| (r.method.as_str().to_string(), r.path.to_string()))
        .collect();
    assert_eq!(ops, table, "the document and the route table differ");

    // Every documented route is served: none answers `unknown_method`. Quit goes last, as it
    // stops the daemon.
    let quit = ("POST".to_string(), "/v1/daemon/quit".to_string());
    for (method, template) in ops.iter().filter(|op| **op != quit) {
        let path = fill(template, "no-such-thing");
        let (status, body) = d.call(method, &path, Some(json!({}))).await;
        assert_ne!(
            body["error"]["code"], "unknown_method",
            "{method} {path} is documented but not routed ({status})"
        );
    }

    // And nothing else is: every other method on a documented path, and a made-up path,
    // answers `unknown_method`.
    let paths: BTreeSet<&String> = ops.iter().map(|(_, p)| p).collect();
    for template in paths {
        for method in METHODS {
            if ops.contains(&(method.to_string(), template.clone())) {
                continue;
            }
            let path = fill(template, "no-such-thing");
            let (status, body) = d.call(method, &path, Some(json!({}))).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (404, Some("unknown_method")),
                "{method} {path} is routed but not documented: {body}"
            );
        }
    }
    let (status, body) = d.call("GET", "/v1/made-up", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("unknown_method"))
    );
    // Paths inside a routed prefix (the router gathers `/v1/sessions/{id}/...` under one
    // scope) that no route names: a trailing slash, an empty or an extra segment.
    for (method, path) in [
        ("GET", "/v1/sessions/x/"),
        ("GET", "/v1/sessions/"),
        ("POST", "/v1/sessions//kill"),
        ("POST", "/v1/sessions/x/kill/"),
        ("GET", "/v1/sessions/x/nope"),
        ("GET", "/v1/sessions/x/auth/revoke"),
        ("POST", "/v1/permissions/x/y"),
    ] {
        let (status, body) = d.call(method, path, Some(json!({}))).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("unknown_method")),
            "{method} {path}: {body}"
        );
    }

    let (status, body) = d.call(&quit.0, &quit.1, None).await;
    assert_eq!(status, 200, "{body}");
    d.stop().await;
}

#[actix_rt::test]
async fn every_route_answers_what_the_document_says() {
    let (d, _tmp) = agent_shells_daemon().await;
    let doc = document(&d).await;
    let mut r = Recorder {
        doc: doc.clone(),
        covered: BTreeSet::new(),
    };
    r.covered
        .insert(("GET".to_string(), "/v1/openapi.json".to_string()));

    let (status, health) = d.call_with("GET", "/v1/health", None, None).await;
    r.record("GET", "/v1/health", status, &health);
    r.call(&d, "GET", "/v1/daemon", "/v1/daemon", None).await;
    r.call(&d, "GET", "/v1/agents", "/v1/agents", None).await;

    // Sessions: a fresh spawn (201), then a replay of its Idempotency-Key (200).
    let spawn = json!({"agent": "claude", "cwd": "/tmp", "name": "doc"});
    let (status, first) = keyed_spawn(&d, &spawn, "doc-key").await;
    assert_eq!(status, 201, "{first}");
    r.record("POST", "/v1/sessions", status, &first);
    let (status, replay) = keyed_spawn(&d, &spawn, "doc-key").await;
    assert_eq!(status, 200, "{replay}");
    r.record("POST", "/v1/sessions", status, &replay);
    let id = id_of(&first["session"]);
    let one = "/v1/sessions/{id}";
    let at = |suffix: &str| format!("/v1/sessions/{id}{suffix}");
    let (status, _) = r
        .call(
            &d,
            "POST",
            "/v1/sessions",
            "/v1/sessions",
            Some(json!({"cwd": ""})),
        )
        .await;
    assert_eq!(status, 400);

    r.call(&d, "GET", "/v1/sessions", "/v1/sessions", None)
        .await;
    r.call(&d, "GET", one, &at(""), None).await;
    let (status, _) = r
        .call(&d, "GET", one, "/v1/sessions/no-such-thing", None)
        .await;
    assert_eq!(status, 404);
    let (status, unauthorized) = d.call_with("GET", &at(""), None, None).await;
    assert_eq!(status, 401);
    r.record("GET", one, status, &unauthorized);

    // Both sockets' first frames, and a state frame on the attach socket after a rename.
    let mut events = d.ws("/v1/events").await;
    let added = events.next_text("session.added").await;
    check(
        &doc,
        &component("FleetEvent"),
        &added,
        "events: session.added",
    );
    r.covered
        .insert(("GET".to_string(), "/v1/events".to_string()));
    let (mut ws, attached, _) = d.attach(&id, "cols=80&rows=24").await;
    check(
        &doc,
        &component("AttachFrame"),
        &attached,
        "attach: attached",
    );
    r.covered
        .insert(("GET".to_string(), "/v1/sessions/{id}/attach".to_string()));
    r.call(
        &d,
        "PATCH",
        one,
        &at(""),
        Some(json!({"name": "doc2", "pinned": true})),
    )
    .await;
    let state = ws.next_text("state").await;
    check(&doc, &component("AttachFrame"), &state, "attach: state");
    let renamed = events.next_text("session.renamed").await;
    check(
        &doc,
        &component("FleetEvent"),
        &renamed,
        "events: session.renamed",
    );
    ws.close().await;
    events.close().await;

    r.call(
        &d,
        "POST",
        "/v1/sessions/{id}/input",
        &at("/input"),
        Some(json!({"data": "x"})),
    )
    .await;
    let (status, _) = r
        .call(
            &d,
            "POST",
            "/v1/sessions/{id}/input",
            &at("/input"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 400);
    r.call(
        &d,
        "POST",
        "/v1/sessions/{id}/submit",
        &at("/submit"),
        Some(json!({"text": ""})),
    )
    .await;
    r.call(
        &d,
        "POST",
        "/v1/sessions/{id}/resize",
        &at("/resize"),
        Some(json!({"cols": 100, "rows": 30})),
    )
    .await;
    r.call(&d, "POST", "/v1/sessions/{id}/ack", &at("/ack"), None)
        .await;
    r.call(&d, "GET", "/v1/sessions/{id}/screen", &at("/screen"), None)
        .await;
    // A workspace's status: refused for a session without one, answered for one with one.
    let workspace = "/v1/sessions/{id}/workspace";
    let (status, _) = r.call(&d, "GET", workspace, &at("/workspace"), None).await;
    assert_eq!(status, 422);
    let repo = atc_testkit::git_repo::TestRepo::with_files(1);
    let body = json!({"agent": "cat", "cwd": repo.path(), "workspace": {"path": repo.path()}});
    let (status, with_workspace) = r
        .call(&d, "POST", "/v1/sessions", "/v1/sessions", Some(body))
        .await;
    assert_eq!(status, 201, "{with_workspace}");
    let ws_id = id_of(&with_workspace["session"]);
    let (status, _) = r
        .call(
            &d,
            "GET",
            workspace,
            &format!("/v1/sessions/{ws_id}/workspace"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = r
        .call(
            &d,
            "DELETE",
            one,
            &format!("/v1/sessions/{ws_id}?force=true"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let orphans = "/v1/workspaces/orphans";
    let (status, _) = r.call(&d, "GET", orphans, orphans, None).await;
    assert_eq!(status, 200);
    let prune = "/v1/workspaces/prune";
    let (status, _) = r.call(&d, "POST", prune, prune, Some(json!({}))).await;
    assert_eq!(status, 200);
    r.call(
        &d,
        "GET",
        "/v1/sessions/{id}/resume-command",
        &at("/resume-command"),
        None,
    )
    .await;
    // A local target cannot sleep a host: the refusal is documented too.
    let (status, _) = r
        .call(
            &d,
            "POST",
            "/v1/sessions/{id}/suspend",
            &at("/suspend"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 422);
    // A local session's host holds no broker binding: the refusal is documented too.
    for (method, template, suffix) in [
        ("GET", "/v1/sessions/{id}/auth", "/auth"),
        ("POST", "/v1/sessions/{id}/auth/revoke", "/auth/revoke"),
    ] {
        let (status, body) = r.call(&d, method, template, &at(suffix), None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("auth_blocked"))
        );
    }
    // Its agent has no `auth`, so there is nothing to rebind to.
    let (status, body) = r
        .call(
            &d,
            "POST",
            "/v1/sessions/{id}/auth/rebind",
            &at("/auth/rebind"),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("auth_binding_invalid"))
    );

    // A hook report: a trail event and (for a notification asking something) a permission.
    let (_, page) = r
        .call(&d, "GET", "/v1/events/trail", "/v1/events/trail", None)
        .await;
    let cursor = page["cursor"].as_str().expect("a cursor").to_string();
    let report = json!({"hook_event_name": "Notification", "message": "Allow?", "session_id": "c1a1c1a1-0000-4000-8000-000000000001"});
    hook(&d, &id, report).await;
    let (status, page) = r
        .call(
            &d,
            "GET",
            "/v1/events/trail",
            &format!("/v1/events/trail?cursor={cursor}&waitMs=10000"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        !page["events"].as_array().is_none_or(Vec::is_empty),
        "{page}"
    );
    let (status, _) = r
        .call(
            &d,
            "GET",
            "/v1/events/trail",
            "/v1/events/trail?limit=0",
            None,
        )
        .await;
    assert_eq!(status, 400);
    r.call(&d, "GET", "/v1/permissions", "/v1/permissions", None)
        .await;
    let (status, _) = r
        .call(
            &d,
            "POST",
            "/v1/permissions/{id}",
            "/v1/permissions/p-none",
            Some(json!({"decision": "allow"})),
        )
        .await;
    assert_eq!(status, 404);

    // Kill a live session, then kill the dead one (which forgets it).
    let (status, _) = r
        .call(&d, "POST", "/v1/sessions/{id}/kill", &at("/kill"), None)
        .await;
    assert_eq!(status, 200);
    d.wait_session(&id, "dead", |s| s["alive"] == false).await;
    r.call(
        &d,
        "POST",
        "/v1/sessions/{id}/revive",
        &at("/revive"),
        Some(json!({})),
    )
    .await;
    d.wait_session(&id, "alive", |s| s["alive"] == true).await;
    r.call(&d, "POST", "/v1/sessions/{id}/kill", &at("/kill"), None)
        .await;
    d.wait_session(&id, "dead", |s| s["alive"] == false).await;
    let (status, forgot) = r
        .call(&d, "POST", "/v1/sessions/{id}/kill", &at("/kill"), None)
        .await;
    assert_eq!(
        (status, &forgot["forgotten"]),
        (200, &json!(true)),
        "{forgot}"
    );

    let other = id_of(&d.spawn("cat").await);
    r.call(&d, "DELETE", one, &format!("/v1/sessions/{other}"), None)
        .await;

    r.call(&d, "GET", "/v1/fleet", "/v1/fleet", None).await;
    r.call(&d, "POST", "/v1/fleet/restore", "/v1/fleet/restore", None)
        .await;
    r.call(&d, "GET", "/v1/dirs", "/v1/dirs", None).await;
    r.call(&d, "POST", "/v1/tickets", "/v1/tickets", None).await;
    r.call(&d, "GET", "/v1/principals", "/v1/principals", None)
        .await;
    // An unrouted path answers the error body too.
    let (status, body) = d.call("GET", "/v1/made-up", None).await;
    assert_eq!(status, 404);
    check(&doc, &component("ErrorBody"), &body, "GET /v1/made-up");

    // The metrics are exposition text, not JSON: the document names their content type.
    let (status, metrics) = d.call("GET", "/metrics", None).await;
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.as_str().is_some_and(|t| t.ends_with("# EOF\n")),
        "{metrics}"
    );
    let content = &doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
    assert!(
        content[atc::metrics::scrape::CONTENT_TYPE].is_object(),
        "{content}"
    );
    r.covered
        .insert(("GET".to_string(), "/metrics".to_string()));

    r.call(&d, "POST", "/v1/daemon/quit", "/v1/daemon/quit", None)
        .await;

    let missing: Vec<_> = documented(&doc).difference(&r.covered).cloned().collect();
    assert!(
        missing.is_empty(),
        "routes with no recorded answer: {missing:?}"
    );
    d.stop().await;
}

/// `POST /v1/sessions` with an `Idempotency-Key`.
async fn keyed_spawn(d: &TestDaemon, body: &Value, key: &str) -> (u16, Value) {
    let (status, _, body) = d.keyed_spawn(key, body, false).await;
    (status, body)
}

/// Answers only an imp target gives (a host's layers, capabilities beyond a PTY's, sleeping
/// a host, the two-step forget) against the document, on the impd simulator.
#[actix_rt::test]
async fn imp_target_answers_match_the_document_too() {
    use atc_testkit::impd_sim::{ImpdSim, SimOptions};
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().expect("temp dir");
    let config = atc_testkit::with_imp_target(
        atc_testkit::test_config(),
        &sim.url(),
        sim.token_file(),
        json!({}),
    );
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let doc = document(&d).await;
    let mut r = Recorder {
        doc,
        covered: BTreeSet::new(),
    };
    let one = "/v1/sessions/{id}";
    r.call(&d, "GET", "/v1/agents", "/v1/agents", None).await;
    let atc_testkit::Remote { id, .. } = atc_testkit::spawn_remote(&d, &sim).await;
    let at = |suffix: &str| format!("/v1/sessions/{id}{suffix}");
    r.call(&d, "GET", one, &at(""), None).await;

    // Sleep the host once its output has settled (it answers `busy` until then).
    let mut last = (0, Value::Null);
    let slept =
        atc_testkit::poll_every(std::time::Duration::from_millis(100), WITHIN, async || {
            let (status, body) = r
                .call(
                    &d,
                    "POST",
                    "/v1/sessions/{id}/suspend",
                    &at("/suspend"),
                    None,
                )
                .await;
            assert!(status == 200 || status == 503, "suspend: {status} {body}");
            last = (status, body);
            (status == 200).then_some(())
        })
        .await;
    let (status, body) = last;
    assert!(slept.is_some(), "suspend: {status} {body}");
    r.call(&d, "GET", "/v1/sessions", "/v1/sessions", None)
        .await;
    let (status, body) = r
        .call(&d, "POST", "/v1/sessions/{id}/revive", &at("/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");

    // The two-step forget: a token, a wrong token refused, then the host destroyed.
    let (status, step_one) = r.call(&d, "DELETE", one, &at(""), None).await;
    assert_eq!(status, 200, "{step_one}");
    let token = step_one["confirmToken"]
        .as_str()
        .expect("a token")
        .to_string();
    let (status, _) = r.call(&d, "DELETE", one, &at("?confirm=nope"), None).await;
    assert_eq!(status, 400);
    let (status, gone) = r
        .call(&d, "DELETE", one, &at(&format!("?confirm={token}")), None)
        .await;
    assert_eq!((status, &gone["destroyed"]), (200, &json!(true)), "{gone}");
    r.call(&d, "GET", "/v1/fleet", "/v1/fleet", None).await;
    d.stop().await;
}

#[actix_rt::test]
async fn the_attach_route_describes_watch_mode() {
    let d = TestDaemon::start().await;
    let doc = document(&d).await;
    let params = doc["paths"]["/v1/sessions/{id}/attach"]["get"]["parameters"]
        .as_array()
        .expect("attach has parameters")
        .clone();
    let mode = params
        .iter()
        .find(|p| p["name"] == "mode")
        .unwrap_or_else(|| panic!("no mode parameter in {params:?}"));
    assert_eq!(mode["in"], "query");
    assert_eq!(mode["schema"]["enum"], json!(["watch"]));
    d.stop().await;
}
