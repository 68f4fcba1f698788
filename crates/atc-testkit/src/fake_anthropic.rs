//! A fake of Anthropic's Messages API on loopback, for the real Claude Code in the tests: just
//! enough of `POST /v1/messages` (streamed as server-sent events, as Claude Code asks for) and
//! `POST /v1/messages/count_tokens` for it to run the turns a [`FakeModel`] script says.
//!
//! Also here: the private `HOME` a real Claude starts in without a question (onboarding done,
//! the folder trusted, the API key approved), and the agent entry that points it at the fake.

use atc::agents::AgentKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use actix_web::{web, HttpResponse};
use atc::config::AgentConfig;
use serde_json::{json, Value};

use crate::fake_model::{serve, Asked, FakeModel, Reply, Served};

/// The key the tests give Claude. Claude Code asks once whether to use a key from the
/// environment; the private home approves this one (by its last 20 characters, as Claude
/// Code keeps them).
pub const API_KEY: &str = "sk-ant-api03-atc-test-key-0000000000000000";

/// Serves the Messages API for `model` until dropped.
pub fn start(model: &FakeModel) -> Served {
    serve(model, routes)
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/messages", web::post().to(messages))
        .route("/v1/messages/count_tokens", web::post().to(count_tokens))
        .default_service(web::to(|| async {
            HttpResponse::NotFound().json(error("not_found_error", "the fake has no such route"))
        }));
}

async fn count_tokens() -> HttpResponse {
    HttpResponse::Ok().json(json!({"input_tokens": 100}))
}

async fn messages(model: web::Data<FakeModel>, body: web::Bytes) -> HttpResponse {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return HttpResponse::BadRequest().json(error("invalid_request_error", "not JSON"));
    };
    let asked = Asked {
        path: "/v1/messages".into(),
        model: body["model"].as_str().unwrap_or_default().to_string(),
        effort: body["output_config"]["effort"].as_str().map(str::to_string),
        turn: body["tools"].as_array().is_some_and(|t| !t.is_empty()),
        body: body.clone(),
    };
    let name = asked.model.clone();
    let reply = model.answer(asked);
    let message_id = format!("msg_fake_{}", model.asked().len());
    let (block, stop_reason) = match &reply {
        Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Reply::Bash(command) => (
            json!({
                "type": "tool_use",
                "id": format!("toolu_fake_{}", model.asked().len()),
                "name": "Bash",
                "input": {"command": command, "description": "Run the scripted command"},
            }),
            "tool_use",
        ),
    };
    if body["stream"] != json!(true) {
        return HttpResponse::Ok().json(json!({
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": name,
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }));
    }
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .body(stream(&message_id, &name, &block, stop_reason))
}

/// The events of one streamed message with one content block: a text block is sent as a
/// text delta, a tool call as its input's JSON in one delta, as the real API streams them.
fn stream(message_id: &str, model: &str, block: &Value, stop_reason: &str) -> String {
    let (start, delta) = match block["type"].as_str() {
        Some("tool_use") => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
    };
    let events = [
        json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1},
        }}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 10}}),
        json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

fn error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Every text the user typed in a request's messages, oldest first: what a test compares
/// with what it submitted.
pub fn user_texts(asked: &Asked) -> Vec<String> {
    let mut texts = Vec::new();
    for message in asked.body["messages"].as_array().into_iter().flatten() {
        if message["role"] != "user" {
            continue;
        }
        match &message["content"] {
            Value::String(s) => texts.push(s.clone()),
            Value::Array(blocks) => texts.extend(
                blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    // Claude Code adds its own reminders as text blocks of the same message.
                    .filter(|t| !t.starts_with("<system-reminder>"))
                    .map(str::to_string),
            ),
            _ => {}
        }
    }
    texts
}

/// A private home for a real Claude Code working in `cwd`: onboarding done, `cwd` trusted,
/// [`API_KEY`] approved. Answers the home's path.
pub fn prepare_home(root: &Path, cwd: &Path) -> PathBuf {
    let home = root.join("claude-home");
    std::fs::create_dir_all(home.join(".claude")).expect("claude home");
    let approved = &API_KEY[API_KEY.len() - 20..];
    let state = json!({
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": "2.1.332",
        "numStartups": 1,
        "projects": {
            cwd.display().to_string(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true,
                "allowedTools": [],
            },
        },
        "customApiKeyResponses": {"approved": [approved], "rejected": []},
    });
    std::fs::write(home.join(".claude.json"), state.to_string()).expect("write .claude.json");
    home
}

/// The `claude` agent entry of a test config: the real binary at `bin`, in `home`, talking
/// to the fake at `url`. Permission prompts are on (`--permission-mode default`; Claude Code
/// 2.1 defaults to an auto mode that asks a model instead), and nothing else leaves the
/// machine: no updater, no telemetry.
pub fn agent(bin: &Path, home: &Path, url: &str) -> AgentConfig {
    let env: BTreeMap<String, String> = [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", url.to_string()),
        ("ANTHROPIC_API_KEY", API_KEY.to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    AgentConfig {
        bin: bin.display().to_string(),
        args: vec!["--permission-mode".into(), "default".into()],
        env,
        kind: Some(AgentKind::Claude),
        ..Default::default()
    }
}
