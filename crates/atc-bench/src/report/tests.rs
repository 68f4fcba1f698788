//! The report's tests: the table and the JSON of made-up figures, one behaviour each.

use super::*;
use crate::cleanup::CleanupReport;
use crate::delivery::{ClientFigures, Ending};
use crate::payload::{Payload, Shape};
use crate::rounds::ShapeRoundKeys;
use crate::spawn::SpawnBatch;
use crate::stats::Latency;

fn ok<T>(figures: T) -> Option<PhaseReport<T>> {
    Some(PhaseReport {
        outcome: Outcome::Ok,
        elapsed_ms: 1.0,
        error: None,
        figures: Some(figures),
        cleanup: None,
    })
}

fn latency(p50: f64, p99: f64) -> Latency {
    Latency {
        count: 100,
        min_us: p50 / 2.0,
        p50_us: p50,
        p90_us: (p50 + p99) / 2.0,
        p99_us: p99,
        max_us: p99 * 2.0,
        mean_us: p50,
    }
}

fn settings() -> Settings {
    Settings {
        url: Some("http://127.0.0.1:7799".into()),
        daemon_pid: Some(42),
        phases: Phase::ALL.to_vec(),
        agent: "cat".into(),
        sessions: 1000,
        concurrency: 16,
        payloads: vec![Payload {
            bytes: 256 << 20,
            shape: Shape::Lines,
        }],
        echo_count: 2000,
        fanout_clients: 8,
        slow_rate_mib_per_sec: 1.0,
        scale_steps: None,
        phase_timeout_secs: 120.0,
        floor: FloorUse::Off,
        spawn_limits: None,
        storm: None,
        storm_baseline_url: None,
        reach: None,
    }
}

pub(super) fn empty() -> Report {
    Report {
        settings: settings(),
        spawn: None,
        spawn_limited: None,
        echo: None,
        shapes: Vec::new(),
        scale: None,
        reach: None,
        storm: None,
        storm_baseline: None,
        bare_spawn: None,
        bare_echo: None,
        floor_echo: None,
        rounds: None,
    }
}

/// The report of the one shape the settings name, made when first asked for.
fn lines(r: &mut Report) -> &mut ShapeReport {
    if r.shapes.is_empty() {
        r.shapes = r.settings.payloads.iter().map(ShapeReport::new).collect();
    }
    &mut r.shapes[0]
}

fn scale_step(sessions: u32, rss_kib: u64) -> crate::scale::ScaleStep {
    crate::scale::ScaleStep {
        sessions,
        busy: sessions / 10,
        attached: sessions / 10,
        ramp_ms: 1000.0,
        pty_in_use: Some(u64::from(sessions)),
        rss_kib,
        rss_per_session_kib: (rss_kib - 10_240) as f64 / f64::from(sessions),
        fds: 20 + 2 * u64::from(sessions),
        fds_per_session: 2.0,
        idle_added_kib: Some(12.0),
        busy_added_kib: None,
        idle_cpu_pct: 0.33,
        idle_window_ms: 3000.0,
        list: Some(latency(4_000.0, 9_000.0)),
        listed: sessions as usize,
        echo: Some(latency(150.0, 310.0)),
    }
}

#[test]
fn the_scale_table_has_a_row_per_step_the_limits_and_the_linearity() {
    let mut r = empty();
    let steps = vec![scale_step(500, 18_240), scale_step(1000, 26_240)];
    let linearity = crate::scale::Linearity::of(&steps);
    r.scale = ok(ScaleFigures {
        pty: crate::limits::PtyCount {
            max: 4096,
            in_use: 3,
            reserve: Some(1024),
        },
        open_file_limit: Some(crate::limits::OpenFileLimit {
            soft: crate::limits::Limit::Count(20000),
            hard: crate::limits::Limit::Unlimited,
        }),
        baseline_rss_kib: 10_240,
        baseline_fds: 20,
        steps,
        linearity,
        stopped: None,
    });
    r.settings.phases = vec![Phase::Scale];
    r.settings.scale_steps = Some(vec![500, 1000]);
    let table = r.to_table();
    assert!(table.contains("scale steps 500, 1000 of"), "{table}");
    assert!(!table.contains("phase  figure"), "{table}");
    assert!(
        table.contains("kernel.pty.max 4096 with 3 in use"),
        "{table}"
    );
    assert!(table.contains("soft 20000 / hard unlimited"), "{table}");
    let row = |n: &str| table.lines().find(|l| l.trim_start().starts_with(n));
    let r500 = row("500 ").expect("a row for 500");
    assert!(
        r500.contains("16.0 KiB") && r500.contains("0.33 %"),
        "{r500}"
    );
    assert!(row("1000 ").is_some(), "{table}");
    assert!(
        table.contains("slope 16.0 KiB/session") && table.contains("×1.00, ×1.00"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("JSON");
    assert_eq!(json["scale"]["figures"]["steps"][1]["sessions"], 1000);
    assert_eq!(
        json["scale"]["figures"]["openFileLimit"]["hard"],
        "unlimited"
    );
}

fn spawn_pass(rate: f64, p50: f64, p99: f64, cpu_us: f64) -> SpawnFigures {
    SpawnFigures {
        batch: SpawnBatch {
            requested: 100,
            timed_out: false,
            spawned: 100,
            failed: 0,
            first_error: None,
            elapsed_ms: 100.0,
            spawns_per_sec: rate,
            latency: Some(latency(p50, p99)),
            timeline: Vec::new(),
        },
        rss_before_kib: None,
        rss_after_kib: None,
        rss_per_session_kib: None,
        cpu_per_spawn_us: Some(cpu_us),
        launch: None,
        limits: None,
        limits_refused: None,
    }
}

#[test]
fn the_pass_with_limits_sits_under_the_one_without_with_its_ratio() {
    let mut r = empty();
    let limits = SessionLimits {
        memory_mib: Some(512),
        pids: Some(256),
        cpu_percent: Some(100),
    };
    r.settings.spawn_limits = Some(limits);
    r.spawn = ok(spawn_pass(1000.0, 10_000.0, 20_000.0, 400.0));
    let mut with = spawn_pass(800.0, 12_000.0, 30_000.0, 500.0);
    with.limits = Some(limits);
    r.spawn_limited = ok(with);
    let cost = r.limits_cost().expect("both passes finished");
    assert_eq!(cost.spawns_per_sec, Some(0.8));
    assert_eq!(cost.latency_p50, Some(1.2));
    assert_eq!(cost.latency_p99, Some(1.5));
    assert_eq!(cost.cpu_per_spawn, Some(1.25));
    let table = r.to_table();
    let line = |needle: &str| {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} row in\n{table}"))
            .to_string()
    };
    assert!(line("spawn with limits").contains("memoryMiB=512, pids=256, cpuPercent=100"));
    assert!(line("spawns/s (vs without)").contains("800.0 (×0.80)"));
    assert!(line("latency p50 / p99 (vs without)").contains("(p50 ×1.20, p99 ×1.50)"));
    assert!(line("server CPU per spawn (vs without)").contains("500 µs (×1.25)"));
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("JSON");
    assert_eq!(v["limitsCost"]["cpuPerSpawn"], 1.25);
    assert_eq!(v["spawnLimited"]["figures"]["limits"]["memoryMiB"], 512);
    assert_eq!(v["settings"]["spawnLimits"]["pids"], 256);
}

#[test]
fn a_daemon_that_refuses_limits_says_so_and_gives_no_ratio() {
    let mut r = empty();
    r.spawn = ok(spawn_pass(1000.0, 10_000.0, 20_000.0, 400.0));
    let mut refused = spawn_pass(0.0, 0.0, 0.0, 0.0);
    refused.batch.spawned = 0;
    refused.batch.failed = 100;
    refused.batch.latency = None;
    refused.limits_refused = Some("unsupported_operation: no cgroups".into());
    r.spawn_limited = Some(PhaseReport {
        outcome: Outcome::Failed,
        elapsed_ms: 1.0,
        error: Some("the daemon refuses spawns with limits: unsupported_operation".into()),
        figures: Some(refused),
        cleanup: None,
    });
    assert_eq!(r.limits_cost(), None);
    let table = r.to_table();
    assert!(table.contains("0 / 100 (limits refused)"), "{table}");
    assert!(
        table.contains("spawn with limits: failed: the daemon refuses spawns with limits"),
        "{table}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("JSON");
    assert!(v.get("limitsCost").is_none());
    assert_eq!(v["spawnLimited"]["outcome"], "failed");
}

fn storm(health_p99_ms: f64, reset: bool) -> StormFigures {
    use crate::storm::{Ended, ProbeFigures, Tally, Targets};
    let mut spawns = Tally {
        ok: 95,
        busy: 5,
        busy_with_retry_after: 5,
        ..Tally::default()
    };
    if reset {
        spawns.reset = 1;
        spawns.first_fault = Some("connection broke: reset by peer".into());
    }
    let probe = |p99_ms: f64| ProbeFigures {
        sent: 1000,
        answers: Tally {
            ok: 999,
            ..Tally::default()
        },
        latency: Some(latency(500.0, p99_ms * 1e3)),
        cut_at_end: 1,
        skipped: 0,
        stopped_early: None,
    };
    StormFigures {
        requested: 100 + u32::from(reset),
        spawns,
        spawns_unanswered_at_deadline: 0,
        spawn_latency: Some(latency(20_000.0, 90_000.0)),
        spawns_ms: 4_000.0,
        health: probe(health_p99_ms),
        echo: probe(3.0),
        window_ms: 60_000.0,
        ended: Ended::Quiet,
        peak_running_children: Some(100),
        daemon_cpu_ms: Some(1_500.0),
        targets: if reset {
            Targets {
                met: false,
                missed: vec!["health p99 400.0 ms, not under 50 ms".into()],
            }
        } else {
            Targets {
                met: true,
                missed: vec![],
            }
        },
    }
}

#[test]
fn the_storm_sits_beside_the_one_without_cpu_priority() {
    let mut r = empty();
    r.settings.phases = vec![Phase::Storm];
    r.settings.storm = Some(StormSettings {
        sessions: 100,
        concurrency: 20,
        agent: "storm".into(),
        timeout_secs: 600.0,
    });
    r.settings.storm_baseline_url = Some("http://127.0.0.1:7800".into());
    r.storm = ok(storm(2.0, false));
    r.storm_baseline = ok(storm(400.0, true));
    let table = r.to_table();
    assert!(
        table.contains("storm: 100 sessions of \"storm\" at concurrency 20"),
        "{table}"
    );
    assert!(
        table.contains("no CPU priority (http://127.0.0.1:7800)"),
        "{table}"
    );
    // A storm-only run has no main table.
    assert!(!table.contains("phase  figure"), "{table}");
    let line = |needle: &str| {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} row in\n{table}"))
            .to_string()
    };
    assert!(line("spawns answered / asked").contains("100 / 100"));
    assert!(line("spawns answered / asked").ends_with("100 / 101"));
    assert!(line("201 / busy").contains("95 / 5 (5) / 0"));
    assert!(line("at the deadline").ends_with("0 / 0 / 1 / 0"));
    assert!(line("health p50").contains("500 µs / 2.00 ms / 4.00 ms"));
    assert!(line("probes ok / sent").contains("999 / 1000 (4000), 1 in flight at the end"));
    assert!(line("targets").contains("met") && line("targets").contains("missed: health"));
    assert!(
        table.contains("storm, no CPU priority: first spawn fault: connection broke"),
        "{table}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("JSON");
    assert_eq!(v["settings"]["storm"]["concurrency"], 20);
    assert_eq!(v["storm"]["figures"]["spawns"]["busyWithRetryAfter"], 5);
    assert_eq!(v["storm"]["figures"]["health"]["latency"]["p99Us"], 2000.0);
    assert_eq!(v["storm"]["figures"]["ended"], "quiet");
    assert_eq!(v["stormBaseline"]["figures"]["targets"]["met"], false);
}

#[test]
fn figures_sit_beside_their_ceilings() {
    let mut r = empty();
    let mut spawn = ok(SpawnFigures {
        batch: SpawnBatch {
            requested: 1000,
            timed_out: false,
            spawned: 1000,
            failed: 0,
            first_error: None,
            elapsed_ms: 2500.0,
            spawns_per_sec: 400.0,
            latency: Some(latency(35_000.0, 80_000.0)),
            timeline: Vec::new(),
        },
        rss_before_kib: Some(10_240),
        rss_after_kib: Some(81_920),
        rss_per_session_kib: Some(71.68),
        cpu_per_spawn_us: Some(612.4),
        launch: Some(crate::launch_split::LaunchSplit {
            launches: 1000,
            wait_mean_ms: 28.25,
            launch_mean_ms: 4.5,
        }),
        limits: None,
        limits_refused: None,
    });
    if let Some(s) = spawn.as_mut() {
        s.cleanup = Some(CleanupReport {
            sessions: 1000,
            forgotten: 1000,
            elapsed_ms: 2100.0,
            rss_after_kib: Some(20_480),
            ..CleanupReport::default()
        });
    }
    r.spawn = spawn;
    let bare_batch = |spawns_per_sec: f64, p50_us: f64, p99_us: f64| SpawnBatch {
        requested: 1000,
        timed_out: false,
        spawned: 1000,
        failed: 0,
        first_error: None,
        elapsed_ms: 1000.0 * 1000.0 / spawns_per_sec,
        spawns_per_sec,
        latency: Some(latency(p50_us, p99_us)),
        timeline: Vec::new(),
    };
    r.bare_spawn = ok(BareSpawnFigures {
        batch: bare_batch(2000.0, 400.0, 1200.0),
        cpu_per_spawn_us: Some(151.6),
        running_at_end: 1000,
        cleanup_ms: Some(115.0),
        killed_at_once: Some(bare_batch(3500.0, 250.0, 700.0)),
    });
    r.bare_echo = ok(BareEchoFigures {
        round_trips: 2000,
        latency: Some(latency(20.0, 40.0)),
    });
    let table = r.to_table();
    assert!(
        table.contains("against http://127.0.0.1:7799 (pid 42)"),
        "{table}"
    );
    let line = |needle: &str| {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} row in\n{table}"))
            .to_string()
    };
    let rate = line("spawns/s");
    assert!(rate.starts_with("spawn") && rate.contains("400.0") && rate.ends_with("2000.0"));
    assert!(line("latency p50 / p99").contains("35.00 ms / 80.00 ms"));
    assert!(line("latency p50 / p99").ends_with("400 µs / 1.20 ms"));
    assert!(line("RSS before → after").contains("10.0 MiB → 80.0 MiB"));
    assert!(line("per session").contains("71.7 KiB"));
    let cpu = line("CPU per spawn");
    assert!(cpu.contains("612 µs") && cpu.ends_with("152 µs"), "{cpu}");
    let split = line("launcher wait / launch");
    assert!(split.trim_end().ends_with("28.25 ms / 4.50 ms"), "{split}");
    let cleanup = line("cleanup");
    assert!(cleanup.contains("1000 / 1000 in 2.10 s, RSS then 20.0 MiB"));
    assert!(cleanup.ends_with("in 115.00 ms"), "{cleanup}");
    // The ceiling's other cycle sits in the bare column alone.
    let at_once = line("each child killed at once");
    assert!(at_once.ends_with("3500.0/s, 250 µs / 700 µs"), "{at_once}");
    // The echo phase did not run: its daemon cell says so, the ceiling is still shown.
    assert!(line("round trip").contains('—'));
    assert!(line("round trip").ends_with("20 µs / 30 µs / 40 µs"));
    assert!(!table.contains("notes:"));
}

#[test]
fn timeouts_and_losses_are_reported_not_hidden() {
    let mut r = empty();
    lines(&mut r).throughput = Some(PhaseReport {
        outcome: Outcome::TimedOut,
        elapsed_ms: 120_000.0,
        error: Some("timed out while reading".into()),
        figures: None,
        cleanup: Some(CleanupReport {
            sessions: 1,
            forgotten: 0,
            failed: 1,
            first_error: Some("HTTP 500 internal".into()),
            ..CleanupReport::default()
        }),
    });
    let client = |rate: f64, lost: u64| ClientFigures {
        received_bytes: (256 << 20) - lost,
        lost_bytes: Some(lost),
        mib_per_sec: rate,
        elapsed_ms: 1.0,
        desyncs: u32::from(lost > 0),
        dropped_bytes: lost,
        ending: Ending::Complete,
    };
    lines(&mut r).fanout = ok(FanoutFigures {
        payload_bytes: 256 << 20,
        clients: vec![client(90.0, 0), client(45.5, 3 << 20)],
        slowest_mib_per_sec: 45.5,
        fastest_mib_per_sec: 90.0,
        complete_clients: 2,
        bytes_lost: 3 << 20,
        rss_before_kib: None,
        rss_peak_kib: None,
        server_cpu_ms: None,
    });
    lines(&mut r).bare_read = ok(BareReadFigures {
        payload_bytes: 256 << 20,
        received_bytes: 256 << 20,
        elapsed_ms: 300.0,
        mib_per_sec: 853.3,
    });
    let table = r.to_table();
    assert!(table.contains("timed out"), "{table}");
    assert!(table.contains("45.5 / 90.0 MiB/s"), "{table}");
    assert!(table.contains("853.3 MiB/s"), "{table}");
    assert!(table.contains("3.0 MiB"), "{table}");
    assert!(table.contains("n/a → n/a"), "{table}");
    assert!(
        table.contains("throughput: timed out: timed out while reading"),
        "{table}"
    );
    assert!(
        table.contains("throughput cleanup: 1 of 1 sessions not ended: HTTP 500 internal"),
        "{table}"
    );
}

fn throughput(rate: f64, cpu_ms: f64) -> ThroughputFigures {
    ThroughputFigures {
        payload_bytes: 256 << 20,
        client: ClientFigures {
            received_bytes: 256 << 20,
            lost_bytes: Some(0),
            mib_per_sec: rate,
            elapsed_ms: 1.0,
            desyncs: 0,
            dropped_bytes: 0,
            ending: Ending::Complete,
        },
        rss_before_kib: None,
        rss_peak_kib: None,
        server_cpu_ms: Some(cpu_ms),
    }
}

#[test]
fn daemon_figures_sit_beside_the_floors_with_their_ratio() {
    let mut r = empty();
    r.settings.floor = FloorUse::Beside;
    lines(&mut r).throughput = ok(throughput(30.0, 9_000.0));
    lines(&mut r).floor_throughput = ok(throughput(60.0, 2_000.0));
    r.echo = ok(EchoFigures {
        round_trips: 100,
        latency: Some(latency(150.0, 300.0)),
        stray_bytes: 0,
    });
    r.floor_echo = ok(EchoFigures {
        round_trips: 100,
        latency: Some(latency(100.0, 200.0)),
        stray_bytes: 0,
    });
    lines(&mut r).bare_read = ok(BareReadFigures {
        payload_bytes: 256 << 20,
        received_bytes: 256 << 20,
        elapsed_ms: 300.0,
        mib_per_sec: 70.0,
    });
    let table = r.to_table();
    let line = |needle: &str| {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} row in\n{table}"))
            .to_string()
    };
    assert!(table.contains("atc / floor"), "{table}");
    let one = line("one client");
    assert!(
        one.contains("30.0 MiB/s") && one.contains("60.0 MiB/s") && one.contains("×0.50"),
        "{one}"
    );
    assert!(one.ends_with("70.0 MiB/s"), "{one}");
    let cpu = line("server CPU");
    assert!(
        cpu.contains("9.00 s") && cpu.contains("2.00 s") && cpu.contains("×4.50"),
        "{cpu}"
    );
    assert!(
        line("round trip").contains("p50 ×1.50, p99 ×1.50"),
        "{table}"
    );

    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    assert_eq!(v["settings"]["floor"], "beside");
    let lines = &v["shapes"][0];
    assert_eq!(lines["shape"], "lines");
    assert_eq!(
        lines["floorThroughput"]["figures"]["client"]["mibPerSec"],
        60.0
    );
    assert_eq!(lines["throughput"]["figures"]["serverCpuMs"], 9000.0);
    assert_eq!(lines["vsFloor"]["throughput"], 0.5);
    assert_eq!(lines["vsFloor"]["throughputCpu"], 4.5);
    assert!(lines["vsFloor"].get("fanoutSlowest").is_none());
    assert_eq!(v["vsFloor"]["echoP99"], 1.5);
    // One shape: no table of shapes, the headline names it.
    assert!(!table.contains("output shapes"), "{table}");
    assert!(table.contains("payload 256.0 MiB of lines"), "{table}");
}

#[test]
fn every_rounds_key_figure_is_listed_under_its_phase() {
    let mut r = empty();
    r.settings.floor = FloorUse::Beside;
    lines(&mut r).throughput = ok(throughput(30.0, 9_000.0));
    lines(&mut r).floor_throughput = ok(throughput(60.0, 2_000.0));
    r.rounds = Some(RoundKeys {
        rounds: 3,
        ..Default::default()
    });
    lines(&mut r).rounds = Some(ShapeRoundKeys {
        throughput_mib_per_sec: vec![31.5, 30.0, 28.25],
        floor_throughput_mib_per_sec: vec![60.0, 70.0, 50.0],
        ..Default::default()
    });
    let table = r.to_table();
    let each = table
        .lines()
        .find(|l| l.contains("MiB/s, each round"))
        .unwrap_or_else(|| panic!("no rounds row in\n{table}"));
    assert!(
        each.contains("31.5, 30.0, 28.2") && each.contains("60.0, 70.0, 50.0"),
        "{each}"
    );
    // Phases that did not run get no rounds row.
    assert!(!table.contains("p50, each round"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    assert_eq!(v["rounds"]["rounds"], 3);
    assert_eq!(
        v["shapes"][0]["rounds"]["floorThroughputMibPerSec"][1],
        70.0
    );

    r.rounds = None;
    lines(&mut r).rounds = None;
    assert!(!r.to_table().contains("each round"));
}

#[test]
fn each_shape_has_its_sections_and_a_row_in_the_table_of_shapes() {
    let mut r = empty();
    r.settings.floor = FloorUse::Beside;
    r.settings.payloads = [Shape::Lines, Shape::Sgr]
        .map(|shape| Payload {
            bytes: 32 << 20,
            shape,
        })
        .to_vec();
    r.shapes = r.settings.payloads.iter().map(ShapeReport::new).collect();
    r.shapes[0].throughput = ok(throughput(30.0, 9_000.0));
    r.shapes[0].floor_throughput = ok(throughput(60.0, 2_000.0));
    r.shapes[1].throughput = ok(throughput(12.0, 8_000.0));
    r.shapes[1].floor_throughput = ok(throughput(48.0, 1_000.0));
    r.shapes[1].floor_fanout = Some(PhaseReport {
        outcome: Outcome::Failed,
        elapsed_ms: 1.0,
        error: Some("no shell".into()),
        figures: None,
        cleanup: None,
    });
    let table = r.to_table();
    assert!(
        table.contains("payload 32.0 MiB of each of lines, sgr"),
        "{table}"
    );
    assert!(
        table.contains("throughput: lines") && table.contains("throughput: sgr"),
        "{table}"
    );
    assert!(
        table.contains("floor fan-out (sgr): failed: no shell"),
        "{table}"
    );
    let row = |shape: &str| {
        table
            .lines()
            .skip_while(|l| !l.starts_with("output shapes"))
            .find(|l| l.trim_start().starts_with(shape))
            .unwrap_or_else(|| panic!("no {shape} row in\n{table}"))
            .to_string()
    };
    let sgr = row("sgr");
    assert!(
        sgr.contains("12.0") && sgr.contains("48.0") && sgr.contains("×0.25"),
        "{sgr}"
    );
    assert!(sgr.contains("×8.00"), "CPU ratio: {sgr}");
    assert!(row("lines").contains("×0.50"));
    // Fan-out and the bare PTY did not run: their columns go, the floor's fan-out failure
    // keeps its own.
    assert!(!table.contains("fan-out / one client"), "{table}");
    assert!(!table.contains("bare PTY MiB/s"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    assert_eq!(v["shapes"][1]["shape"], "sgr");
    assert_eq!(v["shapes"][1]["vsFloor"]["throughput"], 0.25);
    assert_eq!(v["shapes"][0]["vsFloor"]["throughput"], 0.5);
}

#[test]
fn without_the_floor_its_columns_and_ratios_are_left_out() {
    let mut r = empty();
    lines(&mut r).throughput = ok(throughput(30.0, 9_000.0));
    let table = r.to_table();
    assert!(!table.contains("floor"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    assert!(v.get("vsFloor").is_none());
}

#[test]
fn a_ratio_needs_both_phases_finished() {
    let mut r = empty();
    r.settings.floor = FloorUse::Beside;
    lines(&mut r).throughput = ok(throughput(30.0, 9_000.0));
    let mut partial = ok(throughput(60.0, 2_000.0));
    if let Some(p) = partial.as_mut() {
        p.outcome = Outcome::TimedOut;
    }
    lines(&mut r).floor_throughput = partial;
    assert_eq!(lines(&mut r).vs_floor(), ShapeVsFloor::default());
}

#[test]
fn json_uses_camel_case_and_omits_unselected_phases() {
    let mut r = empty();
    r.bare_echo = ok(BareEchoFigures {
        round_trips: 3,
        latency: None,
    });
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    assert_eq!(v["settings"]["payloads"][0]["bytes"], 268_435_456);
    assert_eq!(v["settings"]["payloads"][0]["shape"], "lines");
    assert!(v.get("shapes").is_none());
    assert_eq!(v["bareEcho"]["outcome"], "ok");
    assert_eq!(v["bareEcho"]["figures"]["roundTrips"], 3);
    assert!(v.get("spawn").is_none());
}

#[test]
fn spawn_batches_serialize_flat() {
    let batch = SpawnBatch {
        requested: 2,
        timed_out: false,
        spawned: 2,
        failed: 0,
        first_error: None,
        elapsed_ms: 4.0,
        spawns_per_sec: 500.0,
        latency: None,
        timeline: Vec::new(),
    };
    let mut r = empty();
    r.spawn = ok(SpawnFigures {
        batch: batch.clone(),
        rss_before_kib: Some(1),
        rss_after_kib: None,
        rss_per_session_kib: None,
        cpu_per_spawn_us: Some(1.0),
        launch: None,
        limits: None,
        limits_refused: None,
    });
    r.bare_spawn = ok(BareSpawnFigures {
        batch: batch.clone(),
        cpu_per_spawn_us: None,
        running_at_end: 2,
        cleanup_ms: Some(1.0),
        killed_at_once: Some(batch),
    });
    let v: serde_json::Value =
        serde_json::from_str(&r.to_json().expect("serializes")).expect("valid JSON");
    let keys = |phase: &str| -> Vec<String> {
        let mut keys: Vec<String> = v[phase]["figures"]
            .as_object()
            .expect("figures")
            .keys()
            .cloned()
            .collect();
        keys.sort_unstable();
        keys
    };
    // The batch's fields sit directly in the figures.
    let mut batch_keys = vec![
        "elapsedMs",
        "failed",
        "requested",
        "spawned",
        "spawnsPerSec",
        "timedOut",
    ];
    let mut bare_keys = batch_keys.clone();
    // No CPU reading for the ceiling here: the key is left out, not null.
    bare_keys.extend(["cleanupMs", "killedAtOnce", "runningAtEnd"]);
    bare_keys.sort_unstable();
    assert_eq!(keys("bareSpawn"), bare_keys);
    batch_keys.extend(["cpuPerSpawnUs", "rssBeforeKib"]);
    batch_keys.sort_unstable();
    assert_eq!(keys("spawn"), batch_keys);
}
