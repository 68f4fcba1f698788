//! Measures remote sessions over the impd simulator against local ones:
//!
//! ```text
//! cargo run --release --example imp_bench [-- --drops 100 --mib 64]
//! ```
//!
//! It starts the simulator and a daemon in this process (a `local` PTY target and an `imp`
//! target `box` on the simulator), then measures:
//!
//! * reconnect time after a dropped connection, over `--drops` drops (alternately impd
//!   dropping output, close 1011, and detaching the viewer as slow): from the drop until the
//!   simulator has the session attached again on a new connection;
//! * bytes lost or repeated across those drops: a shell prints numbered lines the whole time
//!   (impd repeats the last 64 bytes on every resume, as at-least-once delivery may), and an
//!   attached client must see every line exactly once, byte for byte;
//! * throughput to one attached WebSocket client, `head -c <mib>M /dev/zero | base64` in an
//!   imp session and in a local one, from the first byte after a start marker to the end
//!   marker.
//!
//! Everything runs on one actix system thread (awc is not `Send`) except the simulator, which
//! has its own thread and runs guest processes on this machine. Every wait has a deadline.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use actix_http::ws;
use anyhow::{bail, Context as _};
use atc::config::Config;
use atc::daemon::{Daemon, DaemonHandle, DaemonOptions};
use bytes::Bytes;
use clap::Parser;
use futures_util::{SinkExt as _, StreamExt as _};
use impd_sim::{ImpdSim, SimOptions};
use serde_json::{json, Value};

/// Reconnects, continuity and throughput of `imp` sessions over the impd simulator.
#[derive(Parser, Debug)]
struct Args {
    /// Connection drops to time.
    #[arg(long, default_value_t = 100)]
    drops: usize,
    /// MiB of zeros base64-encoded by the throughput command.
    #[arg(long, default_value_t = 64)]
    mib: u64,
}

/// Bound on any single wait; only a failure ever reaches it.
const WITHIN: Duration = Duration::from_secs(30);

const MIB: f64 = 1024.0 * 1024.0;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    actix_rt::System::new().block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let sim = ImpdSim::try_start(SimOptions::default()).context("starting the simulator")?;
    let dir = tempfile::tempdir()?;
    let daemon = BenchDaemon::start(dir.path(), &sim).await?;
    let result = measure(&args, &sim, &daemon, dir.path()).await;
    daemon.handle.stop().await;
    let figures = result?;
    figures.print(&args);
    Ok(())
}

struct Figures {
    reconnect_ms: Vec<f64>,
    lines: u64,
    stream_bytes: u64,
    lost_lines: u64,
    repeated_lines: u64,
    byte_exact: bool,
    fresh_attaches: usize,
    imp: Throughput,
    local: Throughput,
}

struct Throughput {
    bytes: u64,
    secs: f64,
    expected: u64,
    text_frames: Vec<String>,
    /// Fresh attaches seen (screen reset, then impd's replay): gaps in the output.
    resets: usize,
}

impl Throughput {
    fn mib_s(&self) -> f64 {
        self.bytes as f64 / MIB / self.secs
    }

    /// Share of the payload the client never got. Replays can repeat bytes too, so this is the
    /// net figure; the reset count says how many gaps there were.
    fn loss(&self) -> String {
        let lost = self.expected.saturating_sub(self.bytes) as f64 / self.expected as f64;
        format!("{:.1}% ({} resets)", lost * 100.0, self.resets)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl Figures {
    fn print(&self, args: &Args) {
        let mut r = self.reconnect_ms.clone();
        r.sort_by(f64::total_cmp);
        println!();
        println!("| figure | imp (simulator) | local PTY |");
        println!("| --- | --- | --- |");
        println!(
            "| reconnect after a drop, {} drops: p50 / p99 / max | {:.2} / {:.2} / {:.2} ms | |",
            r.len(),
            percentile(&r, 0.5),
            percentile(&r, 0.99),
            r.last().copied().unwrap_or(f64::NAN),
        );
        println!(
            "| lines lost / repeated across the drops ({} lines, {} bytes) | {} / {}{} | |",
            self.lines,
            self.stream_bytes,
            self.lost_lines,
            self.repeated_lines,
            if self.byte_exact {
                ", byte-exact"
            } else {
                ", BYTES DIFFER"
            },
        );
        println!(
            "| one attached client, {} MiB of zeros as base64: delivered | {:.1} MiB/s | {:.1} MiB/s |",
            args.mib,
            self.imp.mib_s(),
            self.local.mib_s(),
        );
        println!(
            "| of that payload lost (fresh attaches after a gap) | {} | {} |",
            self.imp.loss(),
            self.local.loss(),
        );
        for (name, t) in [("imp", &self.imp), ("local", &self.local)] {
            if !t.text_frames.is_empty() {
                println!("note: {name} client got text frames: {:?}", t.text_frames);
            }
        }
        if self.fresh_attaches > 0 {
            println!(
                "note: {} drops ended in a fresh attach (screen reset and replay)",
                self.fresh_attaches
            );
        }
    }
}

async fn measure(
    args: &Args,
    sim: &ImpdSim,
    d: &BenchDaemon,
    dir: &Path,
) -> anyhow::Result<Figures> {
    eprintln!("reconnects: {} drops…", args.drops);
    let (reconnect_ms, continuity) = reconnects(args.drops, sim, d, dir).await?;
    eprintln!("throughput: imp…");
    let imp = throughput(d, "box", args.mib).await?;
    eprintln!("throughput: local…");
    let local = throughput(d, "local", args.mib).await?;
    Ok(Figures {
        reconnect_ms,
        lines: continuity.lines,
        stream_bytes: continuity.bytes,
        lost_lines: continuity.lost,
        repeated_lines: continuity.repeated,
        byte_exact: continuity.exact,
        fresh_attaches: continuity.resets,
        imp,
        local,
    })
}

struct Continuity {
    lines: u64,
    bytes: u64,
    lost: u64,
    repeated: u64,
    exact: bool,
    resets: usize,
}

/// What a fresh attach writes before impd's replay.
const SCREEN_RESET: &[u8] = b"\x1b[0m\x1b[H\x1b[2J";

async fn reconnects(
    drops: usize,
    sim: &ImpdSim,
    d: &BenchDaemon,
    dir: &Path,
) -> anyhow::Result<(Vec<f64>, Continuity)> {
    let id = d.spawn("box").await?;
    d.wait_attached(&id).await?;
    let session = impd_client::exec_session_name(&id);
    let imp = sim
        .imps()
        .into_iter()
        .find(|i| i.sessions.iter().any(|s| s.name == session))
        .map(|i| i.name)
        .context("the session's imp")?;
    let mut client = d.attach(&id).await?;
    let stop = dir.join("stop-lines");
    d.submit(
        &id,
        &format!(
            "i=0; while [ ! -e {} ]; do echo line-$i; i=$((i+1)); sleep 0.002; done; echo DONE-$((40+2))",
            stop.display()
        ),
    )
    .await?;
    let mut seen = client.read_until(b"line-0\r\n").await?;
    let faults = sim.faults();
    faults.set_resume_overlap(64);
    let opens = |sim: &ImpdSim| -> u64 { sim.stats().exec_opens.values().sum() };
    let mut times = Vec::with_capacity(drops);
    let mut opened_at = Vec::with_capacity(drops);
    for n in 0..drops {
        let before = opens(sim);
        let t0 = Instant::now();
        let dropped = if n % 2 == 0 {
            faults.drop_output(&imp, &session)
        } else {
            faults.detach_slow(&imp, &session)
        };
        if !dropped {
            bail!("drop {n}: no viewer to drop");
        }
        // Spin, yielding to the daemon's actors on this thread: timers would round to 1 ms.
        let mut opened = None;
        loop {
            if opened.is_none() && opens(sim) > before {
                opened = Some(t0.elapsed().as_secs_f64() * 1000.0);
            }
            let back = opens(sim) > before
                && sim
                    .session(&imp, &session)
                    .is_some_and(|s| s.attached && s.exit.is_none());
            if back {
                break;
            }
            if t0.elapsed() > WITHIN {
                bail!("drop {n}: the harness did not come back");
            }
            tokio::task::yield_now().await;
        }
        let back_at = t0.elapsed().as_secs_f64() * 1000.0;
        times.push(back_at);
        opened_at.push(opened.unwrap_or(back_at));
        // Read what arrived meanwhile so the client never falls behind.
        seen.extend(client.drain().await?);
    }
    std::fs::write(&stop, b"")?;
    seen.extend(client.read_until(b"DONE-42\r\n").await?);
    let continuity = check_lines(&seen);
    client.close().await;
    d.kill(&id).await?;
    opened_at.sort_by(f64::total_cmp);
    eprintln!(
        "drop → next opening message at impd: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&opened_at, 0.5),
        percentile(&opened_at, 0.99)
    );
    Ok((times, continuity))
}

/// Checks the numbered lines a client saw: every number from 0 to the last exactly once, and
/// the bytes from `line-0` to the end marker exactly what the loop printed.
fn check_lines(seen: &[u8]) -> Continuity {
    let resets = seen
        .windows(SCREEN_RESET.len())
        .filter(|w| *w == SCREEN_RESET)
        .count();
    let start = find(seen, b"line-0\r\n").unwrap_or(0);
    let end = find(seen, b"DONE-42\r\n").unwrap_or(seen.len());
    let body = &seen[start..end];
    let numbers: Vec<u64> = String::from_utf8_lossy(body)
        .split("\r\n")
        .filter_map(|l| l.strip_prefix("line-"))
        .filter_map(|n| n.parse().ok())
        .collect();
    let last = numbers.iter().copied().max().unwrap_or(0);
    let mut counts = vec![0u32; last as usize + 1];
    for n in &numbers {
        counts[*n as usize] += 1;
    }
    let lost = counts.iter().filter(|c| **c == 0).count() as u64;
    let repeated = counts.iter().map(|c| c.saturating_sub(1) as u64).sum();
    let expected: Vec<u8> = (0..=last)
        .flat_map(|i| format!("line-{i}\r\n").into_bytes())
        .collect();
    Continuity {
        lines: last + 1,
        bytes: body.len() as u64,
        lost,
        repeated,
        exact: body == expected.as_slice(),
        resets,
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn throughput(d: &BenchDaemon, target: &str, mib: u64) -> anyhow::Result<Throughput> {
    let id = d.spawn(target).await?;
    if target != "local" {
        d.wait_attached(&id).await?;
    }
    let mut client = d.attach(&id).await?;
    d.submit(
        &id,
        &format!("echo START-$((1+1)); head -c {mib}M /dev/zero | base64; echo DONE-$((40+2))"),
    )
    .await?;
    // The payload starts right after the start marker's line.
    let first = client.read_until(b"START-2\r\n").await?;
    let after = find(&first, b"START-2\r\n").map_or(0, |i| i + b"START-2\r\n".len());
    let t0 = Instant::now();
    let mut bytes = (first.len() - after) as u64;
    let mut tail: Vec<u8> = first[after..].to_vec();
    let mut text_frames = Vec::new();
    let mut resets = count(&tail, SCREEN_RESET);
    let end = b"DONE-42\r\n";
    loop {
        if let Some(i) = find(&tail, end) {
            // Count only up to the end marker.
            bytes -= (tail.len() - i) as u64;
            break;
        }
        // Keep enough to find a marker or a reset that straddles two frames.
        let keep = tail.len().saturating_sub(SCREEN_RESET.len());
        tail.drain(..keep);
        let counted = count(&tail, SCREEN_RESET);
        match client.next().await? {
            Frame::Binary(b) => {
                bytes += b.len() as u64;
                tail.extend_from_slice(&b);
                resets += count(&tail, SCREEN_RESET) - counted;
            }
            // Descriptor and size updates are routine; anything else (a desync) is noted.
            Frame::Text(v) if v["type"] == "state" || v["type"] == "resized" => {}
            Frame::Text(v) => text_frames.push(v.to_string()),
            Frame::Closed => bail!("{target}: the attach socket closed mid-stream"),
        }
        if t0.elapsed() > WITHIN * 4 {
            bail!("{target}: the payload did not finish");
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    client.close().await;
    d.kill(&id).await?;
    // base64 writes 76 characters a line; the terminal turns each newline into CR LF.
    let chars = (mib * 1024 * 1024).div_ceil(3) * 4;
    let expected = chars + chars.div_ceil(76) * 2;
    Ok(Throughput {
        bytes,
        secs,
        expected,
        text_frames,
        resets,
    })
}

/// The in-process daemon and a thin HTTP client for its API.
struct BenchDaemon {
    handle: DaemonHandle,
    url: String,
    token: String,
    http: awc::Client,
}

impl BenchDaemon {
    async fn start(dir: &Path, sim: &ImpdSim) -> anyhow::Result<BenchDaemon> {
        let text = json!({
            "agents": {"sh": {"bin": "/bin/sh", "args": [], "env": {"PS1": ""}}},
            "targets": {
                "local": {"provider": "local-pty"},
                "box": {"provider": "imp", "url": sim.url(), "tokenFile": sim.token_file()},
            },
            "defaultTarget": "local",
        })
        .to_string();
        let config = Config::from_json(text.as_bytes());
        if !config.problems.is_empty() {
            bail!("config problems: {:?}", config.problems);
        }
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let handle = Daemon::start(DaemonOptions {
            state_dir: dir.to_path_buf(),
            config,
            listen: None,
            listener: Some(listener),
            allow_remote: false,
            insecure_plaintext: false,
            tls: None,
            workers: 1,
            runtime_dir: Some(dir.to_path_buf()),
            atc_program: None,
            codex_home: Some(dir.join("codex-home")),
            metrics_listen: None,
        })
        .await
        .context("starting the daemon")?;
        Ok(BenchDaemon {
            url: format!("http://{}", handle.addr),
            token: handle.token.clone(),
            handle,
            http: awc::Client::builder()
                .timeout(Duration::from_secs(30))
                .finish(),
        })
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let method = awc::http::Method::from_bytes(method.as_bytes())?;
        let req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        let mut resp = match body {
            Some(b) => req.send_json(&b).await,
            None => req.send().await,
        }
        .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
        let bytes = resp.body().await?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !resp.status().is_success() {
            bail!("{path}: {} {value}", resp.status());
        }
        Ok(value)
    }

    async fn spawn(&self, target: &str) -> anyhow::Result<String> {
        let body = json!({"agent": "sh", "cwd": "/tmp", "target": target, "cols": 120, "rows": 40});
        let v = self.call("POST", "/v1/sessions", Some(body)).await?;
        v["session"]["id"]
            .as_str()
            .map(str::to_string)
            .context("spawn answered without an id")
    }

    async fn wait_attached(&self, id: &str) -> anyhow::Result<()> {
        let t0 = Instant::now();
        loop {
            let v = self
                .call("GET", &format!("/v1/sessions/{id}"), None)
                .await?;
            if v["session"]["lifecycle"]["attachment"] == "attached" {
                return Ok(());
            }
            if t0.elapsed() > WITHIN {
                bail!("session {id} never attached: {v}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn submit(&self, id: &str, text: &str) -> anyhow::Result<()> {
        self.call(
            "POST",
            &format!("/v1/sessions/{id}/submit"),
            Some(json!({ "text": text })),
        )
        .await
        .map(drop)
    }

    async fn kill(&self, id: &str) -> anyhow::Result<()> {
        self.call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await
            .map(drop)
    }

    async fn attach(&self, id: &str) -> anyhow::Result<AttachClient> {
        let url = format!(
            "{}/v1/sessions/{id}/attach?cols=120&rows=40",
            self.url.replace("http://", "ws://")
        );
        let (_, framed) = awc::Client::builder()
            .max_http_version(awc::http::Version::HTTP_11)
            .finish()
            .ws(url)
            .max_frame_size(16 * 1024 * 1024)
            .bearer_auth(&self.token)
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("attach {id}: {e}"))?;
        let mut client = AttachClient { framed };
        // `attached`, then its prelude (a repaint of the screen), which is not output.
        let prelude = loop {
            match client.next().await? {
                Frame::Text(v) if v["type"] == "attached" => {
                    break v["prelude"].as_u64().unwrap_or(0) as usize
                }
                Frame::Closed => bail!("attach {id}: closed before attached"),
                _ => {}
            }
        };
        let mut got = 0;
        while got < prelude {
            match client.next().await? {
                Frame::Binary(b) => got += b.len(),
                Frame::Closed => bail!("attach {id}: closed in the prelude"),
                Frame::Text(_) => {}
            }
        }
        Ok(client)
    }
}

enum Frame {
    Binary(Bytes),
    Text(Value),
    Closed,
}

/// An attach WebSocket.
struct AttachClient {
    framed: actix_codec::Framed<awc::BoxedSocket, ws::Codec>,
}

impl AttachClient {
    async fn next(&mut self) -> anyhow::Result<Frame> {
        self.next_within(WITHIN)
            .await?
            .context("no frame on the attach socket in time")
    }

    async fn next_within(&mut self, within: Duration) -> anyhow::Result<Option<Frame>> {
        loop {
            let Ok(item) = tokio::time::timeout(within, self.framed.next()).await else {
                return Ok(None);
            };
            return Ok(Some(match item {
                None | Some(Ok(ws::Frame::Close(_))) => Frame::Closed,
                Some(Err(e)) => bail!("attach socket: {e}"),
                Some(Ok(ws::Frame::Binary(b))) => Frame::Binary(b),
                Some(Ok(ws::Frame::Text(t))) => Frame::Text(serde_json::from_slice(&t)?),
                Some(Ok(ws::Frame::Ping(p))) => {
                    self.framed.send(ws::Message::Pong(p)).await?;
                    continue;
                }
                Some(Ok(_)) => continue,
            }));
        }
    }

    /// Reads output until it contains `needle`; returns all of it.
    async fn read_until(&mut self, needle: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let from = out.len().saturating_sub(needle.len());
            match self.next().await? {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Closed => bail!("closed before {:?}", String::from_utf8_lossy(needle)),
            }
            if find(&out[from..], needle).is_some() {
                return Ok(out);
            }
        }
    }

    /// Output already waiting on the socket.
    async fn drain(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(frame) = self.next_within(Duration::from_millis(0)).await? {
            match frame {
                Frame::Binary(b) => out.extend_from_slice(&b),
                Frame::Text(_) => {}
                Frame::Closed => bail!("the attach socket closed"),
            }
        }
        Ok(out)
    }

    async fn close(mut self) {
        // The socket may be gone already; nothing to do then.
        let _ = self.framed.send(ws::Message::Close(None)).await;
    }
}
