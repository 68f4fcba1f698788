//! One scrape: the families read when asked ([`Snapshot`]: sessions by state and target,
//! reporter lines, the process's RSS and fds) encoded after the ones [`Metrics`] keeps, in
//! the OpenMetrics text format that Prometheus reads.

use std::collections::BTreeMap;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::process::ProcessStats;
use super::{Metrics, ReporterLine, PREFIX};
use atc_protocol::SessionState;

/// The answer's `Content-Type`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every listed state, so each configured target shows all four (at zero when empty).
const STATES: [SessionState; 4] = [
    SessionState::Running,
    SessionState::NeedsYou,
    SessionState::Done,
    SessionState::Exited,
];

/// Sessions counted by (target, state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionCounts(BTreeMap<(String, &'static str), i64>);

impl SessionCounts {
    /// Lists `target` with every state, at zero until counted.
    pub fn include_target(&mut self, target: &str) {
        for state in STATES {
            self.0
                .entry((target.to_string(), state.as_str()))
                .or_insert(0);
        }
    }

    /// One session of `target` in `state`.
    pub fn count(&mut self, target: &str, state: SessionState) {
        self.include_target(target);
        *self
            .0
            .entry((target.to_string(), state.as_str()))
            .or_insert(0) += 1;
    }
}

/// What a scrape reads when asked.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The fleet, as the session manager lists it.
    pub sessions: SessionCounts,
    /// Reporter lines accepted and dropped since start.
    pub reporter_accepted: u64,
    /// See `reporter_accepted`.
    pub reporter_dropped: u64,
    /// `/proc/self`.
    pub process: ProcessStats,
    /// What every local session together uses now (their cgroups' parent), where the daemon
    /// has cgroups.
    pub sessions_usage: Option<atc_protocol::Usage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SessionLabels {
    state: &'static str,
    target: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReporterLabels {
    result: ReporterLine,
}

fn gauge(v: u64) -> Gauge {
    let g = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

/// The exposition text of `metrics` and `snapshot`, ending in `# EOF`.
pub fn render(metrics: &Metrics, snapshot: &Snapshot) -> Result<String, std::fmt::Error> {
    let mut r = Registry::with_prefix(PREFIX);
    let sessions = Family::<SessionLabels, Gauge>::default();
    for ((target, state), n) in &snapshot.sessions.0 {
        sessions
            .get_or_create(&SessionLabels {
                state,
                target: target.clone(),
            })
            .set(*n);
    }
    r.register(
        "sessions",
        "Sessions listed now, by state and execution target",
        sessions,
    );
    let reporter = Family::<ReporterLabels, Counter>::default();
    for (result, n) in [
        (ReporterLine::Accepted, snapshot.reporter_accepted),
        (ReporterLine::Dropped, snapshot.reporter_dropped),
    ] {
        reporter.get_or_create(&ReporterLabels { result }).inc_by(n);
    }
    r.register(
        "reporter_lines",
        "Lines received on the reporter socket: accepted (routed to a session) or dropped \
         (malformed, too long, too slow, or naming no session)",
        reporter,
    );
    if let Some(rss) = snapshot.process.rss_bytes {
        r.register_with_unit(
            "process_resident_memory",
            "The daemon's resident set size",
            Unit::Bytes,
            gauge(rss),
        );
    }
    if let Some(fds) = snapshot.process.open_fds {
        r.register(
            "process_open_fds",
            "File descriptors the daemon has open (PTYs, sockets, the database)",
            gauge(fds),
        );
    }
    if let Some(u) = snapshot.sessions_usage {
        r.register_with_unit(
            "sessions_memory",
            "Memory every local session's processes use together now",
            Unit::Bytes,
            gauge(u.memory_bytes),
        );
        let cpu = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        cpu.inc_by(u.cpu_seconds);
        r.register_with_unit(
            "sessions_cpu",
            "CPU time local sessions' processes used since their cgroups' parent was made",
            Unit::Seconds,
            cpu,
        );
        r.register(
            "sessions_pids",
            "Processes and threads in local sessions now",
            gauge(u.pids.into()),
        );
    }
    let mut out = String::new();
    encode_registry(&mut out, metrics.registry())?;
    encode_registry(&mut out, &r)?;
    encode_eof(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_counted_target_lists_every_state_and_the_text_ends_in_eof() {
        let mut sessions = SessionCounts::default();
        sessions.include_target("local");
        sessions.count("devbox", SessionState::NeedsYou);
        sessions.count("devbox", SessionState::NeedsYou);
        let snapshot = Snapshot {
            sessions,
            reporter_accepted: 3,
            reporter_dropped: 1,
            process: ProcessStats {
                rss_bytes: Some(4096),
                open_fds: None,
            },
            sessions_usage: Some(atc_protocol::Usage {
                memory_bytes: 1 << 20,
                memory_peak_bytes: 2 << 20,
                cpu_seconds: 2.5,
                pids: 7,
            }),
        };
        let t = render(&Metrics::new(), &snapshot).expect("renders");
        for line in [
            "atc_sessions{state=\"needs_you\",target=\"devbox\"} 2",
            "atc_sessions{state=\"running\",target=\"devbox\"} 0",
            "atc_sessions{state=\"exited\",target=\"local\"} 0",
            "atc_reporter_lines_total{result=\"accepted\"} 3",
            "atc_reporter_lines_total{result=\"dropped\"} 1",
            "atc_process_resident_memory_bytes 4096",
            "atc_sessions_memory_bytes 1048576",
            "atc_sessions_cpu_seconds_total 2.5",
            "atc_sessions_pids 7",
            "atc_session_limit_kills_total{limit=\"memory\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "no `{line}` in:\n{t}");
        }
        assert!(!t.contains("open_fds"), "an unread figure is left out");
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert_eq!(t.matches("# EOF").count(), 1);
    }
}
