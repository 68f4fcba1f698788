//! The `security` suite (issue 12 item 6): one daemon child at trace level, an impd simulator
//! holding a broker secret behind an imp target, and the walks that must find nothing:
//!
//! * `walk`: every OpenAPI route without a token or with a wrong one is 401, and a foreign
//!   Origin is refused on every WebSocket upgrade however it is let in;
//! * `modes`: the state dir and what the daemon keeps in it are private;
//! * `listen`: a non-loopback listen without `--allow-remote` does not start;
//! * `leaks`: no credential in any argv, environment, log line, row, state-dir file or answer;
//! * `paths`: hostile session names and cwds put no file anywhere it does not belong;
//! * `cutoffs`: oversized and slow requests are cut off while a polite client is served.
//!
//! The main count is how many slow-loris connections are held at once.

mod cutoffs;
mod leaks;
mod listen;
mod modes;
mod paths;
mod raw;
mod walk;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use impd_sim::{Flag, FlagState, Identity, ImpdSim, Scope, SecretKind, SimOptions};
use serde_json::{json, Value};

use crate::{Plan, Report, Suite, Want};
use atc_testkit::{ChildDaemon, DaemonSpec};
use leaks::{Credential, Place};

/// Answers the walks got, kept for the credential grep.
pub struct Seen {
    /// The daemon's `127.0.0.1:PORT`.
    pub addr: String,
    places: Vec<Place>,
}

impl Seen {
    /// Keeps `a`'s head and body.
    pub fn answer(&mut self, a: &raw::Answer) {
        let mut bytes = a.head.clone().into_bytes();
        bytes.extend_from_slice(b"\r\n\r\n");
        bytes.extend_from_slice(&a.body);
        let first = a.head.lines().next().unwrap_or_default().to_string();
        self.places.push(Place {
            name: format!("an answer ({first})"),
            bytes,
        });
    }
}

/// The broker secret's name at the simulator.
const SECRET: &str = "codex-key";
/// The variable the daemon reads the impd token from.
const IMPD_TOKEN_ENV: &str = "ATC_PROOF_IMPD_TOKEN";
/// A line every env-dumping session prints once its dump is done.
const DUMPED: &str = "env-dumped";

/// Runs the suite.
pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut report = Report::new(Suite::Security, plan.seed);
    let work = plan.work_dir.join("security");
    std::fs::create_dir_all(&work).with_context(|| format!("making {}", work.display()))?;
    let sim = ImpdSim::try_start(SimOptions::default()).context("starting the impd simulator")?;
    let secret = sim
        .faults()
        .add_secret(SECRET, SecretKind::Custom, &["api.openai.com"]);
    sim.faults()
        .set_feature(Flag::GrantableTokens, FlagState::True);
    sim.faults()
        .set_feature(Flag::SecretRebind, FlagState::True);
    let identity = Identity {
        scope: Scope::Manage,
        imps: Some(vec!["atc-*".into()]),
        grantable: Some(vec![SECRET.into()]),
        ..Identity::default()
    };
    if !sim.faults().set_identity(sim.token(), identity) {
        anyhow::bail!("the simulator does not know its own token");
    }
    let outcome = with_sim(plan, &work, &sim, &secret, &mut report, started).await;
    sim.stop();
    outcome?;
    Ok(report)
}

fn config(work: &Path, sim: &ImpdSim) -> Value {
    let dump = |file: &str, tail: &str| {
        format!(
            "env > '{}'; echo {DUMPED}; {tail}",
            work.join(file).display()
        )
    };
    json!({
        "agents": {
            "cat": {"bin": "cat"},
            "envcat": {"bin": "sh", "args": ["-c", dump("env-local.txt", "exec cat")]},
            "claudeish": {"kind": "claude", "bin": "sh", "args": ["-c", "exec cat"]},
            "brokered": {"kind": "codex", "bin": "sh",
                         "args": ["-c", dump("env-imp.txt", "exec sleep 600")],
                         "auth": {"secrets": [SECRET], "placeholders": ["OPENAI_API_KEY"]}},
        },
        "targets": {
            "local": {"provider": "local-pty"},
            // The impd token comes by environment, the way that puts it closest to the
            // sessions: every local one starts from the daemon's environment.
            "box": {"provider": "imp", "url": sim.url(), "tokenEnv": IMPD_TOKEN_ENV,
                    "guestDir": work.join("guest")},
        },
        "defaultTarget": "local",
    })
}

async fn with_sim(
    plan: &Plan,
    work: &Path,
    sim: &ImpdSim,
    secret: &str,
    report: &mut Report,
    started: Instant,
) -> anyhow::Result<()> {
    let state = work.join("state");
    let log = work.join("daemon.log");
    let before = paths::Snapshot::take(&[work, &std::env::temp_dir()]);
    let mut spec = DaemonSpec::new(plan.daemon_bin.clone(), config(work, sim));
    // Trace is the most a log says; debug and info lines are a subset of it.
    spec.env = vec![
        ("RUST_LOG".into(), "trace".into()),
        (IMPD_TOKEN_ENV.into(), sim.token().to_string()),
    ];
    let daemon = ChildDaemon::launch(&spec, &state, &log).await?;
    let addr = daemon.url().trim_start_matches("http://").to_string();
    let token = daemon.token().to_string();
    let client = daemon.client();
    let mut seen = Seen {
        addr: addr.clone(),
        places: Vec::new(),
    };
    let over = |report: &mut Report, phase: &str| {
        let cut = started.elapsed() > plan.limit;
        if cut {
            report.note(format!("cut short by the time limit before {phase}"));
            report.figure("cutShort", 1.0, "count", Want::Zero);
        }
        cut
    };

    // Sessions whose environments are dumped: one local, one on the imp behind the broker.
    let local = client
        .spawn(&json!({"agent": "envcat", "cwd": work, "name": "env-local"}))
        .await
        .context("spawning the env-dumping local session")?
        .id
        .to_string();
    let imp = client
        .spawn(&json!({"agent": "brokered", "cwd": "/tmp", "target": "box", "name": "env-imp"}))
        .await;
    let imp = match imp {
        Ok(d) => Some(d.id.to_string()),
        Err(e) => {
            report.note(format!(
                "the brokered session on the imp did not spawn: {e}"
            ));
            None
        }
    };
    let mut sessions_ok = wait_file(&work.join("env-local.txt"), Duration::from_secs(20)).await;
    if imp.is_some() {
        sessions_ok &= wait_file(&work.join("env-imp.txt"), Duration::from_secs(30)).await;
    }
    report.figure(
        "envDumps",
        if sessions_ok { 1.0 } else { 0.0 },
        "count",
        Want::Equal(1.0),
    );

    // 1. Every route without a token, or with a wrong one.
    let doc = client
        .get_json("/v1/openapi.json")
        .await
        .context("GET /v1/openapi.json")?;
    let walked = walk::walk(&addr, &doc, &local, &mut seen).await;
    report.figure(
        "routesWalked",
        walked.routes as f64,
        "count",
        Want::AtLeast(20.0),
    );
    report.zero("unauthorizedMisses", walked.misses.len() as u64, "count");
    report.zero(
        "publicRoutesBroken",
        walked.public_broken.len() as u64,
        "count",
    );
    for m in walked.misses.iter().chain(&walked.public_broken).take(8) {
        report.note(format!("401 walk: {m}"));
    }
    authorised_gets(&addr, &token, &doc, &local, &mut seen).await;

    // 2. Foreign Origins on every upgrade.
    if !over(report, "the Origin check") {
        let o = walk::origins(&addr, &token, &local, &mut seen).await;
        report.info("upgradesTried", o.tried as f64, "count");
        report.figure(
            "originsRefused",
            o.refused as f64,
            "count",
            Want::Equal(o.tried as f64),
        );
        report.figure(
            "controlUpgradesOpened",
            o.control_opened as f64,
            "count",
            Want::Equal(o.control_tried.max(1) as f64),
        );
        for p in o.problems.iter().take(8) {
            report.note(format!("origin: {p}"));
        }
    }

    // 3. Hostile names and cwds.
    let escapes = if over(report, "the path check") {
        None
    } else {
        Some(paths::spawn_hostile(&client, report).await)
    };

    // 4. Modes, once everything above made its files.
    let socket = reporter_socket(&state);
    if socket.is_none() {
        report.note("the reporter socket is not in the state dir (its path is too long?): its mode was not checked");
    }
    let (checked, bad) = modes::violations(&state, socket.as_deref());
    report.info("modesChecked", checked as f64, "count");
    report.zero("modeViolations", bad.len() as u64, "count");
    for b in bad.iter().take(10) {
        report.note(format!("mode: {b}"));
    }

    // 5. Cut-offs, with the polite client's latency.
    if !over(report, "the cut-off checks") {
        let cap = 1024 * 1024;
        let c = cutoffs::run(&addr, &token, cap, plan.count_or(32) as usize).await;
        report.info("cutoffChecks", c.tried as f64, "count");
        report.figure(
            "cutoffChecksPassed",
            c.passed as f64,
            "count",
            Want::Equal(c.tried as f64),
        );
        report.zero("wellBehavedFailures", c.client_failures, "count");
        let mut lat = c.latencies;
        report.info("wellBehavedRequests", lat.len() as f64, "count");
        report.latency("wellBehaved", &mut lat);
        for f in c.failures.iter().take(8) {
            report.note(format!("cut-off: {f}"));
        }
    }

    // 6. The grep, over everything the daemon and its sessions hold now.
    // The daemon's own environment holds the impd token because we put it there; what
    // matters is that nothing below it gets it.
    let mut places = leaks::processes(std::process::id(), daemon.pid());
    places.extend(leaks::files(&state, &["token"]));
    for f in ["env-local.txt", "env-imp.txt"] {
        if let Ok(bytes) = std::fs::read(work.join(f)) {
            places.push(Place {
                name: format!("the environment a session dumped ({f})"),
                bytes,
            });
        }
    }
    for id in [Some(&local), imp.as_ref()].into_iter().flatten() {
        if let Ok(screen) = client.get_json(&format!("/v1/sessions/{id}/screen")).await {
            places.push(Place {
                name: format!("the screen of session {id}"),
                bytes: screen.to_string().into_bytes(),
            });
        }
    }
    match leaks::rows(&state.join("atc.db")).await {
        Ok(rows) => {
            report.figure(
                "tablesDumped",
                rows.len() as f64,
                "count",
                Want::AtLeast(1.0),
            );
            places.extend(rows);
        }
        Err(e) => {
            report.figure("tablesDumped", 0.0, "count", Want::AtLeast(1.0));
            report.note(format!("could not dump the database: {e}"));
        }
    }
    places.push(Place {
        name: "the daemon log (trace)".into(),
        bytes: daemon.log().into_bytes(),
    });
    let guest = work.join("guest");
    places.extend(
        leaks::files(&guest, &[])
            .into_iter()
            .filter(|p| !p.name.contains("/bin/")),
    );
    places.append(&mut seen.places);
    let credentials = vec![
        Credential {
            what: "the daemon token".into(),
            value: token.clone(),
        },
        Credential {
            what: "the impd token".into(),
            value: sim.token().to_string(),
        },
        Credential {
            what: "the broker secret".into(),
            value: secret.to_string(),
        },
    ];
    let found = leaks::find(&credentials, &places);
    report.info("placesSearched", places.len() as f64, "count");
    report.zero("credentialLeaks", found.len() as u64, "count");
    for f in found.iter().take(10) {
        report.note(format!("leak: {f}"));
    }

    // 7. What files appeared, and where.
    if let Some(spawned) = escapes {
        let after = paths::Snapshot::take(&[work, &std::env::temp_dir()]);
        let stray = paths::strays(&before, &after, &state, &guest, work);
        report.info("hostileSpawns", spawned as f64, "count");
        report.zero("pathEscapes", stray.len() as u64, "count");
        for s in stray.iter().take(10) {
            report.note(format!("path: {s}"));
        }
    }

    // 8. Non-loopback listens, on state dirs of their own.
    if !over(report, "the listen refusals") {
        let config_path = work.join("refusal.config.json");
        std::fs::write(
            &config_path,
            json!({"agents": {"cat": {"bin": "cat"}}}).to_string(),
        )?;
        let (cases, bad) = listen::refusals(&plan.daemon_bin, work, &config_path).await;
        report.info("remoteListenCases", cases as f64, "count");
        report.zero("remoteListenNotRefused", bad.len() as u64, "count");
        for b in bad.iter().take(5) {
            report.note(format!("listen: {b}"));
        }
    }

    // Sessions go with the daemon; a clean stop ends them.
    if !daemon.stop_within(Duration::from_secs(20)).await {
        report.note("the daemon did not stop within 20 s and was killed");
    }
    Ok(())
}

/// Every GET route that is no socket, with the token, so what the daemon answers its owner is
/// searched too.
async fn authorised_gets(addr: &str, token: &str, doc: &Value, session: &str, seen: &mut Seen) {
    let Some(paths) = doc["paths"].as_object() else {
        return;
    };
    let bearer = format!("Bearer {token}");
    for (template, item) in paths {
        if item.get("get").is_none() || template.ends_with("/attach") || template == "/v1/events" {
            continue;
        }
        let path = template.replace("{id}", session);
        let req = raw::request("GET", &path, addr, &[("Authorization", &bearer)], None);
        if let Ok(a) = raw::exchange(addr, &req, Duration::from_secs(10)).await {
            seen.answer(&a);
        }
    }
}

/// Where the reporter socket is, as the daemon puts it: in the state dir while that path is
/// short enough, else in the runtime dir under a name of its own (found by looking).
fn reporter_socket(state: &Path) -> Option<PathBuf> {
    let in_state = state.join("atc.sock");
    if in_state.exists() {
        return Some(in_state);
    }
    None
}

/// Waits until `path` holds a full dump (the session echoes [`DUMPED`] after writing it).
async fn wait_file(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains("PATH=")) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
