//! Every route that takes a JSON body reads it into its `atc-protocol` type, strictly (issue
//! 33, "Tests"): a field of the wrong type answers `bad_args` naming its path, a field the
//! request does not have answers `bad_args` naming it (refused, never silently dropped), and a
//! field the spec reserves for a part not built yet answers `unsupported` naming it. The table
//! below has a row per body-taking route, and the test fails when the OpenAPI document lists a
//! body on a route the table lacks, so a new route cannot skip these checks.

use std::collections::BTreeSet;

use atc_testkit::{id_of, TestDaemon};
use serde_json::{json, Value};

/// One body-taking route: a body it accepts, and a field of it given the wrong type.
struct Row {
    method: &'static str,
    /// The document's path template (`{id}` is filled in).
    template: &'static str,
    /// A body the route reads without complaint.
    valid: Value,
    /// A field's path and a value of the wrong type for it.
    wrong: (&'static str, Value),
}

fn rows() -> Vec<Row> {
    let row = |method, template, valid, wrong| Row {
        method,
        template,
        valid,
        wrong,
    };
    vec![
        row(
            "POST",
            "/v1/sessions",
            json!({"agent": "sh", "cwd": "/tmp", "cols": 100, "rows": 30}),
            ("cols", json!("wide")),
        ),
        row(
            "PATCH",
            "/v1/sessions/{id}",
            json!({"name": "renamed", "pinned": true}),
            ("pinned", json!("yes")),
        ),
        row(
            "POST",
            "/v1/sessions/{id}/input",
            json!({"data": "x"}),
            ("data", json!(5)),
        ),
        row(
            "POST",
            "/v1/sessions/{id}/submit",
            json!({"text": "x"}),
            ("text", json!(["x"])),
        ),
        row(
            "POST",
            "/v1/sessions/{id}/resize",
            json!({"cols": 90, "rows": 30}),
            ("rows", json!(-1)),
        ),
        row(
            "POST",
            "/v1/sessions/{id}/revive",
            json!({"cols": 90, "rows": 30}),
            ("cols", json!(1.5)),
        ),
        row(
            "POST",
            "/v1/sessions/{id}/suspend",
            json!({"force": false}),
            ("force", json!("true")),
        ),
        row(
            "POST",
            "/v1/permissions/{id}",
            json!({"decision": "allow"}),
            ("decision", json!({"allow": true})),
        ),
        row(
            "POST",
            "/v1/workspaces/prune",
            json!({"force": false}),
            ("force", json!("yes")),
        ),
    ]
}

/// `template` with `{id}` replaced by `id`.
fn fill(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

#[track_caller]
fn assert_refused(answer: &(u16, Value), status: u16, code: &str, field: &str, what: &str) {
    let (got, body) = answer;
    assert_eq!(*got, status, "{what}: {body}");
    assert_eq!(body["error"]["code"], code, "{what}: {body}");
    assert_eq!(body["error"]["data"]["field"], field, "{what}: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(field)),
        "{what}: the message names the field: {body}"
    );
}

#[actix_rt::test]
async fn every_body_taking_route_has_a_row() {
    let d = TestDaemon::start().await;
    let (status, doc) = d.call_with("GET", "/v1/openapi.json", None, None).await;
    assert_eq!(status, 200, "{doc}");
    let mut with_body = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if op.get("requestBody").is_some() {
                with_body.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let in_table: BTreeSet<_> = rows()
        .iter()
        .map(|r| (r.method.to_string(), r.template.to_string()))
        .collect();
    assert_eq!(
        with_body, in_table,
        "a route takes a body: give it a row in tests/request_bodies.rs"
    );
    // Each row's wrong field is one its body type has, and its valid body is one the
    // document accepts as is (no property it does not declare).
    for r in rows() {
        let op = &doc["paths"][r.template][r.method.to_lowercase()];
        let schema = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .and_then(|s| s.rsplit('/').next())
            .expect("a named request schema");
        let properties = &doc["components"]["schemas"][schema]["properties"];
        assert!(
            properties.get(r.wrong.0).is_some(),
            "{schema}: {}",
            r.wrong.0
        );
        for field in r.valid.as_object().expect("an object").keys() {
            assert!(properties.get(field).is_some(), "{schema}: {field}");
        }
    }
    d.stop().await;
}

#[actix_rt::test]
async fn wrong_types_and_unknown_fields_are_bad_args_naming_them() {
    let d = TestDaemon::start().await;
    let spawned = d.spawn("sh").await;
    let id = id_of(&spawned);
    for r in rows() {
        let path = fill(r.template, &id);
        let (field, value) = &r.wrong;
        let mut wrong = r.valid.clone();
        wrong[*field] = value.clone();
        let what = format!("{} {} {wrong}", r.method, r.template);
        let answer = d.call(r.method, &path, Some(wrong)).await;
        assert_refused(&answer, 400, "bad_args", field, &what);

        let mut unknown = r.valid.clone();
        unknown["notAField"] = json!(1);
        let what = format!("{} {} {unknown}", r.method, r.template);
        let answer = d.call(r.method, &path, Some(unknown)).await;
        assert_refused(&answer, 400, "bad_args", "notAField", &what);
    }
    // Nothing was spawned or changed by any of it.
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    let sessions = list["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{list}");
    assert_eq!(sessions[0]["name"], spawned["name"], "{list}");
    assert_eq!(sessions[0]["pinned"], false, "{list}");
    d.stop().await;
}

#[actix_rt::test]
async fn fields_reserved_for_parts_not_built_are_unsupported_naming_them() {
    let d = TestDaemon::start().await;
    // Tried as a new user would (issue 33): each used to answer 201 with a plain session.
    // `workspace`, `limits` and `parent` are built now (tests/it/workspaces.rs,
    // tests/it/limits.rs, tests/it/sub_sessions.rs).
    for (field, value) in [
        ("prompt", json!("hello")),
        ("resume", json!(true)),
        ("scope", json!(["local"])),
    ] {
        let body = json!({"agent": "sh", "cwd": "/tmp", field: value});
        let answer = d.call("POST", "/v1/sessions", Some(body.clone())).await;
        assert_refused(&answer, 422, "unsupported", field, &body.to_string());
    }
    let (_, list) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(list["sessions"], json!([]), "nothing was spawned: {list}");
    d.stop().await;
}
