//! The opening message of an `/exec` socket (protocol §9.3, §9.4): `start` or `attach`,
//! parsed and checked against impd's schema before anything is decided. Whether the imp, the
//! caller and the session allow it is `open`'s business.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::input::{FieldError, Fields};
use crate::session::{valid_session_name, ResumeFrom};

/// A `start` message.
#[derive(Debug)]
pub(super) struct Start {
    pub(super) name: String,
    pub(super) argv: Vec<String>,
    pub(super) tty: bool,
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<String>,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) session: Option<String>,
    pub(super) resume: Option<ResumeFrom>,
    pub(super) require_broker: bool,
    pub(super) tool: bool,
}

/// An `attach` message.
#[derive(Debug)]
pub(super) struct Attach {
    pub(super) name: String,
    pub(super) session: String,
    pub(super) size: Option<(u16, u16)>,
    pub(super) resume: Option<ResumeFrom>,
    pub(super) wake: bool,
    pub(super) require_broker: bool,
}

#[derive(Debug)]
pub(super) enum Open {
    Start(Start),
    Attach(Attach),
}

impl Open {
    pub(super) fn name(&self) -> &str {
        match self {
            Open::Start(s) => &s.name,
            Open::Attach(a) => &a.name,
        }
    }
}

fn resume_from(f: &Fields) -> Result<Option<ResumeFrom>, FieldError> {
    let Some(r) = f.opt_obj("resumeFrom")? else {
        return Ok(None);
    };
    Ok(Some(ResumeFrom {
        generation: r.str("executionGeneration")?,
        offset: r.int("offset", 0, i64::MAX)? as u64,
    }))
}

fn require_broker(f: &Fields) -> Result<bool, FieldError> {
    let list = f.opt_str_list("require")?.unwrap_or_default();
    if list.iter().any(|r| r != "broker") {
        return Err(FieldError {
            field: "require".into(),
            message: "only \"broker\" is known".into(),
        });
    }
    Ok(!list.is_empty())
}

fn bad(field: &str, message: &str) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Parses an opening message against impd's schema.
pub(super) fn parse_open(v: &Value) -> Result<Open, FieldError> {
    let f = Fields(v);
    let name = f.str("name")?;
    let session = f.opt_str("session")?;
    if let Some(s) = &session {
        if !valid_session_name(s) {
            return Err(bad("session", "must match ^[a-z0-9][a-z0-9-]{0,31}$"));
        }
    }
    let resume = resume_from(&f)?;
    if resume.is_some() && session.is_none() {
        return Err(bad("resumeFrom", "needs session"));
    }
    let cols = f.opt_int("cols", 1, 65535)?.map(|c| c as u16);
    let rows = f.opt_int("rows", 1, 65535)?.map(|r| r as u16);
    match v.get("type").and_then(Value::as_str) {
        Some("start") => {
            let tty = f.opt_bool("tty")?.ok_or_else(|| bad("tty", "required"))?;
            let argv = f.opt_str_list("argv")?.unwrap_or_default();
            let tool = match f.opt_str("tool")?.as_deref() {
                None => false,
                Some("tar") => true,
                Some(_) => return Err(bad("tool", "only \"tar\" is known")),
            };
            if argv.is_empty() && !tool {
                return Err(bad("argv", "needs at least one element"));
            }
            if session.is_some() && !tty {
                return Err(bad("session", "a session needs tty:true"));
            }
            let require_broker = require_broker(&f)?;
            if tool && (tty || session.is_some() || require_broker) {
                return Err(bad("tool", "takes no tty, session, env, cwd or require"));
            }
            if f.opt_bool("outer")? == Some(true) && (session.is_some() || require_broker) {
                return Err(bad("outer", "takes no session or require"));
            }
            f.opt_int("killGraceMs", 1, 60000)?;
            f.opt_bool("log")?;
            Ok(Open::Start(Start {
                name,
                argv,
                tty,
                env: f.opt_str_map("env")?.unwrap_or_default(),
                cwd: f.opt_str("cwd")?,
                cols: cols.unwrap_or(80),
                rows: rows.unwrap_or(24),
                session,
                resume,
                require_broker,
                tool,
            }))
        }
        Some("attach") => Ok(Open::Attach(Attach {
            name,
            session: session.ok_or_else(|| bad("session", "required"))?,
            size: cols.zip(rows),
            resume,
            wake: f.opt_bool("wake")?.unwrap_or(true),
            require_broker: require_broker(&f)?,
        })),
        _ => Err(bad("type", "the first message must be start or attach")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn start(require: Value) -> Value {
        json!({"type": "start", "name": "box", "argv": ["sh"], "tty": true,
               "session": "s1", "require": require})
    }

    #[test]
    fn require_knows_only_broker() {
        let Ok(Open::Start(s)) = parse_open(&start(json!(["broker"]))) else {
            panic!("a broker requirement is a start")
        };
        assert!(s.require_broker);
        let Ok(Open::Start(s)) = parse_open(&start(json!([]))) else {
            panic!("an empty requirement list is a start")
        };
        assert!(!s.require_broker);
        for bad in [
            json!(["tls"]),
            json!(["broker", "x"]),
            json!("broker"),
            json!([1]),
        ] {
            let e = parse_open(&start(bad.clone())).expect_err("a schema error");
            assert_eq!(e.field, "require", "{bad}");
        }
    }

    #[test]
    fn require_with_tool_or_outer_is_a_schema_error() {
        let tool = json!({"type": "start", "name": "box", "argv": [], "tty": false,
                          "tool": "tar", "require": ["broker"]});
        assert_eq!(parse_open(&tool).expect_err("tool").field, "tool");
        let outer = json!({"type": "start", "name": "box", "argv": ["sh"], "tty": false,
                           "outer": true, "require": ["broker"]});
        assert_eq!(parse_open(&outer).expect_err("outer").field, "outer");
    }
}
