//! What must hold for the decoders of what impd sends, whatever the bytes: the oRPC envelope
//! (`envelope::decode_response`) and the `/exec` socket's binary and text messages
//! (`exec_messages`). Shared by the fuzz targets and the property tests in `tests/it/decoders.rs`.

#![allow(dead_code)] // Each harness uses the checks of its own decoders.

use bytes::Bytes;
use impd_client::envelope::{decode_response, request_body};
use impd_client::error::ImpdCode;
use impd_client::exec_messages::{decode_data, decode_server_text, encode_data, STDERR, STDOUT};
use impd_client::ExecEvent;
use serde_json::Value;

/// An HTTP answer: success gives the `json` member, which the request encoder wraps back into
/// a body that decodes to the same value; failure carries the status, and 401 is always
/// `UNAUTHORIZED`.
pub fn envelope(status: u16, body: &[u8]) {
    match decode_response(status, body) {
        Ok(value) => {
            assert!(
                (200..300).contains(&status),
                "{status} decoded as a success"
            );
            let again = request_body(&value);
            let back = decode_response(200, &again).expect("an encoded body decodes");
            assert!(same_json(&back, &value), "{value} came back as {back}");
        }
        Err(e) => {
            assert_eq!(e.status, Some(status), "{e:?}");
            if status == 401 {
                assert_eq!(e.code, ImpdCode::Unauthorized, "{e:?}");
            }
        }
    }
}

/// A binary `/exec` message: only stdout and stderr flow from impd, and what decodes
/// re-encodes to the same message.
pub fn exec_binary(message: &[u8]) {
    if let Ok((channel, bytes)) = decode_data(Bytes::copy_from_slice(message)) {
        assert!(channel == STDOUT || channel == STDERR, "channel {channel}");
        assert_eq!(&encode_data(channel, &bytes)[..], message);
    }
}

/// A text `/exec` message: never a panic; a decoded event is one of those impd sends.
pub fn exec_text(text: &[u8]) {
    match decode_server_text(text) {
        Ok(None) | Err(_) => {}
        Ok(Some(ExecEvent::Started(_) | ExecEvent::Exit { .. }))
        | Ok(Some(ExecEvent::Detached { .. } | ExecEvent::Error(_))) => {}
        Ok(Some(other)) => panic!("a text message decoded as {other:?}"),
    }
}

/// Equal JSON, with floats compared to their last bits (serde_json reads floats to within an
/// ulp unless built with `float_roundtrip`).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || ((x - y) / x).abs() < 1e-15,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}
