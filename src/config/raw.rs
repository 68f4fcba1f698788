//! The config file's serde shapes, exactly as written by users. Validation into checked values
//! happens in the parent module; nothing else reads these types.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file. Every field is optional; absent ones take the embedded default.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    /// `host:port` to listen on.
    pub listen: Option<String>,
    /// `host:port` of the metrics-only listener (`GET /metrics`, no token); absent: none.
    pub metrics_listen: Option<String>,
    /// PEM certificate chain to serve HTTPS with (with `tlsKey`); absolute path.
    pub tls_cert: Option<String>,
    /// PEM private key of `tlsCert`; absolute path.
    pub tls_key: Option<String>,
    /// Origins allowed to open WebSockets besides same-host ones.
    pub allowed_origins: Vec<String>,
    /// Extra agents, by id. Each entry is read into a [`RawAgent`] on its own, so a bad one is
    /// a problem of that agent and not of the file (spec §9.3).
    pub agents: BTreeMap<String, serde_json::Value>,
    /// Sizes and durations.
    pub limits: RawLimits,
    /// Execution targets by id, in config order; checked in `targets.rs` with scoped errors,
    /// so any JSON value is accepted here.
    pub targets: Option<RawTargets>,
    /// The target spawns use when they name none.
    pub default_target: Option<serde_json::Value>,
    /// Where the cgroup hierarchies are mounted (`/sys/fs/cgroup`); `null`: run sessions
    /// without cgroups. Any JSON value, checked in the parent module; `Some(None)` is `null`.
    #[serde(deserialize_with = "present")]
    pub cgroup_root: Option<Option<serde_json::Value>>,
    /// Principals by id; any JSON value, checked entry by entry in `principals.rs` so a bad
    /// one is a problem of that principal.
    pub principals: Option<serde_json::Value>,
    /// The activity rule's thresholds.
    pub activity: super::attention::RawActivity,
}

/// One configured agent.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAgent {
    /// Program name (looked up on PATH) or path.
    pub bin: String,
    /// Arguments, passed as separate argv elements.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Display label.
    pub label: Option<String>,
    /// Agent kind (`claude`, `codex`, `grok`).
    pub kind: Option<String>,
    /// Claude settings merged into the per-session settings file.
    pub settings: Option<serde_json::Value>,
    /// Role → model map for the listing.
    pub models: BTreeMap<String, String>,
    /// Claude gateway base URL.
    #[serde(rename = "baseURL")]
    pub base_url: Option<String>,
    /// Broker authentication (claude and codex only), checked by `broker::AgentAuth`.
    pub auth: Option<serde_json::Value>,
    /// Limits on its sessions, replacing `limits.session` field by field.
    pub limits: Option<atc_protocol::SessionLimits>,
    /// `hooks`, `activity` or `none`.
    pub attention: Option<String>,
}

/// Limits; see `config.example.json` for the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLimits {
    /// Per-client outbound queue in bytes.
    pub queue_bytes: Option<usize>,
    /// Per-session output ring in bytes.
    pub ring_bytes: Option<usize>,
    /// SIGHUP to SIGKILL grace in milliseconds.
    pub kill_grace_ms: Option<u64>,
    /// Largest accepted request body in bytes.
    pub body_cap_bytes: Option<usize>,
    /// Resize debounce in milliseconds.
    pub resize_debounce_ms: Option<u64>,
    /// Hook reports a session may send per second, on average.
    pub reports_per_second: Option<u32>,
    /// Hook reports a session may send at once.
    pub report_burst: Option<u32>,
    /// Trail rows kept per session.
    pub trail_per_session: Option<u32>,
    /// Trail rows kept in all.
    pub trail_rows: Option<u32>,
    /// Days a trail row is kept.
    pub trail_max_age_days: Option<u32>,
    /// Tokenless HTTP connections allowed from one peer address.
    pub tokenless_connections: Option<usize>,
    /// Cap on sessions with a running process; absent or `null`: worked out at start.
    pub max_sessions: Option<usize>,
    /// Limits on each local session's processes, for every agent and target.
    pub session: Option<atc_protocol::SessionLimits>,
    /// Spawns in flight before more are refused as busy.
    pub spawn_queue: Option<usize>,
    /// Available memory below which a local spawn is refused; absent: the default, `null`: off.
    #[serde(rename = "memoryFloorMiB", default, deserialize_with = "present")]
    pub memory_floor_mib: Option<Option<u64>>,
}

/// A key that is there, `null` or not, as `Some`: with `default`, an absent key stays `None`,
/// so a key whose `null` means something other than its default can tell the two apart.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The `targets` value as written: an object's entries in file order (serde_json's own map
/// sorts its keys, and the spec keeps config order), or anything else, which `targets.rs`
/// reports as a scoped problem instead of failing the whole file.
#[derive(Debug, Clone)]
pub enum RawTargets {
    /// `{ "id": {...}, ... }`, entries in order.
    Entries(Vec<(String, serde_json::Value)>),
    /// Not an object.
    NotAnObject,
}

impl<'de> Deserialize<'de> for RawTargets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawTargets;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawTargets, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, serde_json::Value>()? {
                    entries.push((k, v));
                }
                Ok(RawTargets::Entries(entries))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<RawTargets, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(RawTargets::NotAnObject)
            }

            fn visit_bool<E>(self, _: bool) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
            fn visit_i64<E>(self, _: i64) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
            fn visit_u64<E>(self, _: u64) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
            fn visit_f64<E>(self, _: f64) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
            fn visit_str<E>(self, _: &str) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
            fn visit_unit<E>(self) -> Result<RawTargets, E> {
                Ok(RawTargets::NotAnObject)
            }
        }
        d.deserialize_any(Visit)
    }
}
