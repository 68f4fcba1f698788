//! The storm's table: a row per figure, the daemon's storm beside the same storm on the daemon
//! without CPU priority (`--storm-baseline-state-dir`), and a last row saying which of issue
//! 35's targets each kept. Its own table, like the scale phase's, because its columns are two
//! daemons, not a daemon, the floor and the bare PTY.

use super::table::{cell, columns, note_outcome};
use super::units::{latency2, micros, millis};
use super::Report;
use crate::phase::PhaseReport;
use crate::stats::Latency;
use crate::storm::{Ended, ProbeFigures, StormFigures, Tally, PERIOD};

impl Report {
    /// The storm's table, with its notes added to `notes`.
    pub(super) fn storm_table(&self, notes: &mut Vec<String>) -> String {
        let (d, b) = (self.storm.as_ref(), self.storm_baseline.as_ref());
        let mut out = String::from("storm");
        if let Some(s) = &self.settings.storm {
            out.push_str(&format!(
                ": {} sessions of {:?} at concurrency {}",
                s.sessions, s.agent, s.concurrency
            ));
        }
        out.push_str(
            " (issue 35: health and echo p99 under 50 ms, no connection reset, every spawn \
             answered)\n",
        );
        let mut header = vec!["figure".to_string(), "daemon".to_string()];
        if b.is_some() {
            header.push(match &self.settings.storm_baseline_url {
                Some(url) => format!("no CPU priority ({url})"),
                None => "no CPU priority".into(),
            });
        }
        let mut rows = vec![header];
        let mut row = |figure: &str, show: &dyn Fn(&StormFigures) -> String| {
            let mut r = vec![figure.to_string(), cell(d, show)];
            if b.is_some() {
                r.push(cell(b, show));
            }
            rows.push(r);
        };
        row("spawns answered / asked", &|f| {
            format!("{} / {}", f.spawns.answered(), f.requested)
        });
        row("  201 / busy (with Retry-After) / memory_low", &|f| {
            let s = &f.spawns;
            format!(
                "{} / {} ({}) / {}",
                s.ok, s.busy, s.busy_with_retry_after, s.memory_low
            )
        });
        row("  other error answers", &|f| errors(&f.spawns));
        row(
            "  unanswered: timed out / refused / reset / at the deadline",
            &|f| {
                let s = &f.spawns;
                format!(
                    "{} / {} / {} / {}",
                    s.timed_out, s.unreachable, s.reset, f.spawns_unanswered_at_deadline
                )
            },
        );
        row("  spawn latency p50 / p99 / max (201s)", &|f| {
            latency_max(f.spawn_latency.as_ref())
        });
        row("  all answered after", &|f| millis(f.spawns_ms));
        row("health p50 / p99 / max", &|f| {
            latency_max(f.health.latency.as_ref())
        });
        row("  probes ok / sent (of those due)", &|f| {
            probes(&f.health, f.window_ms)
        });
        row("echo p50 / p99 / max", &|f| {
            latency_max(f.echo.latency.as_ref())
        });
        row("  trips ok / sent (of those due)", &|f| {
            probes(&f.echo, f.window_ms)
        });
        row("window", &|f| {
            let how = match f.ended {
                Ended::Quiet => "until the start-ups were over",
                Ended::FixedHold => "10 s past the last answer (the daemon's children unreadable)",
                Ended::Deadline => "cut at the deadline, start-ups still running",
            };
            format!("{}, {how}", millis(f.window_ms))
        });
        row("most session processes running at once", &|f| {
            f.peak_running_children
                .map_or_else(|| "n/a".into(), |n| n.to_string())
        });
        row("daemon CPU in the window", &|f| {
            f.daemon_cpu_ms.map_or_else(|| "n/a".into(), millis)
        });
        row("issue 35's targets", &|f| {
            if f.targets.met {
                "met".into()
            } else {
                format!("missed: {}", f.targets.missed.join("; "))
            }
        });
        let cleanup = |r: Option<&PhaseReport<StormFigures>>| {
            r.and_then(|r| r.cleanup.as_ref())
                .map_or_else(String::new, |c| {
                    format!(
                        "{} / {} in {}",
                        c.forgotten,
                        c.sessions,
                        millis(c.elapsed_ms)
                    )
                })
        };
        let mut r = vec!["cleanup (kill + DELETE)".to_string(), cleanup(d)];
        if b.is_some() {
            r.push(cleanup(b));
        }
        rows.push(r);
        out.push_str(&columns(&rows));
        for (name, r) in [("storm", d), ("storm, no CPU priority", b)] {
            if let Some(why) = r.and_then(PhaseReport::figures).and_then(first_fault) {
                notes.push(format!("{name}: {why}"));
            }
            note_outcome(notes, name, r);
        }
        out
    }
}

/// p50 / p99 / max, or "n/a".
fn latency_max(l: Option<&Latency>) -> String {
    l.map_or_else(
        || "n/a".into(),
        |l| format!("{} / {}", latency2(Some(l)), micros(l.max_us)),
    )
}

/// Other error answers by code, or "none".
fn errors(t: &Tally) -> String {
    if t.errors.is_empty() {
        return "none".into();
    }
    let each: Vec<String> = t.errors.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
    each.join(", ")
}

/// A prober's successes over its probes, the probes the window had room for (fewer sent means
/// the bench itself was held up, or the echo's trips were slow), and what else happened to them.
fn probes(p: &ProbeFigures, window_ms: f64) -> String {
    let due = (window_ms / PERIOD.as_secs_f64() / 1e3).floor();
    let mut s = format!("{} / {} ({due:.0})", p.answers.ok, p.sent);
    let others = [
        (p.answers.timed_out, "timed out"),
        (p.answers.connection_faults(), "failed or reset"),
        (p.answers.answered() - p.answers.ok, "refused"),
        (p.cut_at_end, "in flight at the end"),
        (p.skipped, "ticks skipped"),
    ];
    for (n, what) in others {
        if n > 0 {
            s.push_str(&format!(", {n} {what}"));
        }
    }
    s
}

/// The first request of the storm that went wrong, for the notes.
fn first_fault(f: &StormFigures) -> Option<String> {
    let firsts = [
        ("spawn", &f.spawns),
        ("health", &f.health.answers),
        ("echo", &f.echo.answers),
    ];
    let each: Vec<String> = firsts
        .iter()
        .filter_map(|(name, t)| {
            t.first_fault
                .as_ref()
                .map(|w| format!("first {name} fault: {w}"))
        })
        .collect();
    (!each.is_empty()).then(|| each.join("; "))
}
