//! A fake of OpenAI's Responses API on loopback, speaking just enough of it for the real
//! Codex CLI to run scripted turns: `POST /v1/responses` answered as a server-sent event
//! stream, and `GET /v1/models` (an empty catalogue) for a Codex that asks for one.
//!
//! Each request is recorded through [`FakeModel::answer`] (model, reasoning effort, body). A
//! request that carries tools is a turn of the conversation; Codex's side requests carry none.
//! One of them is its thread's title: after a thread's first prompt (once per thread), Codex
//! 0.171.0 runs a turn of its own on an ephemeral read-only thread, asking for `{"title": …}`
//! under a strict JSON schema. The fake answers it with [`TITLE`], so that Codex takes it (an
//! answer that is not the schema's makes Codex fall back to the prompt's text).
//!
//! Codex 0.171.0's own shell tool is `exec_command` (`{"cmd": ...}`); a [`Reply::Bash`] asks
//! for it with escalated permissions, which is what makes Codex ask the user first under its
//! `on-request` approval policy.

use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use crate::fake_model::{serve, Asked, FakeModel, Reply, Served};

/// The tool a [`Reply::Bash`] calls: Codex 0.171.0's shell.
pub const SHELL_TOOL: &str = "exec_command";

/// How the prompt of Codex's title request begins (its last user message).
pub const TITLE_PROMPT: &str = "Generate a concise, single-line task title";

/// The title the fake gives a thread.
pub const TITLE: &str = "Name the fruit";

/// Numbers the responses, so their ids are unique however requests interleave.
static RESPONSES: AtomicUsize = AtomicUsize::new(0);

/// Serves the Responses API for `model` until dropped; point Codex's provider `base_url` at
/// `<url>/v1`.
pub fn start(model: &FakeModel) -> Served {
    serve(model, routes)
}

fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/v1/responses", web::post().to(responses))
        .route("/v1/models", web::get().to(models));
}

async fn models() -> HttpResponse {
    HttpResponse::Ok().json(json!({"models": [], "data": []}))
}

async fn responses(model: web::Data<FakeModel>, body: web::Bytes) -> HttpResponse {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return HttpResponse::BadRequest().body(format!("not JSON: {e}")),
    };
    let title = is_title_request(&body);
    let asked = Asked {
        path: "/v1/responses".into(),
        model: body["model"].as_str().unwrap_or_default().to_string(),
        effort: body["reasoning"]["effort"].as_str().map(str::to_string),
        turn: body["tools"].as_array().is_some_and(|t| !t.is_empty()),
        body,
    };
    let n = RESPONSES.fetch_add(1, Ordering::Relaxed);
    let reply = match model.answer(asked) {
        _ if title => Reply::Text(json!({ "title": TITLE }).to_string()),
        reply => reply,
    };
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .body(event_stream(n, &reply))
}

/// The events of one response: created, the output item (a message streamed as one text
/// delta, or a function call), completed with its usage. Ids only need to be unique within
/// the fake's life; `n` (the request's number) makes them so.
fn event_stream(n: usize, reply: &Reply) -> String {
    let id = format!("resp_{n}");
    let (added, deltas, done) = match reply {
        Reply::Text(text) => {
            let item_id = format!("msg_{n}");
            let empty = json!({"type": "message", "id": item_id, "role": "assistant",
                "status": "in_progress", "content": []});
            let delta = json!({"type": "response.output_text.delta", "item_id": item_id,
                "output_index": 0, "content_index": 0, "delta": text});
            let done = json!({"type": "message", "id": item_id, "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]});
            (empty, vec![delta], done)
        }
        Reply::Bash(cmd) => {
            let arguments = json!({
                "cmd": cmd,
                "sandbox_permissions": "require_escalated",
                "justification": format!("May I run `{cmd}`?"),
            })
            .to_string();
            let call = json!({"type": "function_call", "id": format!("fc_{n}"),
                "call_id": format!("call_{n}"), "name": SHELL_TOOL, "arguments": arguments,
                "status": "completed"});
            (call.clone(), Vec::new(), call)
        }
    };
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": id, "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
    ];
    events.extend(deltas);
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": done}));
    events.push(json!({"type": "response.completed", "response": {
        "id": id, "status": "completed",
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15},
    }}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// Whether a Responses request is Codex's title request: no tools, and a last user message
/// that begins with [`TITLE_PROMPT`].
pub fn is_title_request(body: &Value) -> bool {
    let tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    !tools && last_user_text(body).is_some_and(|t| t.starts_with(TITLE_PROMPT))
}

/// The text of the last user message of a Responses request (what was typed), if any.
pub fn last_user_text(body: &Value) -> Option<String> {
    body["input"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?
        .get("content")?
        .as_array()?
        .iter()
        .rev()
        .find_map(|c| c["text"].as_str())
        .map(str::to_string)
}

/// Whether a Responses request's input holds the output of a tool call (the turn after a
/// shell command ran).
pub fn has_tool_output(body: &Value) -> bool {
    body["input"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|i| i["type"] == "function_call_output" || i["type"] == "custom_tool_call_output")
    })
}

/// Every user text in a request's input, oldest first (a resumed conversation carries its
/// earlier prompts again).
pub fn user_texts(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter_map(|c| c["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
