//! The scale phase's table: one row per step, with the limits it checked above it and the
//! linearity of RSS in N below. Its own table, like the reach phase's and the storm's, because
//! its rows are steps of one daemon, not a daemon, the floor and the bare PTY.

use super::table::{cell, columns};
use super::units::{kib, kib_f, latency2, micros, millis};
use crate::phase::PhaseReport;
use crate::scale::ScaleFigures;

/// The scale phase as its own table, one row per step, with the limits it checked above it
/// and the linearity of RSS in N below.
pub(super) fn scale_table(r: &PhaseReport<ScaleFigures>) -> String {
    let mut out = String::from("scale (a tenth of the sessions busy; figures with all idle)\n");
    let Some(f) = r.figures() else {
        out.push_str(&format!("  {}\n", cell(Some(r), |_| String::new())));
        return out;
    };
    let reserve = f.pty.reserve.map_or_else(String::new, |r| {
        format!(", {r} reserved for the initial devpts")
    });
    out.push_str(&format!(
        "  kernel.pty.max {} with {} in use before{reserve}; daemon open files {}\n",
        f.pty.max,
        f.pty.in_use,
        f.open_file_limit.map_or_else(
            || "n/a".into(),
            |l| format!("soft {} / hard {}", l.soft, l.hard)
        ),
    ));
    out.push_str(&format!(
        "  daemon before: RSS {}, {} fds\n",
        kib_f(f.baseline_rss_kib as f64),
        f.baseline_fds
    ));
    let header = [
        "sessions",
        "busy",
        "RSS",
        "RSS/session",
        "fds/session",
        "+idle / +busy",
        "idle CPU",
        "list p50 / p99",
        "echo p99",
    ]
    .map(String::from);
    let mut rows = vec![header.to_vec()];
    for s in &f.steps {
        rows.push(vec![
            s.sessions.to_string(),
            if s.attached == s.busy {
                s.busy.to_string()
            } else {
                format!("{} ({} attached)", s.busy, s.attached)
            },
            kib_f(s.rss_kib as f64),
            format!("{:.1} KiB", s.rss_per_session_kib),
            format!("{:.2}", s.fds_per_session),
            format!(
                "{} / {}",
                s.idle_added_kib
                    .map_or_else(|| "n/a".into(), |k| format!("{k:.1} KiB")),
                s.busy_added_kib
                    .map_or_else(|| "n/a".into(), |k| format!("{k:.1} KiB"))
            ),
            format!("{:.2} %", s.idle_cpu_pct),
            latency2(s.list.as_ref()),
            s.echo.map_or_else(|| "n/a".into(), |l| micros(l.p99_us)),
        ]);
    }
    out.push_str(&columns(&rows));
    match &f.linearity {
        Some(l) => {
            let vs: Vec<String> = l
                .per_session_vs_first
                .iter()
                .map(|v| format!("×{v:.2}"))
                .collect();
            out.push_str(&format!(
                "  RSS linear in N? slope {:.1} KiB/session, intercept {}, max deviation {:.1} %; \
                 per session vs the first step: {}\n",
                l.slope_kib_per_session,
                kib_f(l.intercept_kib),
                l.max_deviation_pct,
                vs.join(", ")
            ));
        }
        None => out.push_str("  RSS linear in N? needs two completed steps\n"),
    }
    if let Some(c) = &r.cleanup {
        out.push_str(&format!(
            "  cleanup (kill + DELETE): {} / {} in {}, RSS then {}\n",
            c.forgotten,
            c.sessions,
            millis(c.elapsed_ms),
            kib(c.rss_after_kib)
        ));
    }
    out
}
