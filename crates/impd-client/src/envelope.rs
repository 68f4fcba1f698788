//! The oRPC "RPC protocol" envelope (spec §3), both ways: `{"json": input}` out, and an HTTP
//! status plus body in, turned into the output value or an [`ImpPortError`]. Pure functions, so
//! every answer shape impd can give is unit-tested here without a socket.
//!
//! `meta` (oRPC's type annotations for Dates and the like) is ignored: the client parses the
//! few date fields it reads as plain RFC 3339 strings.

use serde_json::{json, Value};

use super::error::{ImpPortError, ImpdCode};

/// The request path of a procedure: `imps.get` → `/rpc/imps/get`.
pub fn procedure_path(procedure: &str) -> String {
    format!("/rpc/{}", procedure.replace('.', "/"))
}

/// The request body for an input. A `null` input (procedures without input, like
/// `system.info`) goes as `{}`, which impd accepts like an absent body.
pub fn request_body(input: &Value) -> Vec<u8> {
    let body = if input.is_null() {
        json!({})
    } else {
        json!({ "json": input })
    };
    body.to_string().into_bytes()
}

/// Turns an HTTP answer into the procedure's output or its error.
///
/// - 2xx: the `json` member of the body (`null` when absent or the body is empty).
/// - 401: always `UNAUTHORIZED`, whatever the body (spec §2: key on the status).
/// - an oRPC error envelope: impd's `code`, `message`, `data`, with the HTTP status.
/// - a 404 without an envelope: `UNKNOWN_PROCEDURE` (older impd, or a wrong base URL).
/// - anything else: `HTTP_ERROR` with the status.
pub fn decode_response(status: u16, body: &[u8]) -> Result<Value, ImpPortError> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    if (200..300).contains(&status) {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        let Some(Value::Object(mut top)) = parsed else {
            return Err(ImpPortError::bad_message(
                "impd answered a call with a body that is not a JSON object",
            )
            .with_status(status));
        };
        return Ok(top.remove("json").unwrap_or(Value::Null));
    }
    if let Some(mut err) = parsed.as_ref().and_then(envelope_error) {
        err.status = Some(status);
        if status == 401 {
            err.code = ImpdCode::Unauthorized;
        }
        return Err(err);
    }
    let text = String::from_utf8_lossy(body);
    let snippet: String = text.trim().chars().take(200).collect();
    let err = match status {
        401 => ImpPortError::unauthorized("impd refused the token (HTTP 401)"),
        404 => ImpPortError::new(
            ImpdCode::UnknownProcedure,
            format!("impd has no such procedure (HTTP 404: {snippet})"),
        ),
        _ => ImpPortError::new(
            ImpdCode::HttpError,
            format!("impd answered HTTP {status}: {snippet}"),
        ),
    };
    Err(err.with_status(status))
}

/// The error inside `{"json":{"code","message","data",...}}`, if the body is one.
fn envelope_error(body: &Value) -> Option<ImpPortError> {
    let inner = body.get("json")?.as_object()?;
    let code = inner.get("code")?.as_str()?;
    let message = inner
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(ImpPortError {
        code: ImpdCode::parse(code),
        message: message.to_string(),
        status: None,
        data: inner.get("data").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ImpdCode;

    #[test]
    fn paths_and_bodies() {
        assert_eq!(procedure_path("imps.get"), "/rpc/imps/get");
        assert_eq!(procedure_path("system.info"), "/rpc/system/info");
        assert_eq!(request_body(&Value::Null), b"{}");
        let body: Value = serde_json::from_slice(&request_body(&json!({"name": "a"}))).unwrap();
        assert_eq!(body, json!({"json": {"name": "a"}}));
    }

    #[test]
    fn success_unwraps_json_and_ignores_meta() {
        let body =
            br#"{"json":{"name":"x","until":"2026-01-01T00:00:00.000Z"},"meta":[[1,"until"]]}"#;
        let v = decode_response(200, body).unwrap();
        assert_eq!(v["until"], "2026-01-01T00:00:00.000Z");
        assert_eq!(decode_response(200, b"").unwrap(), Value::Null);
        assert_eq!(decode_response(200, b"{}").unwrap(), Value::Null);
    }

    #[test]
    fn non_object_success_is_a_bad_message() {
        assert!(decode_response(200, b"not json")
            .unwrap_err()
            .is(ImpdCode::BadMessage));
    }

    #[test]
    fn error_envelope_keeps_code_status_and_data() {
        let body = br#"{"json":{"defined":true,"code":"LEASED","status":409,"message":"imp is leased","data":{"leases":[],"otherCount":2}}}"#;
        let e = decode_response(409, body).unwrap_err();
        assert!(e.is(ImpdCode::Leased));
        assert_eq!(e.status, Some(409));
        assert_eq!(e.message, "imp is leased");
        assert_eq!(e.data["otherCount"], 2);
    }

    #[test]
    fn error_without_data_has_null_data() {
        let body =
            br#"{"json":{"defined":true,"code":"LEASE_NOT_HELD","status":409,"message":"m"}}"#;
        let e = decode_response(409, body).unwrap_err();
        assert!(e.is(ImpdCode::LeaseNotHeld));
        assert!(e.data.is_null());
    }

    #[test]
    fn any_401_is_unauthorized() {
        let bare = decode_response(401, br#"{"error":"unauthorized"}"#).unwrap_err();
        assert!(bare.is(ImpdCode::Unauthorized));
        assert_eq!(bare.status, Some(401));
        let orpc = br#"{"json":{"defined":false,"code":"UNAUTHORIZED","status":401,"message":"token gone"}}"#;
        assert!(decode_response(401, orpc)
            .unwrap_err()
            .is(ImpdCode::Unauthorized));
        assert!(decode_response(401, b"")
            .unwrap_err()
            .is(ImpdCode::Unauthorized));
    }

    #[test]
    fn plain_404_is_an_unknown_procedure_not_not_found() {
        let e = decode_response(404, b"not found").unwrap_err();
        assert!(e.is(ImpdCode::UnknownProcedure));
        assert_eq!(e.status, Some(404));
        let nf = br#"{"json":{"defined":true,"code":"NOT_FOUND","status":404,"message":"no imp","data":{"kind":"imp","name":"a"}}}"#;
        let e = decode_response(404, nf).unwrap_err();
        assert!(e.is(ImpdCode::NotFound));
        assert_eq!(e.data["kind"], "imp");
    }

    #[test]
    fn other_statuses_without_envelope_are_http_errors() {
        let e = decode_response(502, b"<html>bad gateway</html>").unwrap_err();
        assert!(e.is(ImpdCode::HttpError));
        assert_eq!(e.status, Some(502));
    }
}
