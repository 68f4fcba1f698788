//! The reach phase's table: for each path, the owner's figures (the ceiling), the principal's,
//! and principal / owner. Its own table, like the storm's, because its columns are two callers
//! of one daemon, not a daemon, the floor and the bare PTY.

use super::table::{cell, columns, note_outcome};
use super::units::{bytes, latency2, micros, millis, times};
use super::Report;
use crate::reach::{CallerFigures, PathFigures};

impl Report {
    /// The reach phase's table, with its notes added to `notes`; empty when it did not run.
    pub(super) fn reach_table(&self, notes: &mut Vec<String>) -> String {
        let Some(r) = self.reach.as_ref() else {
            return String::new();
        };
        let mut out = String::from("reach");
        let principal = self
            .settings
            .reach
            .as_ref()
            .map_or("the principal", |s| s.principal.as_str());
        if let Some(s) = &self.settings.reach {
            out.push_str(&format!(
                ": {} sessions of {:?} held; {} requests a path as each caller, {} in flight",
                s.sessions, self.settings.agent, s.requests, s.clients
            ));
        }
        out.push_str(&format!(
            "\n  (principal {principal:?} is the owner's token with X-Atc-As; the owner's path \
             is the ceiling, the floor of this comparison)\n"
        ));
        let mut rows = vec![vec![
            "path / figure".to_string(),
            "owner (ceiling)".to_string(),
            format!("principal {principal:?}"),
            "principal / owner".to_string(),
        ]];
        rows.push(vec![
            "sessions listed".into(),
            cell(Some(r), |f| f.listed_by_owner.to_string()),
            cell(Some(r), |f| f.listed_by_principal.to_string()),
            cell(Some(r), |f| {
                format!("listing {}", bytes(f.list_bytes as u64))
            }),
        ]);
        let paths = r.figures().map_or(&[][..], |f| f.paths.as_slice());
        for p in paths {
            path_rows(&mut rows, p);
        }
        let cleanup = r.cleanup.as_ref().map_or_else(String::new, |c| {
            format!(
                "{} / {} in {}",
                c.forgotten,
                c.sessions,
                millis(c.elapsed_ms)
            )
        });
        rows.push(vec!["cleanup (kill + DELETE)".into(), cleanup]);
        out.push_str(&columns(&rows));
        note_outcome(notes, "reach", Some(r));
        out
    }
}

/// A path's three rows: latency, rate and the daemon's CPU, each caller's and the ratio.
fn path_rows(rows: &mut Vec<Vec<String>>, p: &PathFigures) {
    let v = &p.vs_owner;
    let latency = |c: &CallerFigures| latency2(c.latency.as_ref());
    rows.push(vec![
        format!("{}  p50 / p99", p.path.route()),
        latency(&p.owner),
        latency(&p.principal),
        match (v.p50, v.p99) {
            (None, None) => String::new(),
            (p50, p99) => format!("p50 {}, p99 {}", times_or_na(p50), times_or_na(p99)),
        },
    ]);
    let rate = |c: &CallerFigures| {
        let mut s = format!("{:.0}/s", c.per_sec);
        if c.failed > 0 {
            s.push_str(&format!(" ({} failed)", c.failed));
        }
        s
    };
    rows.push(vec![
        "  requests/s".into(),
        rate(&p.owner),
        rate(&p.principal),
        times(v.per_sec),
    ]);
    let cpu = |c: &CallerFigures| c.server_cpu_us.map_or_else(|| "n/a".into(), micros);
    rows.push(vec![
        "  daemon CPU per request".into(),
        cpu(&p.owner),
        cpu(&p.principal),
        times(v.server_cpu),
    ]);
}

/// A ratio, or "n/a" beside one that has a value.
fn times_or_na(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| times(Some(r)))
}

#[cfg(test)]
mod tests {
    use super::super::{ReachSettings, Report};
    use crate::phase::{Outcome, PhaseReport};
    use crate::reach::{CallerFigures, PathFigures, ReachFigures, ReachPath, VsOwner};
    use crate::stats::Latency;

    fn caller(p50: f64, p99: f64, per_sec: f64, cpu: f64) -> CallerFigures {
        CallerFigures {
            answered: 2000,
            failed: 0,
            elapsed_ms: 2000.0 / per_sec * 1e3,
            per_sec,
            latency: Some(Latency {
                count: 2000,
                min_us: p50 / 2.0,
                p50_us: p50,
                p90_us: p99,
                p99_us: p99,
                max_us: p99 * 2.0,
                mean_us: p50,
            }),
            server_cpu_us: Some(cpu),
        }
    }

    fn path(path: ReachPath, owner: CallerFigures, principal: CallerFigures) -> PathFigures {
        PathFigures {
            path,
            vs_owner: VsOwner::of(&owner, &principal),
            owner,
            principal,
        }
    }

    fn report(figures: ReachFigures) -> Report {
        let mut r = super::super::tests::empty();
        r.settings.agent = "cat".into();
        r.settings.phases = vec![crate::Phase::Reach];
        r.settings.reach = Some(ReachSettings {
            sessions: 1000,
            requests: 2000,
            clients: 4,
            principal: "bench".into(),
        });
        r.reach = Some(PhaseReport {
            outcome: Outcome::Ok,
            elapsed_ms: 1.0,
            error: None,
            figures: Some(figures),
            cleanup: None,
        });
        r
    }

    fn figures() -> ReachFigures {
        ReachFigures {
            principal: "bench".into(),
            sessions: 1000,
            listed_by_owner: 1000,
            listed_by_principal: 1000,
            list_bytes: 600 << 10,
            clients: 4,
            requests: 2000,
            paths: vec![
                path(
                    ReachPath::Get,
                    caller(100.0, 400.0, 8000.0, 60.0),
                    caller(110.0, 480.0, 7200.0, 66.0),
                ),
                path(
                    ReachPath::List,
                    caller(1_000.0, 3_000.0, 900.0, 700.0),
                    caller(4_000.0, 9_000.0, 250.0, 3_500.0),
                ),
                path(
                    ReachPath::Resize,
                    caller(150.0, 500.0, 6000.0, 90.0),
                    caller(150.0, 600.0, 6000.0, 90.0),
                ),
            ],
            first_error: None,
            stopped: None,
        }
    }

    fn line(table: &str, needle: &str) -> String {
        table
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} row in\n{table}"))
            .to_string()
    }

    #[test]
    fn each_path_has_the_owner_as_ceiling_beside_the_principal_with_the_ratio() {
        let r = report(figures());
        let table = r.to_table();
        assert!(
            table.contains("reach: 1000 sessions of \"cat\" held; 2000 requests a path"),
            "{table}"
        );
        assert!(
            table.contains("the owner's path is the ceiling, the floor of this comparison"),
            "{table}"
        );
        // A reach-only run has no main table.
        assert!(!table.contains("phase  figure"), "{table}");
        let header = line(&table, "path / figure");
        assert!(
            header.contains("owner (ceiling)") && header.contains("principal \"bench\""),
            "{header}"
        );
        assert!(line(&table, "sessions listed").contains("listing 600.0 KiB"));
        let get = line(&table, "GET /v1/sessions/{id}  p50 / p99");
        assert!(
            get.contains("100 µs / 400 µs") && get.contains("110 µs / 480 µs"),
            "{get}"
        );
        assert!(get.ends_with("p50 ×1.10, p99 ×1.20"), "{get}");
        let list = line(&table, "GET /v1/sessions  p50 / p99");
        assert!(
            list.contains("1.00 ms / 3.00 ms") && list.ends_with("p50 ×4.00, p99 ×3.00"),
            "{list}"
        );
        let rates: Vec<&str> = table.lines().filter(|l| l.contains("requests/s")).collect();
        assert_eq!(rates.len(), 3, "{table}");
        assert!(
            rates[1].contains("900/s") && rates[1].ends_with("×0.28"),
            "{}",
            rates[1]
        );
        let cpus: Vec<&str> = table
            .lines()
            .filter(|l| l.contains("CPU per request"))
            .collect();
        assert!(
            cpus[1].contains("3.50 ms") && cpus[1].ends_with("×5.00"),
            "{}",
            cpus[1]
        );
        assert!(line(&table, "POST /v1/sessions/{id}/resize").ends_with("p50 ×1.00, p99 ×1.20"));
        assert!(!table.contains("notes:"), "{table}");

        let v: serde_json::Value =
            serde_json::from_str(&r.to_json().expect("serializes")).expect("JSON");
        assert_eq!(v["settings"]["reach"]["principal"], "bench");
        let list = &v["reach"]["figures"]["paths"][1];
        assert_eq!(list["path"], "list");
        assert_eq!(list["vsOwner"]["p50"], 4.0);
        assert_eq!(list["vsOwner"]["serverCpu"], 5.0);
        assert_eq!(list["principal"]["serverCpuUs"], 3500.0);
    }

    #[test]
    fn a_failed_run_keeps_its_rows_and_says_why() {
        let mut f = figures();
        f.paths[0].principal.failed = 3;
        let mut r = report(f);
        if let Some(reach) = r.reach.as_mut() {
            reach.outcome = Outcome::Failed;
            reach.error = Some("3 requests failed; the first: GET /v1/sessions/{id}: x".into());
        }
        let table = r.to_table();
        assert!(
            line(&table, "requests/s").contains("7200/s (3 failed)"),
            "{table}"
        );
        assert!(
            table.contains("reach: failed: 3 requests failed; the first: GET"),
            "{table}"
        );
        r.reach = Some(PhaseReport {
            outcome: Outcome::Failed,
            elapsed_ms: 1.0,
            error: Some("principal \"bench\" does not reach 5 of the phase's 5 sessions".into()),
            figures: None,
            cleanup: None,
        });
        let table = r.to_table();
        assert!(
            line(&table, "sessions listed").contains("failed"),
            "{table}"
        );
        assert!(table.contains("does not reach 5"), "{table}");
    }
}
