//! A session that runs `atc-proof emit` (see [`crate::emit`]): the agent entry that starts it,
//! its spawn, the stop that ends its stream and the length the stream ended at, and the
//! checks that say the session is unharmed (alive, and its screen shows the stream).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::emit::{byte_at, Ended, LINE, STOP};

/// The agent id the suites' configs give the emitter.
pub const AGENT: &str = "emit";

/// The file the emitter writes its length to, in its working directory.
const DONE_FILE: &str = "emit-done";

/// The `agents` entry that runs `bin emit` at `rate` bytes a second, for at most `max`.
pub fn agent_entry(bin: &Path, rate: u64, max: u64) -> Value {
    json!({
        "bin": bin.display().to_string(),
        "args": ["emit", "--rate", rate.to_string(), "--max", max.to_string(),
                 "--done", DONE_FILE],
        "label": "atc-proof emit (a checksummed stream)",
    })
}

/// A spawned emitting session.
#[derive(Debug, Clone)]
pub struct Emitting {
    pub id: String,
    /// Its working directory, where the done file appears.
    pub dir: PathBuf,
}

impl Emitting {
    /// Spawns one in a fresh directory `dir` at 80×24.
    pub async fn spawn(
        client: &atc_client::DaemonClient,
        dir: PathBuf,
        name: &str,
    ) -> anyhow::Result<Emitting> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // A done file left by an earlier run in the same work dir would read as this
        // stream's end.
        match std::fs::remove_file(dir.join(DONE_FILE)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).context("removing an old done file"),
        }
        let d = client
            .spawn(&json!({
                "agent": AGENT,
                "cwd": dir.display().to_string(),
                "name": name,
                "cols": 80,
                "rows": 24,
            }))
            .await
            .context("spawning an emitting session")?;
        Ok(Emitting {
            id: d.id.to_string(),
            dir,
        })
    }

    /// The attach path, with a resume when `from` is given.
    pub fn attach_path(&self, resume: Option<(&str, u64)>, watch: bool) -> String {
        let mut p = format!("/v1/sessions/{}/attach?cols=80&rows=24", self.id);
        if let Some((stream, from)) = resume {
            p.push_str(&format!("&stream={stream}&from={from}"));
        }
        if watch {
            p.push_str("&mode=watch");
        }
        p
    }

    /// Types the stop marker and waits (up to `within`) for the emitter to say where its
    /// stream ended.
    pub async fn stop(
        &self,
        client: &atc_client::DaemonClient,
        within: Duration,
    ) -> anyhow::Result<(u64, Ended)> {
        let typed = String::from_utf8_lossy(STOP).to_string();
        client
            .post_json(
                &format!("/v1/sessions/{}/input", self.id),
                &json!({ "data": typed }),
            )
            .await
            .context("typing the stop marker")?;
        self.length(within).await
    }

    /// The stream's length, once the emitter has written it (waits up to `within`).
    pub async fn length(&self, within: Duration) -> anyhow::Result<(u64, Ended)> {
        let path = self.dir.join(DONE_FILE);
        let deadline = Instant::now() + within;
        loop {
            if let Some(done) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| Ended::parse(&t))
            {
                return Ok(done);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the emitter wrote no length to {} in {within:?}",
                    path.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the emitter has ended its stream by itself (it reached its size bound).
    pub fn ended_early(&self) -> bool {
        self.dir.join(DONE_FILE).exists()
    }

    /// Whether the session is alive and its screen shows a whole line of the stream.
    pub async fn health(&self, client: &atc_client::DaemonClient) -> Health {
        let alive = match client.get_json(&format!("/v1/sessions/{}", self.id)).await {
            Ok(v) => v["session"]["alive"] == true,
            Err(_) => false,
        };
        let screen = match client
            .get_json(&format!("/v1/sessions/{}/screen", self.id))
            .await
        {
            Ok(v) => v["text"].as_str().is_some_and(shows_stream),
            Err(_) => false,
        };
        Health { alive, screen }
    }

    /// Kills the session; a session already gone is fine.
    pub async fn kill(&self, client: &atc_client::DaemonClient) {
        // Teardown: the daemon is stopped right after, which ends the session anyway.
        let _ = client
            .post_json(&format!("/v1/sessions/{}/kill", self.id), &json!({}))
            .await;
    }
}

/// A session's health after a suite has been at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    /// Its harness is present.
    pub alive: bool,
    /// `GET …/screen` answered with a screen showing a whole line of the stream.
    pub screen: bool,
}

/// Whether a screen's text holds one whole line of the stream, at the place its number says.
pub fn shows_stream(text: &str) -> bool {
    let visible = (LINE - 2) as usize;
    text.lines().any(|row| {
        let row = row.as_bytes();
        let Some(number) = row
            .get(..10)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| d.parse::<u64>().ok())
        else {
            return false;
        };
        row.len() >= visible
            && row[..visible]
                .iter()
                .zip(number * LINE..)
                .all(|(b, k)| *b == byte_at(k))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_row_is_checked_against_its_line_number() {
        let line: String = (7 * LINE..8 * LINE - 2)
            .map(|k| byte_at(k) as char)
            .collect();
        assert!(shows_stream(&format!("junk\n{line}\n")));
        let wrong = line.replacen("0000000007", "0000000008", 1);
        assert!(!shows_stream(&wrong));
        assert!(!shows_stream(&line[..20]));
        assert!(!shows_stream(""));
    }
}
