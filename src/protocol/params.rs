//! Checked extraction of request parameters.
//!
//! Bodies are parsed once into a JSON object and each field is read through a typed accessor
//! that names the field in its `bad_args` refusal. Serde's own derive errors do not name the
//! field for type mismatches, which is why we do not deserialize request bodies straight into
//! structs. Unknown fields are ignored, as the spec asks of every wire type.

use serde_json::{Map, Value};

use atc_protocol::{TermSize, DIM_RANGE};

use super::strict_json::{self, StrictJsonError};
use super::RequestError;

/// The fields of one request body (or query string), read with field-naming validation.
#[derive(Debug, Default)]
pub struct Params {
    fields: Map<String, Value>,
}

impl Params {
    /// Parses a JSON body. An empty body counts as `{}` so `POST .../kill` needs no body.
    pub fn from_body(bytes: &[u8]) -> Result<Params, RequestError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Params::default());
        }
        match strict_json::parse(bytes) {
            Ok(Value::Object(fields)) => Ok(Params { fields }),
            Ok(_) => Err(RequestError::BodyNotObject),
            Err(StrictJsonError::Syntax(e)) => Err(RequestError::BodyNotJson(e)),
            Err(StrictJsonError::DuplicateKey(field)) => Err(RequestError::DuplicateKey { field }),
        }
    }

    /// Wraps query-string pairs; every value is a string and numeric accessors parse it.
    pub fn from_query(pairs: impl IntoIterator<Item = (String, String)>) -> Params {
        Params {
            fields: pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.fields.get(name).filter(|v| !v.is_null())
    }

    /// An optional string field.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, RequestError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(RequestError::WrongType {
                field: name.to_string(),
                expected: "a string",
            }),
        }
    }

    /// An optional boolean field.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, RequestError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(_) => Err(RequestError::WrongType {
                field: name.to_string(),
                expected: "true or false",
            }),
        }
    }

    /// An optional non-negative integer (JSON number or, from a query string, decimal text).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, RequestError> {
        let bad = || RequestError::WrongType {
            field: name.to_string(),
            expected: "a non-negative integer",
        };
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(bad),
            Some(Value::String(s)) => s.parse::<u64>().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    /// One terminal dimension, within [`DIM_RANGE`].
    pub fn opt_dim(&self, name: &str) -> Result<Option<u16>, RequestError> {
        let out_of_range = || RequestError::WrongType {
            field: name.to_string(),
            expected: "an integer from 1 to 4096",
        };
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if DIM_RANGE.contains(&v) => Ok(Some(v as u16)),
                _ => Err(out_of_range()),
            },
            Some(Value::String(s)) => match s.parse::<u64>() {
                Ok(v) if DIM_RANGE.contains(&v) => Ok(Some(v as u16)),
                _ => Err(out_of_range()),
            },
            Some(_) => Err(out_of_range()),
        }
    }

    /// `cols` and `rows` together; either may be absent and falls back to `default`.
    pub fn size_or(&self, default: TermSize) -> Result<TermSize, RequestError> {
        Ok(TermSize {
            cols: self.opt_dim("cols")?.unwrap_or(default.cols),
            rows: self.opt_dim("rows")?.unwrap_or(default.rows),
        })
    }

    /// `cols` and `rows`, both required.
    pub fn size(&self) -> Result<TermSize, RequestError> {
        let cols = self.opt_dim("cols")?.ok_or(RequestError::Missing {
            field: "cols",
            hint: "",
        })?;
        let rows = self.opt_dim("rows")?.ok_or(RequestError::Missing {
            field: "rows",
            hint: "",
        })?;
        Ok(TermSize { cols, rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(e: RequestError) -> String {
        crate::server::error::Error::from(e).wire().data["field"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn malformed_json_names_the_body() {
        let e = Params::from_body(b"{nope").unwrap_err();
        assert_eq!(field_of(e), "body");
        let e = Params::from_body(b"[1]").unwrap_err();
        assert_eq!(field_of(e), "body");
    }

    #[test]
    fn a_repeated_key_is_refused_by_name_not_resolved() {
        let e = Params::from_body(br#"{"agent":"sh","agent":"cat"}"#).unwrap_err();
        assert_eq!(field_of(e), "agent");
    }

    #[test]
    fn empty_body_is_an_empty_object() {
        let p = Params::from_body(b"  ").unwrap();
        assert_eq!(p.opt_str("name").unwrap(), None);
    }

    #[test]
    fn dims_outside_range_name_the_field() {
        for bad in [
            r#"{"cols":0}"#,
            r#"{"cols":4097}"#,
            r#"{"cols":"x"}"#,
            r#"{"cols":-1}"#,
            r#"{"cols":1.5}"#,
        ] {
            let p = Params::from_body(bad.as_bytes()).unwrap();
            assert_eq!(field_of(p.opt_dim("cols").unwrap_err()), "cols", "{bad}");
        }
        let p = Params::from_body(br#"{"cols":4096,"rows":1}"#).unwrap();
        assert_eq!(
            p.size().unwrap(),
            TermSize {
                cols: 4096,
                rows: 1
            }
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let p = Params::from_body(br#"{"name":5,"pinned":"yes"}"#).unwrap();
        assert_eq!(field_of(p.opt_str("name").unwrap_err()), "name");
        assert_eq!(field_of(p.opt_bool("pinned").unwrap_err()), "pinned");
    }

    #[test]
    fn query_values_parse_as_numbers() {
        let p = Params::from_query([("cols".into(), "100".into()), ("from".into(), "7".into())]);
        assert_eq!(p.opt_dim("cols").unwrap(), Some(100));
        assert_eq!(p.opt_u64("from").unwrap(), Some(7));
    }
}
