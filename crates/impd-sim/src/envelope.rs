//! impd's oRPC "RPC protocol" envelope: `{"json": input}` in, `{"json": output, "meta": [...]}`
//! out, errors as `{"json": {defined, code, status, message, data}}` (protocol §3).
//!
//! Procedures build their output with [`date`] for every Date field; [`encode`] turns those
//! markers into ISO strings and the `meta` entries (`[1, ...path]`) oRPC sends for them, so no
//! procedure has to track paths by hand.

use serde_json::{json, Map, Value};

use super::clock::{iso, Millis};

/// Key of the marker object a Date is carried in until [`encode`] flattens it.
const DATE_MARKER: &str = "$impdSimDate";

/// A Date value inside an output under construction.
pub fn date(ms: Millis) -> Value {
    json!({ DATE_MARKER: iso(ms) })
}

/// An optional Date: `null` stays `null` (and gets no `meta` entry).
pub fn opt_date(ms: Option<Millis>) -> Value {
    ms.map(date).unwrap_or(Value::Null)
}

/// Flattens date markers into strings and returns the `meta` list that flags them.
pub fn encode(mut v: Value) -> (Value, Vec<Value>) {
    let mut meta = Vec::new();
    let mut path = Vec::new();
    flatten(&mut v, &mut path, &mut meta);
    (v, meta)
}

fn flatten(v: &mut Value, path: &mut Vec<Value>, meta: &mut Vec<Value>) {
    if let Some(s) = v
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get(DATE_MARKER))
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        let mut entry = vec![json!(1)];
        entry.extend(path.iter().cloned());
        meta.push(Value::Array(entry));
        *v = Value::String(s);
        return;
    }
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(json!(i));
                flatten(item, path, meta);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                path.push(json!(k));
                flatten(item, path, meta);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The body of a successful answer.
pub fn success_body(output: Value) -> Value {
    let (json, meta) = encode(output);
    if meta.is_empty() {
        json!({ "json": json })
    } else {
        json!({ "json": json, "meta": meta })
    }
}

/// An error as impd's contract defines it. Also used for `/exec` `error` messages, which carry
/// the same code and data.
#[derive(Clone, Debug)]
pub struct ImpdError {
    pub code: &'static str,
    pub status: u16,
    pub message: String,
    pub data: Option<Value>,
}

impl ImpdError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ImpdError {
        ImpdError {
            code,
            status: status_of(code),
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> ImpdError {
        self.data = Some(data);
        self
    }

    /// `NOT_FOUND {kind, name}`.
    pub fn not_found(kind: &str, name: &str) -> ImpdError {
        ImpdError::new("NOT_FOUND", format!("{kind} {name} not found"))
            .with_data(json!({"kind": kind, "name": name}))
    }

    /// `BAD_REQUEST` with oRPC's validation `issues`.
    pub fn bad_request(path: &str, message: impl Into<String>) -> ImpdError {
        let message = message.into();
        ImpdError::new("BAD_REQUEST", "Input validation failed").with_data(json!({
            "issues": [{"message": message, "path": [path]}]
        }))
    }

    /// The HTTP error body, dates flattened.
    pub fn body(&self) -> Value {
        let mut inner = Map::new();
        inner.insert("defined".into(), json!(true));
        inner.insert("code".into(), json!(self.code));
        inner.insert("status".into(), json!(self.status));
        inner.insert("message".into(), json!(self.message));
        if let Some(d) = &self.data {
            inner.insert("data".into(), d.clone());
        }
        let (json, meta) = encode(Value::Object(inner));
        if meta.is_empty() {
            json!({ "json": json })
        } else {
            json!({ "json": json, "meta": meta })
        }
    }

    /// The `/exec` `error` message (dates as plain strings; sockets carry no `meta`).
    pub fn exec_message(&self) -> Value {
        let mut m = json!({"type": "error", "code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            m["data"] = encode(d.clone()).0;
        }
        m
    }
}

/// HTTP status per code (protocol §3); codes only sockets use map to 409/500 as impd's do.
fn status_of(code: &str) -> u16 {
    match code {
        "BAD_REQUEST" => 400,
        "UNAUTHORIZED" => 401,
        "FORBIDDEN" => 403,
        "NOT_FOUND" => 404,
        "CONFLICT" | "INVALID_STATE" | "INVALID_RESUME" | "LEASED" | "LEASE_NOT_HELD"
        | "AGENT_OUTDATED" | "MOVING" | "NO_SESSION" | "SESSION_LIMIT" => 409,
        "PRECONDITION_FAILED" => 412,
        "RAM_BUDGET_EXCEEDED" | "SERVICE_UNAVAILABLE" => 503,
        "DISK_FULL" => 507,
        _ => 500,
    }
}

/// Reads the request envelope: an empty body, `{}`, `{"json": null}` all mean "no input";
/// `meta` is accepted and ignored (none of the inputs carry special types).
pub fn parse_input(body: &[u8]) -> Result<Value, ImpdError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ImpdError::new("BAD_REQUEST", format!("malformed request body: {e}")))?;
    match v {
        Value::Object(mut o) => Ok(o.remove("json").unwrap_or(Value::Null)),
        _ => Err(ImpdError::new(
            "BAD_REQUEST",
            "the request body must be an object",
        )),
    }
}
