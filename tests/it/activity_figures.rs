//! The measurements behind the activity rule's defaults (issue 38; README, "Activity"):
//! what a real shell at its prompt, the real Codex at its idle prompt, and the real Codex
//! working behind its animated "Working" indicator write and use. Ignored: it takes a couple
//! of minutes and prints figures rather than checking them. Run with
//! `cargo test --test it activity_figures:: -- --ignored --nocapture` (the Codex part needs
//! `npm ci --prefix tests/agents`).
//!
//! Output is sampled as the session's stream offset every 20 ms (so gaps are known to
//! ±20 ms); CPU as the session's cgroup figure (`usage.cpuSeconds`, this daemon runs its
//! sessions in cgroups where the machine lets it).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use atc::agents::AgentKind;
use atc::config::AgentConfig;
use atc_testkit::codex_home::{AppServer, CodexHome, Setup};
use atc_testkit::fake_model::{FakeModel, Reply, AGENT_WITHIN};
use atc_testkit::{fake_openai, id_of, real_agents, test_config, TestDaemon};
use serde_json::json;

/// What a session did over a span.
#[derive(Debug)]
struct Figures {
    span: Duration,
    bytes: u64,
    /// Chunks of output seen (offset moves between two looks).
    writes: u32,
    /// The longest time without output, including the span's ends.
    longest_gap: Duration,
    /// CPU used over the span, in percent of one CPU; `None` without cgroups.
    cpu_percent: Option<f64>,
    /// The least and the most CPU of any 5 s window (a default sweep's), in percent.
    window_cpu: Option<(f64, f64)>,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.2} %"));
        write!(
            f,
            "{:.1} s: {} bytes in {} writes, longest gap {:.2} s, CPU {} (5 s windows: {})",
            self.span.as_secs_f64(),
            self.bytes,
            self.writes,
            self.longest_gap.as_secs_f64(),
            pct(self.cpu_percent),
            self.window_cpu
                .map_or("-".to_string(), |(lo, hi)| format!("{lo:.2} to {hi:.2} %")),
        )
    }
}

async fn cpu_seconds(d: &TestDaemon, id: &str) -> Option<f64> {
    d.session(id).await["usage"]["cpuSeconds"].as_f64()
}

/// Watches `id` for `span`.
async fn measure(d: &TestDaemon, id: &str, span: Duration) -> Figures {
    let cpu_from = cpu_seconds(d, id).await;
    let (_, mut offset) = d.stream_end(id).await;
    let start = Instant::now();
    let (first, mut last_write, mut longest, mut writes) = (offset, start, Duration::ZERO, 0);
    let mut cpu_at: Vec<(Instant, f64)> = cpu_from.map(|c| (start, c)).into_iter().collect();
    while start.elapsed() < span {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if cpu_at
            .last()
            .is_some_and(|(t, _)| t.elapsed() >= Duration::from_secs(1))
        {
            if let Some(c) = cpu_seconds(d, id).await {
                cpu_at.push((Instant::now(), c));
            }
        }
        let (_, now) = d.stream_end(id).await;
        if now != offset {
            longest = longest.max(last_write.elapsed());
            last_write = Instant::now();
            writes += 1;
            offset = now;
        }
    }
    longest = longest.max(last_write.elapsed());
    let elapsed = start.elapsed();
    let cpu_to = cpu_seconds(d, id).await;
    let windows: Vec<f64> = cpu_at
        .windows(6)
        .map(|w| 100.0 * (w[5].1 - w[0].1) / (w[5].0 - w[0].0).as_secs_f64())
        .collect();
    let window_cpu = (!windows.is_empty()).then(|| {
        windows
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(*p), hi.max(*p)))
    });
    Figures {
        window_cpu,
        span: elapsed,
        bytes: offset - first,
        writes,
        longest_gap: longest,
        cpu_percent: cpu_from
            .zip(cpu_to)
            .map(|(a, b)| 100.0 * (b - a) / elapsed.as_secs_f64()),
    }
}

#[actix_rt::test]
#[ignore = "measures; prints figures for README"]
async fn figures_of_a_shell_and_of_codex_idle_and_working() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let state = tmp.path().join("state");
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(&cwd).expect("work dir");
    let mut config = test_config();
    config.agents.insert(
        "psh".into(),
        AgentConfig {
            bin: "/bin/sh".into(),
            env: BTreeMap::from([("PS1".to_string(), "$ ".to_string())]),
            ..Default::default()
        },
    );
    // Codex working behind its indicator for 15 s: a shell call of `sleep 15`, run without
    // asking (approvals off, no sandbox).
    let fake = FakeModel::new([Reply::Bash("sleep 15".into()), Reply::Text("slept".into())]);
    let served = fake_openai::start(&fake);
    let codex = real_agents::real_bin("codex");
    let home = CodexHome::prepare(
        &tmp.path().join("home"),
        &state.join("codex-home"),
        &Setup {
            fake_url: &served.url,
            trusted: &cwd,
            atc: None,
            app_server: AppServer::InProcess,
        },
    );
    if let Some(bin) = &codex {
        config.agents.insert(
            "codex".into(),
            AgentConfig {
                bin: bin.display().to_string(),
                kind: Some(AgentKind::Codex),
                env: home.env(),
                args: [
                    "-c",
                    "approval_policy=\"never\"",
                    "-c",
                    "sandbox_mode=\"danger-full-access\"",
                ]
                .map(String::from)
                .to_vec(),
                ..Default::default()
            },
        );
    }
    let d = TestDaemon::start_on(&state, config).await;

    let sh = id_of(
        &d.spawn_with(json!({"agent": "psh", "cwd": cwd, "cols": 120, "rows": 40}))
            .await,
    );
    d.wait_screen(&sh, "$").await;
    eprintln!(
        "shell at its prompt: {}",
        measure(&d, &sh, Duration::from_secs(30)).await
    );

    let Some(_) = codex else {
        eprintln!("no real Codex installed: its figures are not measured");
        return;
    };
    let cx = id_of(
        &d.spawn_with(json!({"agent": "codex", "cwd": cwd, "cols": 120, "rows": 40}))
            .await,
    );
    d.wait_screen_within(&cx, "? for shortcuts", AGENT_WITHIN)
        .await;
    d.wait_paste_mode(&cx, AGENT_WITHIN).await;
    eprintln!(
        "codex at its prompt: {}",
        measure(&d, &cx, Duration::from_secs(30)).await
    );
    d.submit(&cx, "Sleep a while").await;
    d.wait_screen_within(&cx, "Working", AGENT_WITHIN).await;
    eprintln!(
        "codex working (sleep 15): {}",
        measure(&d, &cx, Duration::from_secs(12)).await
    );
    d.wait_screen_within(&cx, "slept", AGENT_WITHIN).await;
    eprintln!(
        "codex at its prompt after the turn: {}",
        measure(&d, &cx, Duration::from_secs(30)).await
    );
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "measures; prints figures for README"]
async fn figures_of_claude_working_behind_its_spinner() {
    let script = vec![Reply::Bash("sleep 20".into()), Reply::Text("slept".into())];
    let Some(w) = atc_testkit::claude_world::world(script).await else {
        eprintln!("no real Claude installed: its figures are not measured");
        return;
    };
    let id = w.spawn(json!({})).await;
    eprintln!(
        "claude at its prompt: {}",
        measure(&w.d, &id, Duration::from_secs(20)).await
    );
    w.submit_turn(&id, "Sleep a while").await;
    // The world's Claude runs its shell without asking: from here it works behind its
    // spinner for the 20 s of the call.
    eprintln!(
        "claude working (sleep 20, spinner): {}",
        measure(&w.d, &id, Duration::from_secs(15)).await
    );
    w.done_with(&id, "slept").await;
    eprintln!(
        "claude at its prompt after the turn: {}",
        measure(&w.d, &id, Duration::from_secs(30)).await
    );
    w.d.stop().await;
}
