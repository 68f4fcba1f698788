//! Checked extraction of query-string parameters (the attach socket's, the trail's, a
//! forget's).
//!
//! Every value of a query string is text; each is read through a typed accessor that parses
//! it and names the field in its `bad_args` refusal. Request bodies are read into
//! `atc-protocol`'s types instead (`body.rs`).

use std::collections::BTreeMap;

use atc_protocol::DIM_RANGE;

use super::RequestError;

/// The fields of one query string, read with field-naming validation. A name given twice
/// keeps its last value.
#[derive(Debug, Default)]
pub struct Params {
    fields: BTreeMap<String, String>,
}

impl Params {
    /// Wraps query-string pairs.
    pub fn from_query(pairs: impl IntoIterator<Item = (String, String)>) -> Params {
        Params {
            fields: pairs.into_iter().collect(),
        }
    }

    /// An optional text field.
    pub fn opt_str(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// An optional non-negative integer, as decimal text.
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, RequestError> {
        self.opt_str(name)
            .map(|s| {
                s.parse::<u64>().map_err(|_| RequestError::WrongType {
                    field: name.to_string(),
                    expected: "a non-negative integer",
                })
            })
            .transpose()
    }

    /// An optional flag, `true` or `false`.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, RequestError> {
        self.opt_str(name)
            .map(|s| match s {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(RequestError::WrongType {
                    field: name.to_string(),
                    expected: "true or false",
                }),
            })
            .transpose()
    }

    /// One terminal dimension, within [`DIM_RANGE`].
    pub fn opt_dim(&self, name: &str) -> Result<Option<u16>, RequestError> {
        self.opt_str(name)
            .map(|s| match s.parse::<u64>() {
                Ok(v) => dim(name, v),
                Err(_) => Err(dim_out_of_range(name)),
            })
            .transpose()
    }
}

/// `v` as the terminal dimension `field`, if it is within [`DIM_RANGE`].
pub fn dim(field: &str, v: u64) -> Result<u16, RequestError> {
    match DIM_RANGE.contains(&v) {
        true => u16::try_from(v).map_err(|_| dim_out_of_range(field)),
        false => Err(dim_out_of_range(field)),
    }
}

/// The refusal of a terminal dimension outside [`DIM_RANGE`] (or not a number at all).
pub fn dim_out_of_range(field: &str) -> RequestError {
    RequestError::WrongType {
        field: field.to_string(),
        expected: "an integer from 1 to 4096",
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

    fn query(pairs: &[(&str, &str)]) -> Params {
        Params::from_query(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn dims_outside_range_name_the_field() {
        for bad in ["0", "4097", "x", "-1", "1.5", ""] {
            let p = query(&[("cols", bad)]);
            assert_eq!(field_of(p.opt_dim("cols").unwrap_err()), "cols", "{bad}");
        }
        let p = query(&[("cols", "4096"), ("rows", "1")]);
        assert_eq!(
            (p.opt_dim("cols").unwrap(), p.opt_dim("rows").unwrap()),
            (Some(4096), Some(1))
        );
        assert_eq!(p.opt_dim("other").unwrap(), None);
    }

    #[test]
    fn query_values_parse_as_numbers() {
        let p = query(&[("cols", "100"), ("from", "7"), ("limit", "x")]);
        assert_eq!(p.opt_dim("cols").unwrap(), Some(100));
        assert_eq!(p.opt_u64("from").unwrap(), Some(7));
        assert_eq!(field_of(p.opt_u64("limit").unwrap_err()), "limit");
    }

    #[test]
    fn flags_are_true_or_false_and_nothing_else() {
        let p = query(&[("a", "true"), ("b", "false"), ("c", "1"), ("d", "TRUE")]);
        assert_eq!(
            (p.opt_bool("a").unwrap(), p.opt_bool("b").unwrap()),
            (Some(true), Some(false))
        );
        assert_eq!(p.opt_bool("absent").unwrap(), None);
        assert_eq!(field_of(p.opt_bool("c").unwrap_err()), "c");
        assert_eq!(field_of(p.opt_bool("d").unwrap_err()), "d");
    }
}
