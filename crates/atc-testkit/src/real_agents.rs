//! The real agent CLIs from npm, for the tests that run them under atc.
//!
//! `tests/agents/package.json` pins Claude Code and Codex, and its lock file pins every byte;
//! `npm ci --prefix tests/agents` puts their binaries in `tests/agents/node_modules/.bin`.
//! A checkout without them still passes `cargo test`: each real-agent test says it skipped and
//! how to get them, like the page test. CI sets `ATC_REAL_AGENTS=required`, which turns a
//! missing binary into a failure, so a broken install cannot pass as a skip.

use std::path::PathBuf;

/// Where `npm ci` puts the agents' binaries.
pub fn bin_dir() -> PathBuf {
    // This crate sits at `crates/atc-testkit`; `tests/agents` is the workspace root's.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents/node_modules/.bin")
}

/// The installed binary `name` (`claude`, `codex`), or `None` after printing why the test
/// skips. Panics instead when `ATC_REAL_AGENTS=required`.
pub fn real_bin(name: &str) -> Option<PathBuf> {
    let path = bin_dir().join(name);
    if path.is_file() {
        return Some(path);
    }
    let how = format!(
        "the real `{name}` is not installed at {}; run `npm ci --prefix tests/agents` \
         (README, \"The real agents in the tests\")",
        path.display()
    );
    if std::env::var("ATC_REAL_AGENTS").as_deref() == Ok("required") {
        panic!("ATC_REAL_AGENTS=required, but {how}");
    }
    eprintln!("skipped: {how}");
    None
}
