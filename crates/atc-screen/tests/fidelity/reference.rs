//! The reference terminal: xterm.js's headless build with the page's Unicode 11 widths, run by
//! `node tests/screen-reference/reference.mjs` (which documents the protocol). One process
//! answers every case of a test; a case is a fresh terminal fed a list of steps, and its answer
//! is what that terminal shows, as JSON ([`crate::compare`] reads it).
//!
//! Node and the package's `node_modules` are test prerequisites like the real agents: without
//! them the tests say why and pass, unless `ATC_SCREEN_REFERENCE=required` (CI) makes that a
//! failure, so a broken install cannot pass as a skip.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::{json, Value};

/// One thing that happens to a terminal.
#[derive(Clone, Debug)]
pub enum Step {
    /// Output bytes, as a program wrote them.
    Write(Vec<u8>),
    /// A size change between writes.
    Resize { cols: u16, rows: u16 },
}

/// A fresh terminal of `cols`×`rows` taken through `steps`.
pub struct Case {
    pub id: String,
    pub cols: u16,
    pub rows: u16,
    pub steps: Vec<Step>,
}

/// `tests/screen-reference` at the workspace root (this crate sits at `crates/atc-screen`).
fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/screen-reference")
}

/// Whether the reference can run. When it cannot, prints why and returns false, or panics
/// when `ATC_SCREEN_REFERENCE=required`.
pub fn available() -> bool {
    let dir = package_dir();
    let missing = if Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        Some("`node` is not on PATH (install Node.js 18 or later)".to_string())
    } else if !dir.join("node_modules/@xterm/headless").is_dir()
        || !dir.join("node_modules/@xterm/addon-unicode11").is_dir()
    {
        Some(format!(
            "xterm.js is not installed under {}/node_modules",
            dir.display()
        ))
    } else {
        None
    };
    let Some(missing) = missing else {
        return true;
    };
    let how = format!(
        "{missing}; run `npm ci --prefix tests/screen-reference` (README, \"Screen model\")"
    );
    if std::env::var("ATC_SCREEN_REFERENCE").as_deref() == Ok("required") {
        panic!("ATC_SCREEN_REFERENCE=required, but {how}");
    }
    eprintln!("skipped: {how}");
    false
}

fn encode(case: &Case) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let writes: Vec<Value> = case
        .steps
        .iter()
        .map(|step| match step {
            Step::Write(bytes) => Value::String(engine.encode(bytes)),
            Step::Resize { cols, rows } => json!({ "cols": cols, "rows": rows }),
        })
        .collect();
    let line = json!({ "id": case.id, "cols": case.cols, "rows": case.rows, "writes": writes });
    format!("{line}\n")
}

/// What the reference shows after each case, in the order given.
pub fn observe(cases: &[Case]) -> Vec<Value> {
    let script = package_dir().join("reference.mjs");
    let mut child = Command::new("node")
        .arg(&script)
        .current_dir(package_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("node {}: {e}", script.display()));
    let mut stdin = child.stdin.take().expect("node's stdin");
    let stdout = child.stdout.take().expect("node's stdout");

    // Cases go in from a thread of their own: answers come back while later cases are still
    // being written, and with one thread doing both the two pipes would fill and stall.
    let lines: Vec<String> = cases.iter().map(encode).collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            stdin.write_all(line.as_bytes())?;
        }
        Ok::<(), std::io::Error>(())
        // stdin drops here, which ends the script's input.
    });

    let mut answers = Vec::with_capacity(cases.len());
    let mut reader = BufReader::new(stdout);
    for case in cases {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("reading the reference's answer to {}: {e}", case.id));
        assert!(n > 0, "the reference ended before answering {}", case.id);
        let mut answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the reference's answer to {}: {e}: {line}", case.id));
        assert_eq!(
            answer["id"].as_str(),
            Some(case.id.as_str()),
            "answers out of order"
        );
        if let Some(error) = answer.get("error") {
            panic!("the reference failed on {}: {error}", case.id);
        }
        answers.push(answer["state"].take());
    }
    writer
        .join()
        .expect("the writer thread")
        .expect("writing cases to the reference");
    let status = child.wait().expect("waiting for node");
    assert!(status.success(), "the reference exited with {status}");
    answers
}
