//! What a suite prints: its figures, each with the bound the issue sets for it, as one JSON
//! line (for scripts and CI logs) and as a table (for people). A suite only collects figures;
//! whether the run passed is decided here, from the bounds, so no suite can forget to fail.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::Suite;

/// The bound a figure must meet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "bound", rename_all = "camelCase")]
pub enum Want {
    /// Exactly zero: bytes lost, double spawns, 5xx answers.
    Zero,
    /// No more than this.
    AtMost(f64),
    /// At least this.
    AtLeast(f64),
    /// Exactly this (a count that must match what was asked for).
    Equal(f64),
    /// Reported for information, with no bound (latencies, sizes).
    Info,
}

impl Want {
    /// Whether `value` meets the bound.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Want::Zero => value == 0.0,
            Want::AtMost(max) => value <= max,
            Want::AtLeast(min) => value >= min,
            Want::Equal(want) => value == want,
            Want::Info => true,
        }
    }

    /// The bound as the table shows it.
    fn describe(self) -> String {
        match self {
            Want::Zero => "= 0".to_string(),
            Want::AtMost(max) => format!("≤ {}", number(max)),
            Want::AtLeast(min) => format!("≥ {}", number(min)),
            Want::Equal(want) => format!("= {}", number(want)),
            Want::Info => "–".to_string(),
        }
    }
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    /// camelCase, stable: scripts read it from the JSON line (`bytesLost`, `resumeP99Ms`).
    pub name: String,
    pub value: f64,
    /// `bytes`, `ms`, `count`, `KiB`…
    pub unit: &'static str,
    pub want: Want,
    pub holds: bool,
}

/// A suite's whole result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub suite: Suite,
    /// The seed the run's random choices came from; the same seed repeats the same choices.
    pub seed: u64,
    pub elapsed_secs: f64,
    /// Whether every figure met its bound.
    pub passed: bool,
    pub figures: Vec<Figure>,
    /// Things worth reading that are not figures: the first few failures in full, what
    /// stopped a growth run, the limits the machine reported.
    pub notes: Vec<String>,
    /// Readings taken over time (the soak's RSS, fds and WAL size every 10 s); absent from
    /// the JSON of a suite that samples nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
}

/// Readings of several quantities taken together at intervals: one row per reading, one
/// value per column, in the columns' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// camelCase, stable, like a figure's (`samples`).
    pub name: String,
    /// What each value of a row is, with its unit in the name (`tSecs`, `rssKib`).
    pub columns: Vec<String>,
    /// The readings, oldest first; each as long as `columns`.
    pub rows: Vec<Vec<f64>>,
}

impl Report {
    /// An empty report for `suite`, to which the suite adds figures as it measures them.
    pub fn new(suite: Suite, seed: u64) -> Report {
        Report {
            suite,
            seed,
            elapsed_secs: 0.0,
            passed: true,
            figures: Vec::new(),
            notes: Vec::new(),
            series: Vec::new(),
        }
    }

    /// Adds a series of readings; it goes in the JSON and, as rows, under the table.
    pub fn series(&mut self, series: Series) {
        self.series.push(series);
    }

    /// Adds a figure; the report fails if it misses its bound.
    pub fn figure(&mut self, name: &str, value: f64, unit: &'static str, want: Want) {
        let holds = want.holds(value);
        self.passed &= holds;
        self.figures.push(Figure {
            name: name.to_string(),
            value,
            unit,
            want,
            holds,
        });
    }

    /// Adds a count that must be zero.
    pub fn zero(&mut self, name: &str, value: u64, unit: &'static str) {
        self.figure(name, value as f64, unit, Want::Zero);
    }

    /// Adds a figure with no bound.
    pub fn info(&mut self, name: &str, value: f64, unit: &'static str) {
        self.figure(name, value, unit, Want::Info);
    }

    /// Adds p50 and p99 of `samples` in milliseconds as `<name>P50Ms` and `<name>P99Ms`, with
    /// no bound; nothing when there are no samples (no figure is better than a zero that
    /// looks measured).
    pub fn latency(&mut self, name: &str, samples: &mut [Duration]) {
        if let Some(l) = atc_bench::stats::Latency::from_samples(samples) {
            self.info(&format!("{name}P50Ms"), l.p50_us / 1000.0, "ms");
            self.info(&format!("{name}P99Ms"), l.p99_us / 1000.0, "ms");
        }
    }

    /// Adds a note.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The JSON line.
    pub fn to_json_line(&self) -> String {
        // A report is plain data (strings, finite numbers after `number`'s rounding never
        // matter here): serialising it cannot fail, but a NaN would print as null, which is
        // honest enough.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The table: one row per figure, then the notes.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let verdict = if self.passed { "passed" } else { "FAILED" };
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "atc-proof {}: {verdict} in {:.1} s (seed {})",
            self.suite.name(),
            self.elapsed_secs,
            self.seed
        );
        let name_width = self
            .figures
            .iter()
            .map(|f| f.name.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(
            out,
            "  {:<name_width$}  {:>14}  {:<6}  {:<10}  ok",
            "figure", "value", "unit", "wants"
        );
        for f in &self.figures {
            let _ = writeln!(
                out,
                "  {:<name_width$}  {:>14}  {:<6}  {:<10}  {}",
                f.name,
                number(f.value),
                f.unit,
                f.want.describe(),
                if f.holds { "yes" } else { "NO" }
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        for series in &self.series {
            let _ = writeln!(out, "  {}:", series.name);
            let cells = |row: Vec<String>| {
                row.iter()
                    .map(|c| format!("{c:>12}"))
                    .collect::<Vec<_>>()
                    .join("")
            };
            let _ = writeln!(out, "  {}", cells(series.columns.clone()));
            for row in &series.rows {
                let _ = writeln!(out, "  {}", cells(row.iter().map(|v| number(*v)).collect()));
            }
        }
        out
    }
}

/// A number as a person reads it: integers without a fraction, others to three places.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_bound_fails_the_report() {
        let mut r = Report::new(Suite::Drops, 7);
        r.zero("bytesLost", 0, "bytes");
        r.figure("resumes", 10.0, "count", Want::Equal(10.0));
        r.info("resumeP99Ms", 3.25, "ms");
        assert!(r.passed);
        r.zero("bytesRepeated", 1, "bytes");
        assert!(!r.passed);
        let table = r.to_table();
        assert!(table.contains("FAILED"), "{table}");
        assert!(
            table.contains("bytesRepeated") && table.contains("NO"),
            "{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&r.to_json_line()).expect("json");
        assert_eq!(json["suite"], "drops");
        assert_eq!(json["passed"], false);
        assert_eq!(json["figures"][3]["name"], "bytesRepeated");
        assert_eq!(json["figures"][3]["holds"], false);
        assert_eq!(json["figures"][1]["want"]["kind"], "equal");
    }

    #[test]
    fn a_series_goes_in_the_json_and_under_the_table_only_when_there_is_one() {
        let mut r = Report::new(Suite::Soak, 3);
        let json: serde_json::Value = serde_json::from_str(&r.to_json_line()).expect("json");
        assert!(json.get("series").is_none(), "{json}");
        r.series(Series {
            name: "samples".into(),
            columns: vec!["tSecs".into(), "rssKib".into()],
            rows: vec![vec![0.0, 1000.0], vec![10.0, 1024.5]],
        });
        let json: serde_json::Value = serde_json::from_str(&r.to_json_line()).expect("json");
        assert_eq!(json["series"][0]["columns"][1], "rssKib");
        assert_eq!(json["series"][0]["rows"][1][1], 1024.5);
        let table = r.to_table();
        assert!(
            table.contains("samples:") && table.contains("1024.500"),
            "{table}"
        );
    }

    #[test]
    fn bounds() {
        assert!(Want::AtMost(2.0).holds(2.0) && !Want::AtMost(2.0).holds(2.5));
        assert!(Want::AtLeast(0.9).holds(0.95) && !Want::AtLeast(0.9).holds(0.5));
        assert!(Want::Info.holds(f64::MAX));
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.1234), "0.123");
    }

    #[test]
    fn latency_figures_come_in_milliseconds_and_only_when_measured() {
        let mut r = Report::new(Suite::Drops, 1);
        r.latency("resume", &mut []);
        assert!(r.figures.is_empty());
        let mut samples = vec![Duration::from_millis(2), Duration::from_millis(4)];
        r.latency("resume", &mut samples);
        assert_eq!(r.figures[0].name, "resumeP50Ms");
        assert_eq!(r.figures[0].value, 2.0);
        assert_eq!(r.figures[1].value, 4.0);
    }
}
