//! The one parse of JSON text a client sent: request bodies, the attach socket's control
//! frames and trail cursors all go through [`parse`]. It is serde_json's parse, except that an
//! object naming a key twice is refused instead of resolved to its last value: two readers of
//! `{"agent":"sh","agent":"cat"}` (a proxy or a log that keeps the first, the daemon that
//! would keep the last) must never disagree about what was asked.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The longest key path a refusal names; a client may send keys of any length.
const MAX_PATH_CHARS: usize = 128;

/// Why a client's JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// Not JSON at all (serde_json's detail: what and where).
    #[error("{0}")]
    Syntax(String),
    /// An object names this key twice; nested keys are joined with `.`, array items are `[i]`.
    #[error("'{0}' is given more than once")]
    DuplicateKey(String),
}

/// Parses `bytes` as one JSON value, refusing repeated keys at any depth.
pub fn parse(bytes: &[u8]) -> Result<Value, StrictJsonError> {
    let repeated = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Strict {
        path: String::new(),
        repeated: &repeated,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (parsed, repeated.into_inner()) {
        (_, Some(path)) => Err(StrictJsonError::DuplicateKey(path)),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(StrictJsonError::Syntax(e.to_string())),
    }
}

/// Builds a [`Value`] as serde_json's own visitor does, knowing where in the text it is.
struct Strict<'a> {
    /// Where this value sits: empty at the top.
    path: String,
    /// The first repeated key found, by path (the error serde carries out is only text).
    repeated: &'a RefCell<Option<String>>,
}

/// The path of `key` inside the value at `parent` (empty at the top): nested keys joined with
/// `.`, the empty key named `""` (so a refusal never names an empty path), and the whole cut
/// to [`MAX_PATH_CHARS`]. Every refusal that names a place in a client's JSON names it so.
pub fn key_path(parent: &str, key: &str) -> String {
    let name = if key.is_empty() { "\"\"" } else { key };
    match parent.is_empty() {
        true => capped(name.to_string()),
        false => capped(format!("{parent}.{name}")),
    }
}

/// The path of item `index` of the array at `parent`.
pub fn index_path(parent: &str, index: usize) -> String {
    capped(format!("{parent}[{index}]"))
}

fn capped(path: String) -> String {
    match path.chars().count() > MAX_PATH_CHARS {
        true => path.chars().take(MAX_PATH_CHARS).collect::<String>() + "…",
        false => path,
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text has no NaN or infinity; serde_json's own visitor maps them to null too.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict {
            path: index_path(&self.path, items.len()),
            repeated: self.repeated,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = key_path(&self.path, &key);
            if fields.contains_key(&key) {
                *self.repeated.borrow_mut() = Some(path);
                return Err(de::Error::custom("a key is given more than once"));
            }
            let value = map.next_value_seed(Strict {
                path,
                repeated: self.repeated,
            })?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_repeated_key_is_refused_by_its_path_at_any_depth() {
        let dup = |text: &str| match parse(text.as_bytes()) {
            Err(StrictJsonError::DuplicateKey(path)) => path,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(dup(r#"{"agent":"sh","agent":"cat"}"#), "agent");
        assert_eq!(dup(r#"{"env":{"A":1,"B":2,"A":3}}"#), "env.A");
        assert_eq!(dup(r#"[{"x":1},{"y":1,"y":1}]"#), "[1].y");
        assert_eq!(dup(r#"{"a":[{"b":{"c":0,"c":0}}]}"#), "a[0].b.c");
        // Found by `cargo fuzz run attach_control`: the empty key, repeated, named nothing.
        assert_eq!(dup(r#"{"":80,"":2}"#), "\"\"");
        assert_eq!(dup(r#"{"a":{"":1,"":2}}"#), "a.\"\"");
        // The same key in sibling objects is no repetition.
        assert_eq!(
            parse(br#"{"a":{"k":1},"b":{"k":2}}"#).unwrap(),
            json!({"a": {"k": 1}, "b": {"k": 2}})
        );
        let long = "k".repeat(10_000);
        let path = dup(&format!(r#"{{"{long}":1,"{long}":2}}"#));
        assert!(path.chars().count() <= MAX_PATH_CHARS + 1, "{}", path.len());
    }

    #[test]
    fn it_parses_what_serde_json_parses_and_refuses_the_rest() {
        for text in [
            r#"{"a":1,"b":-2,"c":1.5,"d":"x\u0041","e":[true,false,null],"f":{}}"#,
            "18446744073709551615",
            "  [ ]  ",
            r#""just a string""#,
        ] {
            let ours = parse(text.as_bytes()).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        for bad in ["{nope", "{} {}", "[1,]", "", "\"\\ud800\""] {
            assert!(
                matches!(parse(bad.as_bytes()), Err(StrictJsonError::Syntax(_))),
                "{bad}"
            );
        }
        // serde_json's depth limit still holds: a deep text is refused, not a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(matches!(
            parse(deep.as_bytes()),
            Err(StrictJsonError::Syntax(_))
        ));
    }
}
