//! The token walk and the Origin check. Every (path, method) of the daemon's own OpenAPI
//! document is asked without a token and with a wrong one, path parameters filled with a real
//! session's id, and must answer 401; only the documented public routes (health, the document
//! itself) may answer without one. Every WebSocket upgrade (attach, watch, events), let in by
//! the token in the header, by the token in the query and by a ticket, is refused from a
//! foreign Origin, while the same upgrade from no Origin opens (so a refusal for some other
//! reason cannot pass for the Origin check).

use std::time::Duration;

use serde_json::Value;

use super::raw::{self, Answer};
use super::Seen;

/// Routes the spec lets anyone reach.
const PUBLIC: &[&str] = &["/v1/health", "/v1/openapi.json"];

/// A wrong token of the right shape (64 hex digits, like a minted one).
const WRONG: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// What the walk found.
#[derive(Debug, Default)]
pub struct Walk {
    /// (method, path) pairs asked.
    pub routes: u64,
    /// Requests that should have been refused with 401 and were not, each described.
    pub misses: Vec<String>,
    /// Public routes that did not answer 200 without a token.
    pub public_broken: Vec<String>,
}

/// `{name}` segments of `template` filled: `{id}` with `session`, others with a made-up id.
fn fill(template: &str, session: &str) -> String {
    template
        .split('/')
        .map(|seg| match seg {
            "{id}" => session.to_string(),
            s if s.starts_with('{') => "00000000-0000-4000-8000-000000000000".to_string(),
            s => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Walks `doc`'s paths against the daemon at `addr`.
pub async fn walk(addr: &str, doc: &Value, session: &str, seen: &mut Seen) -> Walk {
    let mut out = Walk::default();
    let Some(paths) = doc["paths"].as_object() else {
        out.misses
            .push("the OpenAPI document has no paths object".into());
        return out;
    };
    let within = Duration::from_secs(10);
    for (template, item) in paths {
        let Some(methods) = item.as_object() else {
            continue;
        };
        for method in methods.keys() {
            let method = method.to_uppercase();
            if !matches!(
                method.as_str(),
                "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"
            ) {
                continue;
            }
            out.routes += 1;
            let path = fill(template, session);
            let body = (method != "GET").then_some(&b"{}"[..]);
            if PUBLIC.contains(&template.as_str()) {
                let req = raw::request(&method, &path, addr, &[], body);
                match raw::exchange(addr, &req, within).await {
                    Ok(a) if a.status == 200 => seen.answer(&a),
                    Ok(a) => out
                        .public_broken
                        .push(format!("{method} {path}: {}", a.status)),
                    Err(e) => out.public_broken.push(format!("{method} {path}: {e}")),
                }
                continue;
            }
            let wrong = format!("Bearer {WRONG}");
            let cases: [(&str, Vec<(&str, &str)>); 4] = [
                ("no token", vec![]),
                ("a wrong token", vec![("Authorization", wrong.as_str())]),
                (
                    "another scheme",
                    vec![("Authorization", "Basic dXNlcjpwYXNz")],
                ),
                ("an empty bearer", vec![("Authorization", "Bearer ")]),
            ];
            for (what, headers) in cases {
                let req = raw::request(&method, &path, addr, &headers, body);
                check_401(&mut out, seen, &method, &path, what, &req).await;
            }
            // A token in the query counts only on upgrades; a wrong one there opens nothing.
            let upgrade_path = format!("{path}?access_token={WRONG}&cols=80&rows=24");
            let req = raw::upgrade(&upgrade_path, addr, &[]);
            check_401(
                &mut out,
                seen,
                &method,
                &path,
                "a wrong query token on an upgrade",
                &req,
            )
            .await;
        }
    }
    out
}

async fn check_401(
    out: &mut Walk,
    seen: &mut Seen,
    method: &str,
    path: &str,
    what: &str,
    req: &[u8],
) {
    let addr = seen.addr.clone();
    // An upgrade is always a GET, whatever route it walks.
    let method = if req.starts_with(b"GET ") {
        "GET"
    } else {
        method
    };
    match raw::exchange(&addr, req, Duration::from_secs(10)).await {
        Ok(a) => {
            seen.answer(&a);
            if a.status != 401 || !is_unauthorized(&a) {
                out.misses.push(format!(
                    "{method} {path} with {what}: {} {}",
                    a.status,
                    String::from_utf8_lossy(&a.body)
                ));
            }
        }
        Err(e) => out.misses.push(format!("{method} {path} with {what}: {e}")),
    }
}

fn is_unauthorized(a: &Answer) -> bool {
    serde_json::from_slice::<Value>(&a.body)
        .map(|v| v["error"]["code"] == "unauthorized")
        .unwrap_or(false)
}

/// How a socket is let in.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Header,
    Query,
    Ticket,
}

/// What the Origin check found.
#[derive(Debug, Default)]
pub struct Origins {
    /// Upgrades tried from a foreign Origin.
    pub tried: u64,
    /// Of those, refused with 403 `forbidden_origin`.
    pub refused: u64,
    /// The same upgrades from no Origin (the control).
    pub control_tried: u64,
    /// Of those, opened (101).
    pub control_opened: u64,
    /// What went otherwise, described.
    pub problems: Vec<String>,
}

/// Foreign Origins a browser page elsewhere would send.
const FOREIGN: &[&str] = &[
    "http://evil.example",
    "null",
    "http://127.0.0.1:1",
    "https://localhost.evil.example",
];

/// Every socket route, every way in, every foreign Origin; and each once without an Origin.
pub async fn origins(addr: &str, token: &str, session: &str, seen: &mut Seen) -> Origins {
    let mut out = Origins::default();
    let sockets = [
        (
            "attach",
            format!("/v1/sessions/{session}/attach?cols=80&rows=24"),
        ),
        (
            "watch",
            format!("/v1/sessions/{session}/attach?cols=80&rows=24&mode=watch"),
        ),
        ("events", "/v1/events?x=1".to_string()),
    ];
    for (name, path) in &sockets {
        for entry in [Entry::Header, Entry::Query, Entry::Ticket] {
            for origin in FOREIGN.iter().copied().map(Some).chain([None]) {
                let (path, bearer) = match entry {
                    Entry::Header => (path.clone(), Some(format!("Bearer {token}"))),
                    Entry::Query => (format!("{path}&access_token={token}"), None),
                    Entry::Ticket => match ticket(addr, token, seen).await {
                        Ok(t) => (format!("{path}&ticket={t}"), None),
                        Err(e) => {
                            out.problems.push(format!("no ticket for {name}: {e}"));
                            continue;
                        }
                    },
                };
                let mut headers: Vec<(&str, &str)> = Vec::new();
                if let Some(b) = &bearer {
                    headers.push(("Authorization", b));
                }
                if let Some(o) = origin {
                    headers.push(("Origin", o));
                }
                let req = raw::upgrade(&path, addr, &headers);
                let got = raw::exchange(addr, &req, Duration::from_secs(10)).await;
                let what = format!("{name} by {entry:?} from {}", origin.unwrap_or("no Origin"));
                match (origin, got) {
                    (Some(_), Ok(a)) => {
                        out.tried += 1;
                        let forbidden = serde_json::from_slice::<Value>(&a.body)
                            .map(|v| v["error"]["code"] == "forbidden_origin")
                            .unwrap_or(false);
                        if a.status == 403 && forbidden {
                            out.refused += 1;
                        } else {
                            out.problems.push(format!("{what}: {}", a.status));
                        }
                        seen.answer(&a);
                    }
                    (None, Ok(a)) => {
                        out.control_tried += 1;
                        if a.status == 101 {
                            out.control_opened += 1;
                        } else {
                            out.problems.push(format!("{what}: {}", a.status));
                        }
                        seen.answer(&a);
                    }
                    (Some(_), Err(e)) => {
                        out.tried += 1;
                        out.problems.push(format!("{what}: {e}"));
                    }
                    (None, Err(e)) => {
                        out.control_tried += 1;
                        out.problems.push(format!("{what}: {e}"));
                    }
                }
            }
        }
    }
    out
}

/// A fresh ticket from `POST /v1/tickets`.
async fn ticket(addr: &str, token: &str, seen: &mut Seen) -> Result<String, String> {
    let bearer = format!("Bearer {token}");
    let req = raw::request(
        "POST",
        "/v1/tickets",
        addr,
        &[("Authorization", &bearer)],
        Some(b"{}"),
    );
    let a = raw::exchange(addr, &req, Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())?;
    seen.answer(&a);
    let v: Value = serde_json::from_slice(&a.body).map_err(|e| e.to_string())?;
    v["ticket"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} {v}", a.status))
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_parameters_are_filled() {
        assert_eq!(
            super::fill("/v1/sessions/{id}/attach", "abc"),
            "/v1/sessions/abc/attach"
        );
        assert_eq!(
            super::fill("/v1/permissions/{id}", "s"),
            "/v1/permissions/s"
        );
        assert!(super::fill("/v1/x/{other}", "s").ends_with("-000000000000"));
    }
}
