//! Mutations of real frames for the decoders' property tests: a field of the wrong type or out
//! of range, a field missing, an unknown key, deep nesting, a cut, a byte that is never UTF-8,
//! a number too large for any integer. Included by the property tests of each crate that owns
//! a decoder (`tests/it/decoders.rs` here, in `crates/atc-protocol` and in `crates/impd-client`).

use proptest::prelude::*;
use serde_json::{json, Value};

/// Cases per property: enough to reach every mutation often, few enough for a 2-core machine.
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Values that break a field's expected type or range.
pub fn weird_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(4097)),
        Just(json!(1e308)),
        Just(json!(80.5)),
        "[a-z]{0,12}".prop_map(Value::String),
        Just(json!("sk-ant-secret+value/123")),
        Just(json!("resize")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Where in a frame a mutation lands: each step picks a member of the object or array it is
/// at (modulo its size) and, one time in three, stops there even if the member holds more; so
/// real frames' nested fields (an agent's `auth`, a descriptor's `locator`) are reached as
/// well as whole lists and objects.
pub type Path = Vec<usize>;

/// One change to a real frame.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// A field gets a value of another type or out of range.
    Replace(Path, Value),
    /// A field goes missing.
    Remove(Path),
    /// An unknown key is added to the object at the path (or the nearest one above it).
    Add(Path, String, Value),
    /// The frame is wrapped `depth` arrays deep.
    Nest(usize),
    /// The text is cut after this many bytes.
    Cut(usize),
    /// A byte that is never UTF-8 lands at this position.
    BadUtf8(usize),
    /// A number too large for any integer type (or, with an exponent, for f64) replaces a field.
    HugeNumber(Path, bool),
}

fn path() -> impl Strategy<Value = Path> {
    prop::collection::vec(any::<usize>(), 1..5)
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (path(), weird_value()).prop_map(|(p, v)| Mutation::Replace(p, v)),
        1 => path().prop_map(Mutation::Remove),
        1 => (path(), "[a-zA-Z]{1,10}", weird_value()).prop_map(|(p, k, v)| Mutation::Add(p, k, v)),
        1 => (1usize..300).prop_map(Mutation::Nest),
        1 => any::<usize>().prop_map(Mutation::Cut),
        1 => any::<usize>().prop_map(Mutation::BadUtf8),
        1 => (path(), any::<bool>()).prop_map(|(p, e)| Mutation::HugeNumber(p, e)),
    ]
}

/// The container that holds the member `path` leads to, and that member's key or index;
/// `None` when the frame has no member at all.
fn parent_of<'a>(mut at: &'a mut Value, path: &[usize]) -> Option<(&'a mut Value, Member)> {
    let mut steps = path.iter().peekable();
    while let Some(&step) = steps.next() {
        let member = match &*at {
            Value::Object(o) if !o.is_empty() => {
                Member::Key(o.keys().nth(step % o.len()).cloned().unwrap_or_default())
            }
            Value::Array(a) if !a.is_empty() => Member::Index(step % a.len()),
            _ => return None,
        };
        let child_is_container = match (&*at, &member) {
            (Value::Object(o), Member::Key(k)) => {
                o.get(k).is_some_and(|c| c.is_object() || c.is_array())
            }
            (Value::Array(a), Member::Index(i)) => {
                a.get(*i).is_some_and(|c| c.is_object() || c.is_array())
            }
            _ => false,
        };
        if steps.peek().is_none() || !child_is_container || step % 3 == 0 {
            return Some((at, member));
        }
        at = match (at, member) {
            (Value::Object(o), Member::Key(k)) => o.get_mut(&k)?,
            (Value::Array(a), Member::Index(i)) => a.get_mut(i)?,
            _ => return None,
        };
    }
    None
}

enum Member {
    Key(String),
    Index(usize),
}

fn set(v: &mut Value, path: &[usize], new: Value) {
    match parent_of(v, path) {
        Some((Value::Object(o), Member::Key(k))) => {
            o.insert(k, new);
        }
        Some((Value::Array(a), Member::Index(i))) => a[i] = new,
        _ => *v = new,
    }
}

/// `seed` with `mutations` applied, as bytes.
pub fn apply(seed: &Value, mutations: &[Mutation]) -> Vec<u8> {
    let mut v = seed.clone();
    let mut raw: Option<Vec<u8>> = None;
    for m in mutations {
        match m {
            Mutation::Replace(path, new) => set(&mut v, path, new.clone()),
            Mutation::Remove(path) => match parent_of(&mut v, path) {
                Some((Value::Object(o), Member::Key(k))) => {
                    o.remove(&k);
                }
                Some((Value::Array(a), Member::Index(i))) => {
                    a.remove(i);
                }
                _ => {}
            },
            Mutation::Add(path, key, new) => match parent_of(&mut v, path) {
                Some((Value::Object(o), _)) => {
                    o.insert(key.clone(), new.clone());
                }
                _ => {
                    if let Some(o) = v.as_object_mut() {
                        o.insert(key.clone(), new.clone());
                    }
                }
            },
            Mutation::Nest(depth) => {
                let text = v.to_string();
                raw = Some(format!("{}{text}{}", "[".repeat(*depth), "]".repeat(*depth)).into());
            }
            Mutation::Cut(at) => {
                let mut bytes = raw.take().unwrap_or_else(|| v.to_string().into_bytes());
                bytes.truncate(at % (bytes.len() + 1));
                raw = Some(bytes);
            }
            Mutation::BadUtf8(at) => {
                let mut bytes = raw.take().unwrap_or_else(|| v.to_string().into_bytes());
                let at = at % (bytes.len() + 1);
                bytes.insert(at, 0xff);
                raw = Some(bytes);
            }
            Mutation::HugeNumber(path, exponent) => {
                set(&mut v, path, json!("@HUGE@"));
                let huge = if *exponent {
                    "1e400"
                } else {
                    "184467440737095516160000"
                };
                raw = Some(v.to_string().replace("\"@HUGE@\"", huge).into_bytes());
            }
        }
    }
    raw.unwrap_or_else(|| v.to_string().into_bytes())
}

/// Real frames of a decoder, mutated.
pub fn mutated(seeds: Vec<Value>) -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(seeds),
        prop::collection::vec(mutation(), 0..4),
    )
        .prop_map(|(seed, ms)| apply(&seed, &ms))
}
