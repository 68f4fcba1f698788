//! A daemon asked to listen beyond loopback without `--allow-remote` must not start: it exits
//! non-zero, says why, and never binds. Checked on the main listener and on the metrics one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One refusal case: extra daemon arguments.
const CASES: &[(&str, &[&str])] = &[
    ("--listen 0.0.0.0:0", &["--listen", "0.0.0.0:0"]),
    ("--listen [::]:0", &["--listen", "[::]:0"]),
    (
        "--metrics-listen 0.0.0.0:0",
        &["--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"],
    ),
];

/// Runs each case as a child daemon on a fresh state dir under `work`; returns how many
/// cases were tried and each one that did not refuse properly, described.
pub async fn refusals(bin: &Path, work: &Path, config: &Path) -> (u64, Vec<String>) {
    let mut bad = Vec::new();
    for (i, (what, args)) in CASES.iter().enumerate() {
        let state = work.join(format!("remote-refusal-{i}"));
        let log = work.join(format!("remote-refusal-{i}.log"));
        let outcome = run_one(bin, &state, &log, config, args).await;
        match outcome {
            Ok((code, text)) => {
                let says_why = text.contains("non-loopback") && text.contains("--allow-remote");
                if code == Some(0) || code.is_none() || !says_why {
                    bad.push(format!("{what}: exit {code:?}, said {text:?}"));
                }
                // It must not have got as far as announcing itself.
                if state.join("daemon.json").exists() {
                    bad.push(format!("{what}: wrote daemon.json"));
                }
            }
            Err(e) => bad.push(format!("{what}: {e}")),
        }
    }
    (CASES.len() as u64, bad)
}

/// The exit code and stderr of one daemon child, killed if it runs past 20 s.
async fn run_one(
    bin: &Path,
    state: &Path,
    log: &Path,
    config: &Path,
    args: &[&str],
) -> Result<(Option<i32>, String), String> {
    let file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let mut child = Command::new(bin)
        .arg("daemon")
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .args(args)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                return Ok((status.code(), text));
            }
            Ok(None) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(None) => {
                // It started instead of refusing: the finding; reaped here.
                let _ = child.kill();
                let _ = child.wait();
                return Ok((None, "still running after 20 s".into()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}
