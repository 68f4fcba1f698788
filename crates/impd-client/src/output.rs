//! Session output continuity as impd reports it in `started.output` (spec §9.6, §9.7): which
//! boot and which run of the process the bytes belong to, where this socket's bytes start, and
//! how a requested resume was answered. Also the `NO_SESSION` data, which carries the same
//! boot history. Parsed strictly: an `offsets` output without its ids is a bad message, since a
//! client that trusted it would splice bytes from different runs.

use serde::Deserialize;
use serde_json::Value;

use super::error::ImpPortError;

/// `started.output`. With `continuity: "none"` (an agent without offsets) only `continuity` is
/// meaningful and every other field is empty or zero: check [`Output::has_offsets`] first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// `"offsets"` or `"none"` (any other word is treated like `"none"`).
    pub continuity: String,
    /// Guest boot identity: survives a memory wake, changes on every cold boot.
    pub boot_id: String,
    /// One run of the session's process (32 hex); ends on any cold boot.
    pub execution_generation: String,
    /// Oldest offset still resumable.
    pub buffer_start: u64,
    /// Offset after the last byte written so far.
    pub end: u64,
    /// Offset of the first data byte this socket sends after the prelude.
    pub offset: u64,
    /// Number of leading mode bytes (fresh attach only) that carry no offset: data byte `i`
    /// (from 0) sits at `offset + (i - prelude)` once `i >= prelude`.
    pub prelude: u64,
    /// The imp's last cold boots, newest first (at most 4).
    pub cold_boots: Vec<ColdBoot>,
    /// The last generation under this name that ended and left the name, in this boot.
    pub previous: Option<Previous>,
    /// How a `resumeFrom` was answered; present only when one was sent.
    pub resume: Option<Resume>,
}

/// One cold boot of an imp.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdBoot {
    /// The boot this cold boot started.
    pub boot_id: String,
    /// `start`, `wake_fallback`, `watchdog`, `restore`, `recovery` or `unknown`.
    pub cause: String,
    /// When (ISO time).
    pub at: String,
}

/// A generation that ended under the session name in this boot.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Previous {
    /// Its generation id.
    pub execution_generation: String,
    /// Its final end offset.
    pub end: u64,
    /// Its exit code; `None` when a signal ended it.
    #[serde(default)]
    pub exit_code: Option<i32>,
}

/// `started.output.resume` (spec §9.7).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resume {
    /// Data follows from the requested offset (still honour `output.offset`).
    Exact,
    /// Bytes `[from, to)` are lost; data follows from `to`, possibly mid escape sequence.
    Gap {
        /// First lost offset (the requested one).
        from: u64,
        /// First offset that follows (`bufferStart`).
        to: u64,
    },
    /// The name now runs another generation; data follows from its `first_offset`.
    #[serde(rename_all = "camelCase")]
    GenerationChanged {
        /// The current generation.
        execution_generation: String,
        /// Where its data starts (its `bufferStart`).
        first_offset: u64,
    },
}

/// The wire shape before the `offsets` fields are checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOutput {
    continuity: String,
    boot_id: Option<String>,
    execution_generation: Option<String>,
    buffer_start: Option<u64>,
    end: Option<u64>,
    offset: Option<u64>,
    prelude: Option<u64>,
    #[serde(default)]
    cold_boots: Vec<ColdBoot>,
    #[serde(default)]
    previous: Option<Previous>,
    #[serde(default)]
    resume: Option<Resume>,
}

impl Output {
    /// Whether the bytes carry offsets (`continuity: "offsets"`); only then are the other
    /// fields meaningful.
    pub fn has_offsets(&self) -> bool {
        self.continuity == "offsets"
    }

    /// Parses `started.output`; an `offsets` output must carry its ids and offsets.
    pub fn from_value(value: &Value) -> Result<Output, ImpPortError> {
        let raw = RawOutput::deserialize(value)
            .map_err(|e| ImpPortError::bad_message(format!("started.output: {e}")))?;
        if raw.continuity != "offsets" {
            return Ok(Output {
                continuity: raw.continuity,
                ..Output::default()
            });
        }
        let missing = |field: &str| {
            ImpPortError::bad_message(format!("started.output with offsets lacks {field}"))
        };
        Ok(Output {
            boot_id: raw.boot_id.ok_or_else(|| missing("bootId"))?,
            execution_generation: raw
                .execution_generation
                .ok_or_else(|| missing("executionGeneration"))?,
            buffer_start: raw.buffer_start.ok_or_else(|| missing("bufferStart"))?,
            end: raw.end.ok_or_else(|| missing("end"))?,
            offset: raw.offset.ok_or_else(|| missing("offset"))?,
            prelude: raw.prelude.unwrap_or(0),
            cold_boots: raw.cold_boots,
            previous: raw.previous,
            resume: raw.resume,
            continuity: raw.continuity,
        })
    }
}

/// The cold boot that ended boot `boot_id`: the entry just newer than it in `cold_boots`
/// (newest first). `None` when `boot_id` is the newest, or is not listed (cause unknown).
pub fn cold_boot_after<'a>(cold_boots: &'a [ColdBoot], boot_id: &str) -> Option<&'a ColdBoot> {
    let index = cold_boots.iter().position(|b| b.boot_id == boot_id)?;
    index.checked_sub(1).and_then(|newer| cold_boots.get(newer))
}

/// The `data` of a `NO_SESSION` refusal (offset-capable agents; older ones send none).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoSession {
    /// The imp's current boot.
    pub boot_id: String,
    /// Its last cold boots, newest first.
    #[serde(default)]
    pub cold_boots: Vec<ColdBoot>,
    /// The last generation that ended under the name in this boot.
    #[serde(default)]
    pub previous: Option<Previous>,
}

impl NoSession {
    /// Reads a `NO_SESSION` error's data; `None` if it has no boot history.
    pub fn from_data(data: &Value) -> Option<NoSession> {
        NoSession::deserialize(data).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ImpdCode;
    use serde_json::json;

    #[test]
    fn fresh_start_output_from_the_spec() {
        // §9.11 (a)
        let o = Output::from_value(&json!({
            "continuity": "offsets", "bootId": "B1", "executionGeneration": "G1",
            "bufferStart": 0, "end": 0, "offset": 0, "prelude": 0,
            "coldBoots": [{"bootId": "B1", "cause": "start", "at": "2026-08-20T10:00:00.000Z"}]
        }))
        .unwrap();
        assert!(o.has_offsets());
        assert_eq!(o.boot_id, "B1");
        assert_eq!(o.cold_boots[0].cause, "start");
        assert_eq!(o.resume, None);
    }

    #[test]
    fn exact_and_gap_resumes() {
        // §9.11 (b)
        let exact = Output::from_value(&json!({
            "continuity": "offsets", "bootId": "B1", "executionGeneration": "G1",
            "bufferStart": 0, "end": 18900, "offset": 18000, "prelude": 0,
            "coldBoots": [], "resume": {"kind": "exact"}
        }))
        .unwrap();
        assert_eq!(exact.resume, Some(Resume::Exact));
        assert_eq!(exact.offset, 18000);
        let gap = Output::from_value(&json!({
            "continuity": "offsets", "bootId": "B1", "executionGeneration": "G1",
            "bufferStart": 301234, "end": 563378, "offset": 301234, "prelude": 0,
            "coldBoots": [], "resume": {"kind": "gap", "from": 18000, "to": 301234}
        }))
        .unwrap();
        assert_eq!(
            gap.resume,
            Some(Resume::Gap {
                from: 18000,
                to: 301234
            })
        );
    }

    #[test]
    fn generation_changed_with_previous() {
        // §9.11 (c)
        let o = Output::from_value(&json!({
            "continuity": "offsets", "bootId": "B1", "executionGeneration": "G2",
            "bufferStart": 0, "end": 3100, "offset": 0, "prelude": 0, "coldBoots": [],
            "previous": {"executionGeneration": "G1", "end": 19042, "exitCode": 0},
            "resume": {"kind": "generation_changed", "executionGeneration": "G2", "firstOffset": 0}
        }))
        .unwrap();
        assert_eq!(
            o.resume,
            Some(Resume::GenerationChanged {
                execution_generation: "G2".into(),
                first_offset: 0
            })
        );
        let p = o.previous.unwrap();
        assert_eq!(
            (p.execution_generation.as_str(), p.end, p.exit_code),
            ("G1", 19042, Some(0))
        );
    }

    #[test]
    fn previous_killed_by_a_signal_has_no_exit_code() {
        let p: Previous = serde_json::from_value(
            json!({"executionGeneration": "G1", "end": 5, "exitCode": null}),
        )
        .unwrap();
        assert_eq!(p.exit_code, None);
    }

    #[test]
    fn continuity_none_has_no_offsets() {
        let o = Output::from_value(&json!({"continuity": "none"})).unwrap();
        assert!(!o.has_offsets());
        assert_eq!(o.end, 0);
    }

    #[test]
    fn offsets_without_ids_or_with_an_unknown_resume_are_bad() {
        let e = Output::from_value(&json!({"continuity": "offsets", "end": 0})).unwrap_err();
        assert!(e.is(ImpdCode::BadMessage));
        let e = Output::from_value(&json!({
            "continuity": "offsets", "bootId": "B1", "executionGeneration": "G1",
            "bufferStart": 0, "end": 0, "offset": 0, "resume": {"kind": "teleport"}
        }))
        .unwrap_err();
        assert!(e.is(ImpdCode::BadMessage));
    }

    #[test]
    fn no_session_data_and_the_boot_that_ended_ours() {
        // §9.11 (d)
        let ns = NoSession::from_data(&json!({"bootId": "B2", "coldBoots": [
            {"bootId": "B2", "cause": "watchdog", "at": "2026-08-20T11:02:10.000Z"},
            {"bootId": "B1", "cause": "start", "at": "2026-08-20T10:00:00.000Z"}]}))
        .unwrap();
        assert_eq!(ns.boot_id, "B2");
        assert_eq!(
            cold_boot_after(&ns.cold_boots, "B1").unwrap().cause,
            "watchdog"
        );
        assert!(cold_boot_after(&ns.cold_boots, "B2").is_none());
        assert!(cold_boot_after(&ns.cold_boots, "B0").is_none());
        assert!(NoSession::from_data(&Value::Null).is_none());
    }
}
