//! What `GET /metrics` shows: one [`Metrics`] value per daemon, handed to the places that
//! count through the state they already share (`AppState`, `SessionDeps`, the store, the
//! registry actors, the imp provider). Tests run several daemons in one process, so nothing
//! here is a process global.
//!
//! Two kinds of family live here. Counters and histograms are kept as things happen, each
//! increment an atomic add (the output path adds a chunk's length once, and nothing on it
//! locks or allocates). Gauges that can be read when asked (sessions by state and target,
//! reporter lines, process RSS and fds) are not kept at all: [`scrape`] reads them at scrape
//! time into families of their own. The two gauges nobody can read at scrape time without
//! asking every session or host actor (attached clients, leases held) are held as [`Held`]
//! units by what they count, so they give their unit back when it goes, however it goes.
//!
//! Names follow Prometheus practice: `atc_` first, the unit in the name, `_total` on counters
//! (added by the encoder). Label values are closed enums, never client or process text.

mod held;
pub mod process;
pub mod scrape;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

pub use held::{Held, HeldFlag};

/// Every name starts with this (and `_`).
pub const PREFIX: &str = "atc";

/// How a spawn ended, as `atc_spawns_total{outcome}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpawnOutcome {
    /// The process runs (for a remote target: impd answered its start).
    Started,
    /// Refused or failed before the process ran; nothing was left behind.
    Failed,
}

/// How a remote harness's reconnect ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconnectOutcome {
    /// A connection started again.
    Reattached,
    /// The harness ended while reconnecting (delays ran out, impd refused, the process
    /// exited, the host slept).
    Ended,
}

/// What the idempotency ledger answered a keyed spawn (spec §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LedgerAnswer {
    /// The key was new: the spawn ran.
    Created,
    /// The key was held and completed: the earlier effect was answered again.
    Replayed,
    /// The key was held for another payload.
    Conflict,
    /// The key's earlier effect may or may not stand.
    OutcomeUnknown,
}

/// What became of a line on the reporter socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReporterLine {
    /// Routed to its session.
    Accepted,
    /// Malformed, too long, too slow, or naming no session.
    Dropped,
}

/// How a permission request was resolved (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PermissionResolution {
    /// A client answered it through the API.
    Answered,
    /// Nobody answered in time: it resolved as `deny`.
    TimedOut,
    /// The session left `needs_you`, or went away.
    Dismissed,
}

macro_rules! label_values {
    ($($ty:ty { $($variant:ident => $text:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// Every value, in the order a scrape lists them.
            pub const ALL: &'static [$ty] = &[$(<$ty>::$variant),+];

            /// The label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(<$ty>::$variant => $text),+
                }
            }
        }

        impl EncodeLabelValue for $ty {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                encoder.write_str(self.as_str())
            }
        }
    )+};
}

label_values! {
    SpawnOutcome { Started => "started", Failed => "failed" }
    ReconnectOutcome { Reattached => "reattached", Ended => "ended" }
    LedgerAnswer {
        Created => "created",
        Replayed => "replayed",
        Conflict => "conflict",
        OutcomeUnknown => "outcome_unknown",
    }
    PermissionResolution {
        Answered => "answered",
        TimedOut => "timed_out",
        Dismissed => "dismissed",
    }
    ReporterLine { Accepted => "accepted", Dropped => "dropped" }
    LimitKind { Memory => "memory" }
}

/// A session limit whose reaching kills (only memory does: a process limit refuses forks and a
/// CPU limit slows, neither kills).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// `limits.memoryMiB`.
    Memory,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LimitKillLabels {
    limit: LimitKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SpawnLabels {
    outcome: SpawnOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReconnectLabels {
    outcome: ReconnectOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LedgerLabels {
    kind: LedgerAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PermissionLabels {
    resolution: PermissionResolution,
}

/// A counter family registered as `name`, with a zero counter already made for each of
/// `labels`: creating a label set's counter is what lists it, so a scrape shows `0` rather
/// than nothing before the first event.
fn listed_family<L>(
    r: &mut Registry,
    name: &str,
    help: &str,
    labels: impl IntoIterator<Item = L>,
) -> Family<L, Counter>
where
    L: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, Counter>::default();
    for label in labels {
        family.get_or_create_owned(&label);
    }
    r.register(name, help, family.clone());
    family
}

/// The counting side of one daemon's metrics. Cheap to clone (every family is shared), and
/// every method is an atomic add or a short-lived histogram lock.
#[derive(Clone)]
pub struct Metrics {
    /// The families below, for the encoder; nothing registers after [`Metrics::new`].
    registry: Arc<Registry>,
    input_bytes: Counter,
    output_bytes: Counter,
    desyncs: Counter,
    dropped_bytes: Counter,
    attached_clients: Gauge,
    spawns: Family<SpawnLabels, Counter>,
    spawn_seconds: Histogram,
    launch_wait_seconds: Histogram,
    launch_seconds: Histogram,
    store_write_seconds: Histogram,
    reconnects: Family<ReconnectLabels, Counter>,
    reconnect_seconds: Histogram,
    leases_held: Gauge,
    ledger_answers: Family<LedgerLabels, Counter>,
    permission_resolutions: Family<PermissionLabels, Counter>,
    limit_kills: Family<LimitKillLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh set, every counter at zero and every labelled family listing each of its
    /// values (see [`listed_family`]).
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix(PREFIX);
        let counter = |r: &mut Registry, name: &str, help: &str, unit: Option<Unit>| {
            let c = Counter::default();
            match unit {
                Some(unit) => r.register_with_unit(name, help, unit, c.clone()),
                None => r.register(name, help, c.clone()),
            }
            c
        };
        let input_bytes = counter(
            &mut r,
            "input",
            "Input written to sessions' processes (API input, submits, attach input)",
            Some(Unit::Bytes),
        );
        let output_bytes = counter(
            &mut r,
            "output",
            "Output read from sessions' processes",
            Some(Unit::Bytes),
        );
        let desyncs = counter(
            &mut r,
            "client_desyncs",
            "Times an attached client fell a queue behind and began missing output (each \
             is followed by a desync frame and a repaint once it drains)",
            None,
        );
        let dropped_bytes = counter(
            &mut r,
            "client_dropped",
            "Output not queued for attached clients that were too far behind",
            Some(Unit::Bytes),
        );
        let attached_clients = Gauge::default();
        r.register(
            "attached_clients",
            "Clients attached to sessions now (attach WebSockets)",
            attached_clients.clone(),
        );
        let spawns = listed_family(
            &mut r,
            "spawns",
            "Spawn requests that reached the session manager, by outcome",
            SpawnOutcome::ALL
                .iter()
                .map(|&outcome| SpawnLabels { outcome }),
        );
        let spawn_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        r.register_with_unit(
            "spawn_duration",
            "Time from a spawn reaching the session manager to its answer (the process \
             running, or the refusal)",
            Unit::Seconds,
            spawn_seconds.clone(),
        );
        let launch_wait_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        r.register_with_unit(
            "launch_wait",
            "Time a spawn's local process waited to be started: for a blocking thread, then \
             for a free launcher thread",
            Unit::Seconds,
            launch_wait_seconds.clone(),
        );
        let launch_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        r.register_with_unit(
            "launch_duration",
            "Time a launcher thread took to start a spawn's local process: its PTY, and the \
             fork, which waits for the child's exec",
            Unit::Seconds,
            launch_seconds.clone(),
        );
        let store_write_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        r.register_with_unit(
            "store_write_duration",
            "Time the store's writer spent on one queued write (fleet rows, prefs, trail \
             events)",
            Unit::Seconds,
            store_write_seconds.clone(),
        );
        let reconnects = listed_family(
            &mut r,
            "remote_reconnects",
            "Remote harness reconnects after a dropped connection, by how they ended",
            ReconnectOutcome::ALL
                .iter()
                .map(|&outcome| ReconnectLabels { outcome }),
        );
        let reconnect_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        r.register_with_unit(
            "remote_reconnect_duration",
            "Time from a remote connection dropping to a new one starting",
            Unit::Seconds,
            reconnect_seconds.clone(),
        );
        let leases_held = Gauge::default();
        r.register(
            "leases_held",
            "Imp hosts whose lease this daemon holds now",
            leases_held.clone(),
        );
        let ledger_answers = listed_family(
            &mut r,
            "ledger_answers",
            "Keyed spawns the idempotency ledger answered, by kind",
            LedgerAnswer::ALL.iter().map(|&kind| LedgerLabels { kind }),
        );
        let permission_resolutions = listed_family(
            &mut r,
            "permission_requests_resolved",
            "Permission requests resolved, by how",
            PermissionResolution::ALL
                .iter()
                .map(|&resolution| PermissionLabels { resolution }),
        );
        let limit_kills = listed_family(
            &mut r,
            "session_limit_kills",
            "Sessions whose process the kernel killed at one of their limits, by limit",
            LimitKind::ALL
                .iter()
                .map(|&limit| LimitKillLabels { limit }),
        );
        Metrics {
            registry: Arc::new(r),
            input_bytes,
            output_bytes,
            desyncs,
            dropped_bytes,
            attached_clients,
            spawns,
            spawn_seconds,
            launch_wait_seconds,
            launch_seconds,
            store_write_seconds,
            reconnects,
            reconnect_seconds,
            leases_held,
            ledger_answers,
            permission_resolutions,
            limit_kills,
        }
    }

    /// A session's process was killed at one of its limits.
    pub fn limit_killed(&self, limit: LimitKind) {
        self.limit_kills
            .get_or_create(&LimitKillLabels { limit })
            .inc();
    }

    /// The families kept as things happen.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// `len` bytes were written to a session's process.
    pub fn input_written(&self, len: usize) {
        self.input_bytes.inc_by(len as u64);
    }

    /// A chunk of `len` bytes was read from a session's process. Once per chunk.
    pub fn output_read(&self, len: usize) {
        self.output_bytes.inc_by(len as u64);
    }

    /// An attached client fell behind and began missing output.
    pub fn client_desynced(&self) {
        self.desyncs.inc();
    }

    /// `len` bytes were not queued for a client that is behind. Once per chunk.
    pub fn client_dropped(&self, len: usize) {
        self.dropped_bytes.inc_by(len as u64);
    }

    /// A unit of the attached-clients gauge, for as long as the client is attached.
    pub fn attached_client(&self) -> Held {
        Held::new(&self.attached_clients)
    }

    /// A spawn was answered after `took`.
    pub fn spawned(&self, outcome: SpawnOutcome, took: Duration) {
        self.spawns.get_or_create(&SpawnLabels { outcome }).inc();
        self.spawn_seconds.observe(took.as_secs_f64());
    }

    /// A spawn's local process started after `waited` for a blocking thread and a launcher,
    /// and `ran` on the launcher.
    pub fn process_launched(&self, waited: Duration, ran: Duration) {
        self.launch_wait_seconds.observe(waited.as_secs_f64());
        self.launch_seconds.observe(ran.as_secs_f64());
    }

    /// The store's writer spent `took` on one write.
    pub fn store_wrote(&self, took: Duration) {
        self.store_write_seconds.observe(took.as_secs_f64());
    }

    /// A remote reconnect ended, `took` after its connection dropped.
    pub fn reconnected(&self, outcome: ReconnectOutcome, took: Duration) {
        self.reconnects
            .get_or_create(&ReconnectLabels { outcome })
            .inc();
        if outcome == ReconnectOutcome::Reattached {
            self.reconnect_seconds.observe(took.as_secs_f64());
        }
    }

    /// A flag that holds a unit of the leases-held gauge while it is set.
    pub fn lease_flag(&self) -> HeldFlag {
        HeldFlag::new(&self.leases_held)
    }

    /// The ledger answered a keyed spawn.
    pub fn ledger_answered(&self, kind: LedgerAnswer) {
        self.ledger_answers
            .get_or_create(&LedgerLabels { kind })
            .inc();
    }

    /// A permission request was resolved.
    pub fn permission_resolved(&self, resolution: PermissionResolution) {
        self.permission_resolutions
            .get_or_create(&PermissionLabels { resolution })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: &Metrics) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, m.registry()).expect("encodes");
        out
    }

    #[test]
    fn names_carry_the_prefix_and_their_unit_and_labelled_families_start_at_zero() {
        let m = Metrics::new();
        let t = text(&m);
        for line in [
            "# TYPE atc_output_bytes counter",
            "atc_output_bytes_total 0",
            "atc_spawns_total{outcome=\"failed\"} 0",
            "atc_ledger_answers_total{kind=\"outcome_unknown\"} 0",
            "atc_permission_requests_resolved_total{resolution=\"timed_out\"} 0",
            "# TYPE atc_spawn_duration_seconds histogram",
            "# TYPE atc_launch_wait_seconds histogram",
            "# TYPE atc_launch_duration_seconds histogram",
            "atc_attached_clients 0",
        ] {
            assert!(t.lines().any(|l| l == line), "no `{line}` in:\n{t}");
        }
    }

    #[test]
    fn clones_count_into_the_same_families_and_separate_sets_do_not_share() {
        let (a, b) = (Metrics::new(), Metrics::new());
        a.clone().output_read(5);
        a.output_read(7);
        a.spawned(SpawnOutcome::Started, Duration::from_millis(3));
        assert!(text(&a).contains("atc_output_bytes_total 12\n"));
        assert!(text(&a).contains("atc_spawns_total{outcome=\"started\"} 1\n"));
        assert!(text(&a).contains("atc_spawn_duration_seconds_count 1\n"));
        assert!(text(&b).contains("atc_output_bytes_total 0\n"));
    }

    #[test]
    fn held_units_go_back_when_dropped() {
        let m = Metrics::new();
        let one = m.attached_client();
        let two = m.attached_client();
        assert!(text(&m).contains("atc_attached_clients 2\n"));
        drop(one);
        assert!(text(&m).contains("atc_attached_clients 1\n"));
        drop(two);
        assert!(text(&m).contains("atc_attached_clients 0\n"));
    }
}
