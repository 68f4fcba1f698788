//! The table view of a [`Report`]: a row per figure, each daemon figure beside the
//! floor's, their ratio and its bare-PTY ceiling, with errors and timeouts as notes below;
//! the scale phase, the reach phase and the storm get tables of their own, beside
//! (`scale_table.rs`, `reach_table.rs`, `storm_table.rs`).

use super::scale_table::scale_table;
use super::units::{
    bytes, client_rate, cpu, kib, kib_f, latency2, latency3, limits, lost, micros, millis,
    one_decimal, rss_change, times,
};
use super::{Report, ShapeReport};
use crate::delivery::Ending;
use crate::fanout::FanoutFigures;
use crate::payload::Payload;
use crate::phase::{Outcome, PhaseReport};
use crate::spawn::SpawnBatch;
use crate::{FloorUse, Phase};

impl Report {
    /// The report as a table with notes, ready to print.
    pub fn to_table(&self) -> String {
        let mut t = Table::default();
        let mut notes = Vec::new();
        self.spawn_rows(&mut t, &mut notes);
        self.spawn_limits_rows(&mut t, &mut notes);
        self.echo_rows(&mut t, &mut notes);
        for shape in &self.shapes {
            // With one shape, sections and notes need not name it: the headline does.
            let name = ShapeName(Some(shape.shape.name()).filter(|_| self.shapes.len() > 1));
            self.throughput_rows(shape, name, &mut t, &mut notes);
            self.fanout_rows(shape, name, &mut t, &mut notes);
            self.slow_rows(shape, name, &mut t, &mut notes);
            let bare = shape.bare_read.as_ref();
            note_outcome(&mut notes, &name.note("bare PTY read"), bare);
            let floor = shape.floor_throughput.as_ref();
            note_outcome(&mut notes, &name.note("floor throughput"), floor);
            let floor = shape.floor_fanout.as_ref();
            note_outcome(&mut notes, &name.note("floor fan-out"), floor);
        }
        note_outcome(&mut notes, "bare PTY spawn", self.bare_spawn.as_ref());
        note_outcome(&mut notes, "bare PTY echo", self.bare_echo.as_ref());
        note_outcome(&mut notes, "floor echo", self.floor_echo.as_ref());

        let mut out = self.headline();
        // A run of the scale phase alone has only its own table.
        if !t.rows.is_empty() {
            out.push_str(&t.render());
        }
        if self.shapes.len() > 1 {
            out.push('\n');
            out.push_str(&self.shapes_table());
        }
        if let Some(scale) = &self.scale {
            if !t.rows.is_empty() {
                out.push('\n');
            }
            out.push_str(&scale_table(scale));
            note_outcome(&mut notes, "scale", Some(scale));
        }
        if self.reach.is_some() {
            if !t.rows.is_empty() || self.scale.is_some() {
                out.push('\n');
            }
            out.push_str(&self.reach_table(&mut notes));
        }
        if self.storm.is_some() || self.storm_baseline.is_some() {
            if !t.rows.is_empty() || self.scale.is_some() || self.reach.is_some() {
                out.push('\n');
            }
            out.push_str(&self.storm_table(&mut notes));
        }
        if !notes.is_empty() {
            out.push_str("\nnotes:\n");
            for n in notes {
                out.push_str(&format!("  {n}\n"));
            }
        }
        out
    }

    fn headline(&self) -> String {
        let s = &self.settings;
        let mut h = String::from("atc bench");
        if let Some(url) = &s.url {
            h.push_str(&format!(" against {url}"));
            if let Some(pid) = s.daemon_pid {
                h.push_str(&format!(" (pid {pid})"));
            }
        }
        // The opt-in phases print their own settings above their own tables.
        let own_table = |p: &Phase| matches!(p, Phase::Scale | Phase::Reach | Phase::Storm);
        let scale_only = s.phases.iter().all(own_table) && s.phases.contains(&Phase::Scale);
        if s.phases.iter().all(own_table) && !scale_only {
            h.push('\n');
            return h;
        }
        match &s.scale_steps {
            Some(steps) if scale_only => {
                let steps: Vec<String> = steps.iter().map(u32::to_string).collect();
                h.push_str(&format!(
                    ": scale steps {} of {:?} sessions (a tenth \"shell\"), at concurrency {}\n",
                    steps.join(", "),
                    s.agent,
                    s.concurrency
                ));
            }
            _ => h.push_str(&format!(
                ": {} sessions of {:?} at concurrency {}, payload {}, {} echo trips\n",
                s.sessions,
                s.agent,
                s.concurrency,
                payloads(&s.payloads),
                s.echo_count
            )),
        }
        h.push('\n');
        h
    }

    fn spawn_rows(&self, t: &mut Table, notes: &mut Vec<String>) {
        let (d, b) = (self.spawn.as_ref(), self.bare_spawn.as_ref());
        if d.is_none() && b.is_none() {
            return;
        }
        t.section("spawn");
        // The daemon batch and its bare-PTY ceiling have the same figures, side by side.
        let batch_row = |t: &mut Table, figure: &str, show: fn(&SpawnBatch) -> String| {
            t.row(
                figure,
                cell(d, |f| show(&f.batch)),
                cell(b, |f| show(&f.batch)),
            );
        };
        batch_row(t, "spawns/s", |s| format!("{:.1}", s.spawns_per_sec));
        batch_row(t, "latency p50 / p99", |s| latency2(s.latency.as_ref()));
        batch_row(t, "spawned / requested", |s| {
            format!("{} / {}", s.spawned, s.requested)
        });
        let per_spawn =
            |us: Option<f64>| us.map_or_else(|| "n/a".into(), |us| format!("{us:.0} µs"));
        t.row(
            "server CPU per spawn",
            cell(d, |f| per_spawn(f.cpu_per_spawn_us)),
            cell(b, |f| per_spawn(f.cpu_per_spawn_us)),
        );
        if d.and_then(PhaseReport::figures)
            .is_some_and(|f| f.launch.is_some())
        {
            t.row(
                "launcher wait / launch, mean",
                cell(d, |f| {
                    f.launch.map_or_else(String::new, |l| {
                        format!("{:.2} ms / {:.2} ms", l.wait_mean_ms, l.launch_mean_ms)
                    })
                }),
                String::new(),
            );
        }
        if d.is_some() {
            t.row(
                "daemon RSS before → after",
                cell(d, |f| rss_change(f.rss_before_kib, f.rss_after_kib)),
                String::new(),
            );
            t.row(
                "daemon RSS per session",
                cell(d, |f| {
                    f.rss_per_session_kib
                        .map_or_else(|| "n/a".into(), |k| format!("{k:.1} KiB"))
                }),
                String::new(),
            );
        }
        let bare = b.and_then(PhaseReport::figures);
        let cleanup = d.and_then(|r| r.cleanup.as_ref());
        let bare_cleanup = bare.and_then(|f| f.cleanup_ms);
        if cleanup.is_some() || bare_cleanup.is_some() {
            t.row(
                "cleanup (kill + DELETE / reap)",
                cleanup.map_or_else(String::new, |c| {
                    format!(
                        "{} / {} in {}, RSS then {}",
                        c.forgotten,
                        c.sessions,
                        millis(c.elapsed_ms),
                        kib(c.rss_after_kib)
                    )
                }),
                bare_cleanup.map_or_else(String::new, |ms| format!("in {}", millis(ms))),
            );
        }
        let killed_at_once = bare.and_then(|f| f.killed_at_once.as_ref());
        if let Some(cycles) = killed_at_once {
            t.row(
                "each child killed at once",
                String::new(),
                format!(
                    "{:.1}/s, {}",
                    cycles.spawns_per_sec,
                    latency2(cycles.latency.as_ref())
                ),
            );
        }
        let batches = [
            ("spawn", d.and_then(PhaseReport::figures).map(|f| &f.batch)),
            ("bare PTY spawn", bare.map(|f| &f.batch)),
            ("bare PTY spawn, each child killed at once", killed_at_once),
        ];
        for (name, batch) in batches {
            if let Some(e) = batch.and_then(|s| s.first_error.as_ref()) {
                notes.push(format!("{name}: first failure: {e}"));
            }
        }
        note_outcome(notes, "spawn", d);
    }

    /// The spawn phase's second pass, with `--spawn-limits`: its figures, each with its ratio
    /// to the first pass's (with / without).
    fn spawn_limits_rows(&self, t: &mut Table, notes: &mut Vec<String>) {
        let Some(r) = self.spawn_limited.as_ref() else {
            return;
        };
        let asked = self
            .settings
            .spawn_limits
            .as_ref()
            .map_or_else(String::new, limits);
        t.section("spawn with limits");
        t.row("limits on every spawn", asked, String::new());
        let cost = self.limits_cost().unwrap_or_default();
        let vs = |x: Option<f64>| x.map_or_else(String::new, |x| format!(" (×{x:.2})"));
        t.row(
            "spawns/s (vs without)",
            cell(Some(r), |f| {
                format!("{:.1}{}", f.batch.spawns_per_sec, vs(cost.spawns_per_sec))
            }),
            String::new(),
        );
        t.row(
            "latency p50 / p99 (vs without)",
            cell(Some(r), |f| {
                let mut s = latency2(f.batch.latency.as_ref());
                if let (Some(p50), Some(p99)) = (cost.latency_p50, cost.latency_p99) {
                    s.push_str(&format!(" (p50 ×{p50:.2}, p99 ×{p99:.2})"));
                }
                s
            }),
            String::new(),
        );
        t.row(
            "server CPU per spawn (vs without)",
            cell(Some(r), |f| {
                f.cpu_per_spawn_us.map_or_else(
                    || "n/a".into(),
                    |us| format!("{us:.0} µs{}", vs(cost.cpu_per_spawn)),
                )
            }),
            String::new(),
        );
        t.row(
            "spawned / requested",
            cell(Some(r), |f| {
                let refused = if f.limits_refused.is_some() {
                    " (limits refused)"
                } else {
                    ""
                };
                format!("{} / {}{refused}", f.batch.spawned, f.batch.requested)
            }),
            String::new(),
        );
        if let Some(e) = r.figures().and_then(|f| f.batch.first_error.as_ref()) {
            notes.push(format!("spawn with limits: first failure: {e}"));
        }
        note_outcome(notes, "spawn with limits", Some(r));
    }

    fn echo_rows(&self, t: &mut Table, notes: &mut Vec<String>) {
        let (d, fl, b) = (
            self.echo.as_ref(),
            self.floor_echo.as_ref(),
            self.bare_echo.as_ref(),
        );
        if d.is_none() && fl.is_none() && b.is_none() {
            return;
        }
        let vs = self.vs_floor();
        t.section("echo");
        t.row_vs_floor(
            "round trip p50 / p90 / p99",
            cell(d, |f| latency3(f.latency.as_ref())),
            self.floor_cell(fl, |f| latency3(f.latency.as_ref())),
            match (vs.echo_p50, vs.echo_p99) {
                (Some(p50), Some(p99)) => format!("p50 ×{p50:.2}, p99 ×{p99:.2}"),
                _ => String::new(),
            },
            cell(b, |f| latency3(f.latency.as_ref())),
        );
        if let Some(k) = &self.rounds {
            self.round_row(
                t,
                "p50, each round",
                &k.echo_p50_us,
                &k.floor_echo_p50_us,
                micros,
            );
        }
        for (name, r) in [("echo", d), ("floor echo", fl)] {
            if let Some(f) = r
                .and_then(PhaseReport::figures)
                .filter(|f| f.stray_bytes > 0)
            {
                notes.push(format!("{name}: {} stray output bytes", f.stray_bytes));
            }
        }
        note_outcome(notes, "echo", d);
    }

    fn throughput_rows(
        &self,
        s: &ShapeReport,
        name: ShapeName,
        t: &mut Table,
        notes: &mut Vec<String>,
    ) {
        let (d, fl) = (s.throughput.as_ref(), s.floor_throughput.as_ref());
        if d.is_none() && fl.is_none() && s.bare_read.is_none() {
            return;
        }
        let vs = s.vs_floor();
        t.section(&name.section("throughput"));
        t.row_vs_floor(
            "one client",
            cell(d, |f| client_rate(&f.client)),
            self.floor_cell(fl, |f| client_rate(&f.client)),
            times(vs.throughput),
            ceiling(s),
        );
        if let Some(k) = &s.rounds {
            let (d, fl) = (&k.throughput_mib_per_sec, &k.floor_throughput_mib_per_sec);
            self.round_row(t, "MiB/s, each round", d, fl, one_decimal);
        }
        if d.is_some() || fl.is_some() {
            t.row_vs_floor(
                "bytes lost",
                cell(d, |f| lost(&f.client)),
                self.floor_cell(fl, |f| lost(&f.client)),
                String::new(),
                String::new(),
            );
            t.row_vs_floor(
                "server CPU for the payload",
                cell(d, |f| cpu(f.server_cpu_ms)),
                self.floor_cell(fl, |f| cpu(f.server_cpu_ms)),
                times(vs.throughput_cpu),
                String::new(),
            );
        }
        if d.is_some() {
            t.row(
                "daemon RSS before → peak",
                cell(d, |f| rss_change(f.rss_before_kib, f.rss_peak_kib)),
                String::new(),
            );
        }
        note_outcome(notes, &name.note("throughput"), d);
    }

    /// The key figure of every round (`--rounds`), in run order; the row above is the median
    /// round's. Rounds that went wrong have no figure: the row above is then theirs.
    fn round_row(
        &self,
        t: &mut Table,
        figure: &str,
        daemon: &[f64],
        floor: &[f64],
        show: fn(f64) -> String,
    ) {
        let list = |keys: &[f64]| keys.iter().map(|k| show(*k)).collect::<Vec<_>>().join(", ");
        let floor = if self.settings.floor == FloorUse::Off {
            String::new()
        } else {
            list(floor)
        };
        t.row_vs_floor(figure, list(daemon), floor, String::new(), String::new());
    }

    /// A floor phase's figure: like [`cell`], but empty when the floor was off, so the column
    /// disappears from a `--no-floor` table.
    fn floor_cell<T>(
        &self,
        report: Option<&PhaseReport<T>>,
        show: impl Fn(&T) -> String,
    ) -> String {
        if self.settings.floor == FloorUse::Off {
            String::new()
        } else {
            cell(report, show)
        }
    }

    fn fanout_rows(
        &self,
        s: &ShapeReport,
        name: ShapeName,
        t: &mut Table,
        notes: &mut Vec<String>,
    ) {
        let (d, fl) = (s.fanout.as_ref(), s.floor_fanout.as_ref());
        if d.is_none() && fl.is_none() {
            return;
        }
        let vs = s.vs_floor();
        t.section(&name.section(&format!(
            "fan-out ({} clients)",
            self.settings.fanout_clients
        )));
        let rates = |f: &FanoutFigures| {
            format!(
                "{:.1} / {:.1} MiB/s",
                f.slowest_mib_per_sec, f.fastest_mib_per_sec
            )
        };
        t.row_vs_floor(
            "slowest / fastest client",
            cell(d, rates),
            self.floor_cell(fl, rates),
            times(vs.fanout_slowest),
            ceiling(s),
        );
        if let Some(k) = &s.rounds {
            let (d, fl) = (
                &k.fanout_slowest_mib_per_sec,
                &k.floor_fanout_slowest_mib_per_sec,
            );
            self.round_row(t, "slowest MiB/s, each round", d, fl, one_decimal);
        }
        let losses = |f: &FanoutFigures| {
            let mut s = bytes(f.bytes_lost);
            if f.complete_clients < f.clients.len() {
                s.push_str(&format!(
                    " ({} of {} finished)",
                    f.complete_clients,
                    f.clients.len()
                ));
            }
            s
        };
        t.row_vs_floor(
            "bytes lost (all clients)",
            cell(d, losses),
            self.floor_cell(fl, losses),
            String::new(),
            String::new(),
        );
        if d.is_some() {
            t.row(
                "daemon RSS before → peak",
                cell(d, |f| rss_change(f.rss_before_kib, f.rss_peak_kib)),
                String::new(),
            );
        }
        note_outcome(notes, &name.note("fan-out"), d);
    }

    fn slow_rows(&self, s: &ShapeReport, name: ShapeName, t: &mut Table, notes: &mut Vec<String>) {
        let d = s.slow_client.as_ref();
        if d.is_none() {
            return;
        }
        t.section(&name.section(&format!(
            "slow client ({} MiB/s)",
            self.settings.slow_rate_mib_per_sec
        )));
        t.row(
            "fast client beside it",
            cell(d, |f| {
                let mut s = client_rate(&f.fast);
                if let Some(solo) = f.fast_solo_mib_per_sec {
                    s.push_str(&format!(" (solo {solo:.1})"));
                }
                s
            }),
            ceiling(s),
        );
        if let Some(k) = &s.rounds {
            let fast = &k.slow_fast_mib_per_sec;
            self.round_row(t, "fast MiB/s, each round", fast, &[], one_decimal);
        }
        t.row(
            "slow client",
            cell(d, |f| {
                let mut s = format!(
                    "read {}, {} desyncs, {} dropped",
                    bytes(f.slow.received_bytes),
                    f.slow.desyncs,
                    bytes(f.slow.dropped_bytes)
                );
                if let Ending::Closed(why) | Ending::Failed(why) = &f.slow.ending {
                    s.push_str(&format!(", cut off: {why}"));
                }
                s
            }),
            String::new(),
        );
        t.row(
            "daemon RSS growth (peak)",
            cell(d, |f| {
                f.rss_growth_kib.map_or_else(
                    || "n/a".into(),
                    |g| format!("{}{}", if g >= 0 { "+" } else { "" }, kib_f(g as f64)),
                )
            }),
            String::new(),
        );
        note_outcome(notes, &name.note("slow client"), d);
    }

    /// Every shape's key figures in a row of their own, each daemon figure beside the floor's:
    /// the one-client rate and the server CPU for the payload, the slowest fan-out client, and
    /// the bare-PTY ceiling. The sections above have the rest.
    fn shapes_table(&self) -> String {
        let mut out = String::from("output shapes (standing rounds; atc / floor)\n");
        let header = [
            "shape",
            "atc MiB/s",
            "floor MiB/s",
            "atc / floor",
            "CPU atc / floor",
            "fan-out slowest atc",
            "floor",
            "atc / floor",
            "fan-out / one client",
            "bare PTY MiB/s",
        ]
        .map(String::from);
        let rate = |r: Option<&PhaseReport<crate::throughput::ThroughputFigures>>| {
            cell(r, |f| one_decimal(f.client.mib_per_sec))
        };
        let slowest = |r: Option<&PhaseReport<FanoutFigures>>| {
            cell(r, |f| one_decimal(f.slowest_mib_per_sec))
        };
        let floor_off = self.settings.floor == FloorUse::Off;
        let mut rows = vec![header.to_vec()];
        for s in &self.shapes {
            let vs = s.vs_floor();
            let ratio = |x: Option<f64>| x.map_or_else(|| "—".into(), |x| format!("×{x:.2}"));
            // How much of its one-client rate the daemon keeps when it feeds several clients.
            let spread = s
                .fanout
                .as_ref()
                .and_then(PhaseReport::figures)
                .zip(s.throughput.as_ref().and_then(PhaseReport::figures))
                .and_then(|(f, t)| super::ratio(f.slowest_mib_per_sec, t.client.mib_per_sec));
            let (floor_rate, floor_slowest) = if floor_off {
                ("—".into(), "—".into())
            } else {
                (
                    rate(s.floor_throughput.as_ref()),
                    slowest(s.floor_fanout.as_ref()),
                )
            };
            rows.push(vec![
                s.shape.name().to_string(),
                rate(s.throughput.as_ref()),
                floor_rate,
                ratio(vs.throughput),
                ratio(vs.throughput_cpu),
                slowest(s.fanout.as_ref()),
                floor_slowest,
                ratio(vs.fanout_slowest),
                ratio(spread),
                cell(s.bare_read.as_ref(), |f| one_decimal(f.mib_per_sec)),
            ]);
        }
        // A column of a phase that did not run (fan-out, the floor, the bare PTY) goes.
        let ran: Vec<bool> = (0..header.len())
            .map(|i| i == 0 || rows[1..].iter().any(|r| r[i] != "—"))
            .collect();
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .zip(&ran)
                    .filter(|(_, ran)| **ran)
                    .map(|(c, _)| c)
                    .collect()
            })
            .collect();
        out.push_str(&columns(&rows));
        out
    }
}

/// The shape an output phase's rows are of, when the run had several (else `None`: the
/// headline names the one).
#[derive(Debug, Clone, Copy)]
struct ShapeName(Option<&'static str>);

impl ShapeName {
    /// A section's title: `throughput: sgr`.
    fn section(self, phase: &str) -> String {
        match self.0 {
            Some(shape) => format!("{phase}: {shape}"),
            None => phase.to_string(),
        }
    }

    /// The name a note goes by: `throughput (sgr)`.
    fn note(self, phase: &str) -> String {
        match self.0 {
            Some(shape) => format!("{phase} ({shape})"),
            None => phase.to_string(),
        }
    }
}

/// The bare-PTY read rate of a shape, the ceiling of its throughput-type rows.
fn ceiling(s: &ShapeReport) -> String {
    cell(s.bare_read.as_ref(), |f| {
        format!("{:.1} MiB/s", f.mib_per_sec)
    })
}

/// The payloads for the headline: one size for all shapes, or each shape's own.
fn payloads(payloads: &[Payload]) -> String {
    let names: Vec<&str> = payloads.iter().map(|p| p.shape.name()).collect();
    match payloads {
        [] => "none".into(),
        [one] => format!("{} of {}", bytes(one.bytes), one.shape.name()),
        [first, ..] if payloads.iter().all(|p| p.bytes == first.bytes) => {
            format!("{} of each of {}", bytes(first.bytes), names.join(", "))
        }
        _ => {
            let each: Vec<String> = payloads
                .iter()
                .map(|p| format!("{} of {}", bytes(p.bytes), p.shape.name()))
                .collect();
            each.join(", ")
        }
    }
}

/// Left-aligned columns, two spaces apart, each line indented by two.
pub(super) fn columns(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            let w = c.chars().count();
            match widths.get_mut(i) {
                Some(have) => *have = (*have).max(w),
                None => widths.push(w),
            }
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (c, w) in r.iter().zip(&widths) {
            line.push_str(&format!("{c:<w$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A daemon phase's figure, or why there is none.
pub(super) fn cell<T>(report: Option<&PhaseReport<T>>, show: impl Fn(&T) -> String) -> String {
    match report {
        None => "—".into(),
        Some(r) => match (&r.figures, r.outcome) {
            (Some(f), _) => show(f),
            (None, Outcome::TimedOut) => "timed out".into(),
            (None, Outcome::Interrupted) => "interrupted".into(),
            (None, Outcome::Failed | Outcome::Ok) => "failed".into(),
        },
    }
}

/// Adds notes for a phase that did not end well, and for its cleanup.
pub(super) fn note_outcome<T>(
    notes: &mut Vec<String>,
    name: &str,
    report: Option<&PhaseReport<T>>,
) {
    let Some(r) = report else { return };
    if let Some(e) = &r.error {
        let how = match r.outcome {
            Outcome::TimedOut => "timed out",
            Outcome::Interrupted => "stopped",
            Outcome::Failed | Outcome::Ok => "failed",
        };
        notes.push(format!("{name}: {how}: {e}"));
    }
    if let Some(c) = &r.cleanup {
        if c.failed > 0 || c.timed_out {
            notes.push(format!(
                "{name} cleanup: {} of {} sessions not ended{}{}",
                c.sessions - c.forgotten,
                c.sessions,
                if c.timed_out { " (timed out)" } else { "" },
                c.first_error
                    .as_ref()
                    .map_or_else(String::new, |e| format!(": {e}"))
            ));
        }
    }
}

/// A table (phase, figure, via daemon, floor, atc / floor, bare PTY) with a blank line between
/// phases; a figure column with no figure in it is left out.
#[derive(Default)]
struct Table {
    rows: Vec<[String; 6]>,
    section: Option<String>,
}

impl Table {
    fn section(&mut self, name: &str) {
        if !self.rows.is_empty() {
            self.rows.push(Default::default());
        }
        self.section = Some(name.to_string());
    }

    /// A row with no floor figure.
    fn row(&mut self, figure: &str, daemon: String, bare: String) {
        self.row_vs_floor(figure, daemon, String::new(), String::new(), bare);
    }

    fn row_vs_floor(
        &mut self,
        figure: &str,
        daemon: String,
        floor: String,
        ratio: String,
        bare: String,
    ) {
        let phase = self.section.take().unwrap_or_default();
        self.rows
            .push([phase, figure.to_string(), daemon, floor, ratio, bare]);
    }

    fn render(&self) -> String {
        let header = [
            "phase",
            "figure",
            "via daemon",
            "floor",
            "atc / floor",
            "bare PTY (ceiling)",
        ]
        .map(String::from);
        let mut widths = header.clone().map(|h| h.chars().count());
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        // A figure column goes when no row has a figure in it: the floor's with `--no-floor`,
        // the daemon's with `--floor-only` or `--phases bare`.
        let shown: Vec<bool> = (0..header.len())
            .map(|i| {
                !matches!(i, 2..=4) || self.rows.iter().any(|r| !r[i].is_empty() && r[i] != "—")
            })
            .collect();
        let mut out = String::new();
        for r in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for ((c, w), show) in r.iter().zip(widths).zip(&shown) {
                if !show {
                    continue;
                }
                line.push_str(&format!("{c:<w$}  "));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}
