//! Session names an agent keeps in its own files (spec §9.5, Names): Claude's transcript,
//! Codex's session index and Grok's `summary.json`. [`source_of`] reads a hook report to say
//! where to look, [`read`] looks (blocking file I/O: the session runs it on the blocking pool),
//! and [`may_replace`] is the strength rule the session applies to what was found. The session
//! owns the name; nothing here writes anything.
//!
//! Reads are bounded: a transcript can be hundreds of MiB, so only its head and tail are read
//! (see [`TRANSCRIPT_HEAD`]), and a line is parsed only when it can hold what is looked for.
//! A file that is missing, unreadable or malformed yields no name; one that is not a regular
//! file is never opened ([`super::named_file`]).

use crate::config::agent_kind::AgentKind;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use atc_protocol::NamedBy;

/// Bytes read from the start of a Claude transcript. Claude writes `summary` lines at the top
/// of a resumed or compacted transcript, so the head is where they are.
pub const TRANSCRIPT_HEAD: u64 = 1024 * 1024;
/// Bytes read from the end of a Claude transcript, where a `/rename` appends `custom-title`.
pub const TRANSCRIPT_TAIL: u64 = 4 * 1024 * 1024;
/// Bytes read from the end of Codex's `session_index.jsonl` (appended to, one short line per
/// thread rename, so the newest entries are at the end).
pub const INDEX_TAIL: u64 = 4 * 1024 * 1024;
/// A `summary.json` larger than this is not a summary; it is left unread.
pub const SUMMARY_MAX: u64 = 1024 * 1024;
/// Names are cut to this many characters, the same bound a client rename has.
pub const NAME_MAX: usize = 200;

/// Where one hook report says a session's name may be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameSource {
    /// Claude's JSONL transcript (`transcript_path` of any Claude hook).
    ClaudeTranscript(PathBuf),
    /// Codex's `session_index.jsonl` under its home, and the thread to look up there.
    CodexIndex {
        /// `<codex home>/session_index.jsonl`.
        index: PathBuf,
        /// The agent session id, matched against each line's `id`.
        thread: String,
    },
    /// Grok's `summary.json`.
    GrokSummary(PathBuf),
}

impl NameSource {
    /// Which file kind, for logs (never the path's contents).
    pub fn label(&self) -> &'static str {
        match self {
            NameSource::ClaudeTranscript(_) => "claude transcript",
            NameSource::CodexIndex { .. } => "codex session index",
            NameSource::GrokSummary(_) => "grok summary",
        }
    }
}

/// What tells a name file that changed from the one read last: its path, size and
/// modification time. Agents append to their transcripts on every turn, so an unchanged
/// stamp means an unchanged name, and the (possibly megabytes long) file is not read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    path: PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl NameSource {
    /// The file this source reads.
    pub fn path(&self) -> &Path {
        match self {
            NameSource::ClaudeTranscript(p) | NameSource::GrokSummary(p) => p,
            NameSource::CodexIndex { index, .. } => index,
        }
    }

    /// The file's stamp now.
    pub fn stamp(&self) -> std::io::Result<Stamp> {
        let meta = std::fs::metadata(self.path())?;
        Ok(Stamp {
            path: self.path().to_path_buf(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// A name found in an agent's files, with the strength it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundName {
    /// The name, cleaned (see [`clean`]).
    pub name: String,
    /// [`NamedBy::Agent`] for a rename the user made inside the agent (Claude `custom-title`,
    /// Grok `title_is_manual`); [`NamedBy::Auto`] for a title the agent made up (Claude
    /// `summary`, Codex `thread_name`, Grok's own title), which never replaces a user's name.
    pub named_by: NamedBy,
}

/// The name source a report of an agent of `kind` carries, if any. `transcript` is the path
/// the report named, already checked (`report_check::transcript_path`); `agent_session_id` is
/// the session's (after this report); `codex_home` is where Codex keeps its files (`None`: no
/// home known, Codex names are not read).
pub fn source_of(
    kind: Option<AgentKind>,
    transcript: Option<&Path>,
    agent_session_id: Option<&str>,
    codex_home: Option<&Path>,
) -> Option<NameSource> {
    match kind {
        Some(AgentKind::Claude) => {
            transcript.map(|p| NameSource::ClaudeTranscript(p.to_path_buf()))
        }
        Some(AgentKind::Codex) => Some(NameSource::CodexIndex {
            index: codex_home?.join("session_index.jsonl"),
            thread: agent_session_id.filter(|s| !s.is_empty())?.to_string(),
        }),
        // Inferred: the spec says Grok "reads summary.json" without saying where; Grok keeps
        // one directory per session, holding its transcript and its summary, so the file is
        // looked for beside the reported transcript.
        Some(AgentKind::Grok) => Some(NameSource::GrokSummary(
            transcript?.parent()?.join("summary.json"),
        )),
        _ => None,
    }
}

/// Whether a found name of strength `found` replaces the current name of strength `current`:
/// a rename made inside the agent always does; an agent's own title only replaces a name
/// that was itself automatic (never a user's, never an agent rename).
pub fn may_replace(current: NamedBy, found: NamedBy) -> bool {
    match found {
        NamedBy::Agent | NamedBy::User => true,
        NamedBy::Auto => current == NamedBy::Auto,
    }
}

/// Reads the name `source` points at. Blocking; bounded as the module doc says. `Ok(None)`:
/// the file holds no usable name.
pub fn read(source: &NameSource) -> std::io::Result<Option<FoundName>> {
    match source {
        NameSource::ClaudeTranscript(path) => read_claude(path),
        NameSource::CodexIndex { index, thread } => read_codex(index, thread),
        NameSource::GrokSummary(path) => read_grok(path),
    }
}

/// The newest `custom-title` (agent), else the newest `summary` (auto).
fn read_claude(path: &Path) -> std::io::Result<Option<FoundName>> {
    let text = read_head_and_tail(path, TRANSCRIPT_HEAD, TRANSCRIPT_TAIL)?;
    let (mut title, mut summary) = (None, None);
    // Only lines that can be one of the two are parsed; message lines can be megabytes.
    for line in lines_containing(&text, &[b"custom-title", b"\"summary\""]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("custom-title") => {
                if let Some(t) = v.get("customTitle").and_then(Value::as_str).and_then(clean) {
                    title = Some(t);
                }
            }
            Some("summary") => {
                if let Some(s) = v.get("summary").and_then(Value::as_str).and_then(clean) {
                    summary = Some(s);
                }
            }
            _ => {}
        }
    }
    Ok(title
        .map(|name| FoundName {
            name,
            named_by: NamedBy::Agent,
        })
        .or(summary.map(|name| FoundName {
            name,
            named_by: NamedBy::Auto,
        })))
}

/// The `thread_name` of the newest line whose `id` is `thread`.
fn read_codex(index: &Path, thread: &str) -> std::io::Result<Option<FoundName>> {
    let text = read_head_and_tail(index, 0, INDEX_TAIL)?;
    let mut found = None;
    for line in lines_containing(&text, &[thread.as_bytes()]) {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if v.get("id").and_then(Value::as_str) != Some(thread) {
            continue;
        }
        if let Some(name) = v.get("thread_name").and_then(Value::as_str).and_then(clean) {
            found = Some(name);
        }
    }
    Ok(found.map(|name| FoundName {
        name,
        named_by: NamedBy::Auto,
    }))
}

/// `title`, as an agent rename when `title_is_manual` is true.
fn read_grok(path: &Path) -> std::io::Result<Option<FoundName>> {
    let file = super::named_file::open_regular(path)?;
    if file.metadata()?.len() > SUMMARY_MAX {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(SUMMARY_MAX).read_to_end(&mut bytes)?;
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(None);
    };
    let Some(name) = v.get("title").and_then(Value::as_str).and_then(clean) else {
        return Ok(None);
    };
    let manual = v.get("title_is_manual").and_then(Value::as_bool) == Some(true);
    Ok(Some(FoundName {
        name,
        named_by: if manual {
            NamedBy::Agent
        } else {
            NamedBy::Auto
        },
    }))
}

/// A name as a session may carry it: control characters become spaces, surrounding space
/// goes, and it is cut to [`NAME_MAX`] characters. Blank names are no names.
pub fn clean(raw: &str) -> Option<String> {
    let spaced: String = raw
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let name: String = spaced.trim().chars().take(NAME_MAX).collect();
    let name = name.trim_end().to_string();
    (!name.is_empty()).then_some(name)
}

/// The whole file when it is at most `head + tail` bytes; else its first `head` bytes up to
/// the last whole line and its last `tail` bytes from the first whole line, joined by a
/// newline. Cut lines are dropped, so every line returned is one the file holds.
fn read_head_and_tail(path: &Path, head: u64, tail: u64) -> std::io::Result<Vec<u8>> {
    let mut file = super::named_file::open_regular(path)?;
    let len = file.metadata()?.len();
    let mut out = Vec::new();
    if len <= head + tail {
        file.take(head + tail).read_to_end(&mut out)?;
        return Ok(out);
    }
    if head > 0 {
        (&mut file).take(head).read_to_end(&mut out)?;
        let whole = out.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        out.truncate(whole);
    }
    // One byte more than the window, to tell whether the window starts a line.
    let mut end = Vec::new();
    file.seek(SeekFrom::Start(len - tail - 1))?;
    file.take(tail + 1).read_to_end(&mut end)?;
    let first = end
        .iter()
        .position(|b| *b == b'\n')
        .map_or(end.len(), |i| i + 1);
    out.push(b'\n');
    out.extend_from_slice(end.get(first..).unwrap_or_default());
    Ok(out)
}

/// The lines of `text` holding any of `needles`, in file order.
fn lines_containing<'a>(
    text: &'a [u8],
    needles: &'a [&'a [u8]],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    text.split(|b| *b == b'\n').filter(move |line| {
        needles
            .iter()
            .any(|n| !n.is_empty() && line.windows(n.len()).any(|w| w == *n))
    })
}

/// Codex's home: `$CODEX_HOME` when set and not empty, else `~/.codex`; `None` without
/// either. Codex sessions run with the daemon's environment, so the daemon's is the one.
pub fn codex_home_from_env(
    codex_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    codex_home
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".codex"))
        })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_stamp_changes_when_the_file_grows_or_moves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let source = NameSource::ClaudeTranscript(path.clone());
        let first = source.stamp().unwrap();
        assert_eq!(
            source.stamp().unwrap(),
            first,
            "an untouched file keeps its stamp"
        );
        std::fs::write(&path, "{}\n{}\n").unwrap();
        assert_ne!(
            source.stamp().unwrap(),
            first,
            "an appended file gets a new stamp"
        );
        let other = dir.path().join("u.jsonl");
        std::fs::copy(&path, &other).unwrap();
        let moved = NameSource::ClaudeTranscript(other).stamp().unwrap();
        assert_ne!(
            moved,
            source.stamp().unwrap(),
            "another file is another stamp"
        );
        assert!(NameSource::GrokSummary(dir.path().join("missing"))
            .stamp()
            .is_err());
    }

    use super::*;
    use serde_json::json;
    use std::fs::File;
    use std::io::Write;

    fn write(path: &Path, lines: &[Value]) {
        let mut f = File::create(path).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
    }

    fn found(name: &str, named_by: NamedBy) -> Option<FoundName> {
        Some(FoundName {
            name: name.into(),
            named_by,
        })
    }

    #[test]
    fn claude_takes_the_newest_custom_title_over_any_summary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write(
            &path,
            &[
                json!({"type": "summary", "summary": "first summary"}),
                json!({"type": "user", "message": {"content": "summary custom-title"}}),
                json!({"type": "custom-title", "customTitle": "old title"}),
                json!({"type": "custom-title", "customTitle": "new title"}),
                json!({"type": "summary", "summary": "later summary"}),
            ],
        );
        assert_eq!(
            read(&NameSource::ClaudeTranscript(path)).unwrap(),
            found("new title", NamedBy::Agent)
        );
    }

    #[test]
    fn claude_without_a_title_takes_the_newest_summary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write(
            &path,
            &[
                json!({"type": "summary", "summary": "older"}),
                json!({"type": "summary", "summary": "newer\nline"}),
                json!({"type": "summary", "summary": "   "}),
                json!({"type": "assistant", "message": {"content": "hi"}}),
            ],
        );
        assert_eq!(
            read(&NameSource::ClaudeTranscript(path.clone())).unwrap(),
            found("newer line", NamedBy::Auto)
        );
        write(&path, &[json!({"type": "user"})]);
        assert_eq!(read(&NameSource::ClaudeTranscript(path)).unwrap(), None);
    }

    #[test]
    fn a_large_transcript_is_read_at_its_head_and_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut f = File::create(&path).unwrap();
        writeln!(f, "{}", json!({"type": "summary", "summary": "at the top"})).unwrap();
        // A title in the middle, out of both windows, is not seen.
        let filler = json!({"type": "assistant", "text": "x".repeat(1000)}).to_string();
        for _ in 0..(TRANSCRIPT_HEAD / 1000 + 10) {
            writeln!(f, "{filler}").unwrap();
        }
        writeln!(
            f,
            "{}",
            json!({"type": "custom-title", "customTitle": "lost"})
        )
        .unwrap();
        for _ in 0..(TRANSCRIPT_TAIL / 1000 + 10) {
            writeln!(f, "{filler}").unwrap();
        }
        drop(f);
        assert_eq!(
            read(&NameSource::ClaudeTranscript(path.clone())).unwrap(),
            found("at the top", NamedBy::Auto)
        );
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(
            f,
            "{}",
            json!({"type": "custom-title", "customTitle": "at the end"})
        )
        .unwrap();
        assert_eq!(
            read(&NameSource::ClaudeTranscript(path)).unwrap(),
            found("at the end", NamedBy::Agent)
        );
    }

    #[test]
    fn codex_takes_the_newest_thread_name_of_its_own_thread() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("session_index.jsonl");
        write(
            &index,
            &[
                json!({"id": "t-1", "thread_name": "first"}),
                json!({"id": "t-2", "thread_name": "someone else"}),
                json!({"id": "t-1", "thread_name": "renamed", "updated_at": "x"}),
                json!({"id": "t-3", "thread_name": "t-1"}),
            ],
        );
        let source = |thread: &str| NameSource::CodexIndex {
            index: index.clone(),
            thread: thread.into(),
        };
        assert_eq!(
            read(&source("t-1")).unwrap(),
            found("renamed", NamedBy::Auto)
        );
        assert_eq!(read(&source("t-9")).unwrap(), None);
    }

    #[test]
    fn grok_titles_are_agent_renames_only_when_manual() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        let source = NameSource::GrokSummary(path.clone());
        std::fs::write(&path, json!({"title": "made up"}).to_string()).unwrap();
        assert_eq!(read(&source).unwrap(), found("made up", NamedBy::Auto));
        std::fs::write(
            &path,
            json!({"title": "chosen", "title_is_manual": true}).to_string(),
        )
        .unwrap();
        assert_eq!(read(&source).unwrap(), found("chosen", NamedBy::Agent));
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(read(&source).unwrap(), None);
    }

    #[test]
    fn missing_files_are_errors_the_caller_ignores() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        for source in [
            NameSource::ClaudeTranscript(missing.clone()),
            NameSource::CodexIndex {
                index: missing.clone(),
                thread: "t".into(),
            },
            NameSource::GrokSummary(missing.clone()),
        ] {
            assert_eq!(
                read(&source).unwrap_err().kind(),
                std::io::ErrorKind::NotFound
            );
        }
    }

    #[test]
    fn reports_name_their_sources() {
        let home = Path::new("/home/u/.codex");
        let p = Some(Path::new("/t/s.jsonl"));
        assert_eq!(
            source_of(Some(AgentKind::Claude), p, None, None),
            Some(NameSource::ClaudeTranscript("/t/s.jsonl".into()))
        );
        assert_eq!(source_of(Some(AgentKind::Claude), None, None, None), None);
        assert_eq!(
            source_of(Some(AgentKind::Codex), p, Some("x"), Some(home)),
            Some(NameSource::CodexIndex {
                index: "/home/u/.codex/session_index.jsonl".into(),
                thread: "x".into()
            })
        );
        assert_eq!(source_of(Some(AgentKind::Codex), p, None, Some(home)), None);
        assert_eq!(source_of(Some(AgentKind::Codex), p, Some("x"), None), None);
        assert_eq!(
            source_of(
                Some(AgentKind::Grok),
                Some(Path::new("/g/s1/transcript.jsonl")),
                None,
                None
            ),
            Some(NameSource::GrokSummary("/g/s1/summary.json".into()))
        );
        assert_eq!(source_of(None, p, Some("x"), Some(home)), None);
    }

    #[test]
    fn agent_renames_beat_user_names_and_titles_do_not() {
        use NamedBy::*;
        for current in [Auto, User, Agent] {
            assert!(may_replace(current, Agent));
        }
        assert!(may_replace(Auto, Auto));
        assert!(!may_replace(User, Auto));
        assert!(!may_replace(Agent, Auto));
    }

    #[test]
    fn names_are_cleaned_and_bounded() {
        assert_eq!(clean("  a\tb\n "), Some("a b".into()));
        assert_eq!(clean(" \n"), None);
        assert_eq!(
            clean(&"é".repeat(300)).map(|n| n.chars().count()),
            Some(200)
        );
    }

    #[test]
    fn codex_home_comes_from_the_environment() {
        assert_eq!(
            codex_home_from_env(Some("/c".into()), Some("/h".into())),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            codex_home_from_env(Some("".into()), Some("/h".into())),
            Some(PathBuf::from("/h/.codex"))
        );
        assert_eq!(codex_home_from_env(None, None), None);
    }
}
