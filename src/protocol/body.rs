//! Request bodies read into `atc-protocol`'s request types ([`read`]).
//!
//! The text is parsed once by [`strict_json`] (a key given twice is refused, the body must be
//! an object), a field the spec reserves for a part not built yet is refused as `unsupported`,
//! and the object is then deserialized into the type through `serde_path_to_error`, so every
//! refusal names the bad field's path (`cols`, `env.FOO`): serde_json's own errors name only a
//! line and column. The types refuse fields they do not declare (`deny_unknown_fields`).
//! Checks serde cannot express (ranges, emptiness, names) are the handlers' own.

use serde_json::{Map, Value};

use atc_protocol::requests::RequestBody;
use atc_protocol::TermSize;

use super::params::dim;
use super::strict_json::{self, StrictJsonError};
use super::RequestError;

/// Reads a JSON body as `T`. An empty body counts as `{}`, so `POST .../suspend` needs none.
pub fn read<T: RequestBody>(bytes: &[u8]) -> Result<T, RequestError> {
    let fields = if bytes.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match strict_json::parse(bytes) {
            Ok(Value::Object(fields)) => fields,
            Ok(_) => return Err(RequestError::BodyNotObject),
            Err(StrictJsonError::Syntax(e)) => return Err(RequestError::BodyNotJson(e)),
            Err(StrictJsonError::DuplicateKey(field)) => {
                return Err(RequestError::DuplicateKey { field })
            }
        }
    };
    if let Some(field) = T::RESERVED.iter().find(|f| fields.contains_key(**f)) {
        return Err(RequestError::Reserved {
            field: field.to_string(),
        });
    }
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(refusal)
}

/// A terminal size a body gave, each dimension within [`atc_protocol::DIM_RANGE`] (serde checks only that
/// they are integers that fit).
pub fn size(cols: u16, rows: u16) -> Result<TermSize, RequestError> {
    Ok(TermSize {
        cols: dim("cols", u64::from(cols))?,
        rows: dim("rows", u64::from(rows))?,
    })
}

/// The refusal of a body serde could not read, naming the field by its path.
fn refusal(e: serde_path_to_error::Error<serde_json::Error>) -> RequestError {
    use serde_path_to_error::Segment;
    let mut path = String::new();
    for segment in e.path().iter() {
        path = match segment {
            Segment::Map { key } => strict_json::key_path(&path, key),
            Segment::Seq { index } => strict_json::index_path(&path, *index),
            Segment::Enum { variant } => strict_json::key_path(&path, variant),
            Segment::Unknown => strict_json::key_path(&path, "?"),
        };
    }
    // serde's words for these two are stable (`de::Error::unknown_field`/`missing_field`);
    // the path of an unknown field already ends at its key, a missing one's is its parent.
    let detail = e.inner().to_string();
    if detail.starts_with("unknown field `") {
        return RequestError::UnknownField { field: path };
    }
    if let Some(name) = detail
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        return RequestError::BadField {
            field: strict_json::key_path(&path, name),
            problem: "is required".into(),
        };
    }
    RequestError::BadField {
        field: if path.is_empty() { "body".into() } else { path },
        problem: format!("is invalid: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_protocol::requests::{ResizeRequest, SpawnRequest, UpdateRequest};
    use serde::Deserialize;

    fn wire<T: RequestBody + std::fmt::Debug>(text: &str) -> (String, String) {
        let e = read::<T>(text.as_bytes()).unwrap_err();
        let wire = crate::server::error::Error::from(e).wire();
        (
            wire.code.as_str().to_string(),
            wire.data["field"].as_str().unwrap_or_default().to_string(),
        )
    }

    fn bad(field: &str) -> (String, String) {
        ("bad_args".into(), field.into())
    }

    #[test]
    fn malformed_json_names_the_body() {
        assert_eq!(wire::<UpdateRequest>("{nope"), bad("body"));
        assert_eq!(wire::<UpdateRequest>("[1]"), bad("body"));
    }

    #[test]
    fn a_repeated_key_is_refused_by_name_not_resolved() {
        assert_eq!(
            wire::<SpawnRequest>(r#"{"agent":"sh","agent":"cat"}"#),
            bad("agent")
        );
    }

    #[test]
    fn an_empty_body_is_an_empty_object() {
        assert_eq!(
            read::<UpdateRequest>(b"  ").unwrap(),
            UpdateRequest::default()
        );
    }

    #[test]
    fn wrong_types_missing_and_unknown_fields_name_the_field() {
        assert_eq!(wire::<UpdateRequest>(r#"{"name":5}"#), bad("name"));
        assert_eq!(wire::<UpdateRequest>(r#"{"pinned":"yes"}"#), bad("pinned"));
        assert_eq!(wire::<ResizeRequest>(r#"{"cols":80}"#), bad("rows"));
        assert_eq!(
            wire::<ResizeRequest>(r#"{"cols":-1,"rows":1}"#),
            bad("cols")
        );
        assert_eq!(
            wire::<ResizeRequest>(r#"{"cols":1.5,"rows":1}"#),
            bad("cols")
        );
        assert_eq!(wire::<SpawnRequest>(r#"{"cwd":null}"#), bad("cwd"));
        assert_eq!(
            wire::<SpawnRequest>(r#"{"cwd":"/","bogus":1}"#),
            bad("bogus")
        );
        // A null optional field is an absent one.
        let r = read::<UpdateRequest>(br#"{"name":null}"#).unwrap();
        assert_eq!(r.name, None);
    }

    #[test]
    fn dims_outside_range_name_the_field() {
        for (bad, field) in [
            (r#"{"cols":0,"rows":1}"#, "cols"),
            (r#"{"cols":4097,"rows":1}"#, "cols"),
            (r#"{"cols":"x","rows":1}"#, "cols"),
            (r#"{"cols":1,"rows":70000}"#, "rows"),
        ] {
            let e = read::<ResizeRequest>(bad.as_bytes()).and_then(|r| size(r.cols, r.rows));
            let wire = crate::server::error::Error::from(e.unwrap_err()).wire();
            assert_eq!(wire.data["field"], field, "{bad}");
        }
        let r = read::<ResizeRequest>(br#"{"cols":4096,"rows":1}"#).unwrap();
        assert_eq!(
            size(r.cols, r.rows).unwrap(),
            TermSize {
                cols: 4096,
                rows: 1
            }
        );
    }

    #[test]
    fn a_nested_field_is_named_by_its_path() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            effort: String,
        }
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Outer {
            options: Inner,
            env: std::collections::BTreeMap<String, String>,
            list: Vec<Inner>,
        }
        impl RequestBody for Outer {}
        let ok = r#""env":{},"list":[]"#;
        assert_eq!(
            wire::<Outer>(&format!(r#"{{"options":{{"effort":3}},{ok}}}"#)),
            bad("options.effort")
        );
        assert_eq!(
            wire::<Outer>(&format!(r#"{{"options":{{}},{ok}}}"#)),
            bad("options.effort")
        );
        assert_eq!(
            wire::<Outer>(&format!(r#"{{"options":{{"effort":"x","what":1}},{ok}}}"#)),
            bad("options.what")
        );
        assert_eq!(
            wire::<Outer>(r#"{"options":{"effort":"x"},"env":{"FOO":1},"list":[]}"#),
            bad("env.FOO")
        );
        assert_eq!(
            wire::<Outer>(r#"{"options":{"effort":"x"},"env":{},"list":[{"effort":1}]}"#),
            bad("list[0].effort")
        );
    }

    #[test]
    fn a_reserved_field_is_unsupported_by_name() {
        for field in SpawnRequest::RESERVED {
            let text = format!(r#"{{"cwd":"/tmp","{field}":{{}}}}"#);
            assert_eq!(
                wire::<SpawnRequest>(&text),
                ("unsupported".to_string(), field.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_long_unknown_key_is_named_cut() {
        let long = "k".repeat(10_000);
        let (_, field) = wire::<UpdateRequest>(&format!(r#"{{"{long}":1}}"#));
        assert!(field.chars().count() <= 129, "{}", field.len());
    }
}
