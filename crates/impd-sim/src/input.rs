//! Reading typed fields out of a JSON input (RPC input or a socket message), so schema
//! violations become one error naming the field instead of a panic or a silent default.
//! Unknown fields are ignored, as impd's parsers drop them.

use std::collections::BTreeMap;

use serde_json::Value;

use super::envelope::ImpdError;

/// A field that fails the schema.
#[derive(Debug)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: &str, message: &str) -> FieldError {
        FieldError {
            field: field.to_string(),
            message: message.to_string(),
        }
    }

    /// As an RPC `BAD_REQUEST`.
    pub fn rpc(self) -> ImpdError {
        ImpdError::bad_request(&self.field, self.message)
    }

    /// As the text of a socket's "bad exec message" error.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// An input object (or nothing).
pub struct Fields<'a>(pub &'a Value);

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<String>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(FieldError::new(key, "expected a string")),
        }
    }

    pub fn str(&self, key: &str) -> Result<String, FieldError> {
        self.opt_str(key)?
            .ok_or_else(|| FieldError::new(key, "required"))
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(FieldError::new(key, "expected a boolean")),
        }
    }

    /// An integer within `[min, max]`.
    pub fn opt_int(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(FieldError::new(
                    key,
                    &format!("expected an integer {min}–{max}"),
                )),
            },
        }
    }

    pub fn int(&self, key: &str, min: i64, max: i64) -> Result<i64, FieldError> {
        self.opt_int(key, min, max)?
            .ok_or_else(|| FieldError::new(key, "required"))
    }

    pub fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| FieldError::new(key, "expected strings"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(FieldError::new(key, "expected an array")),
        }
    }

    pub fn opt_str_map(&self, key: &str) -> Result<Option<BTreeMap<String, String>>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| FieldError::new(key, "expected string values"))
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
                .map(Some),
            Some(_) => Err(FieldError::new(key, "expected an object")),
        }
    }

    /// A nested object.
    pub fn opt_obj(&self, key: &str) -> Result<Option<Fields<'a>>, FieldError> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Ok(Some(Fields(v))),
            Some(_) => Err(FieldError::new(key, "expected an object")),
        }
    }
}
