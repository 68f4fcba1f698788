//! What the config says about execution targets (spec §4.1): the `targets` map as written, in
//! file order, `defaultTarget`, and whether the file itself failed. Config reads them only as
//! JSON; what a target's options mean belongs to its provider kind, so they are checked above
//! config, in `providers::targets`, into the targets the daemon serves.

use serde_json::Value;

use super::raw::RawTargets;

// A problem and where it sits are the answer's own types: `GET /v1/agents` lists them as
// they are, and the config revision hashes them.
pub use atc_protocol::responses::{TargetProblem, TargetProblemScope};

/// The targets part of a config, unchecked beyond its JSON shape.
#[derive(Debug, Clone, Default)]
pub struct TargetsConfig {
    /// The `targets` value; absent: the implicit `local` target, unless a default is named.
    pub entries: Option<RawTargets>,
    /// The `defaultTarget` value, any JSON.
    pub default: Option<Value>,
    /// Set when the config file could not be used at all: then no target is usable.
    pub file_problem: Option<TargetProblem>,
}
