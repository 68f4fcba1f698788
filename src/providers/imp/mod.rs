//! The `imp` provider: sessions whose agent runs inside an imp (a microVM) on an impd host,
//! reached over impd's HTTP API and `/exec` WebSocket (`impd_client` speaks the wire protocol;
//! this module decides what atc does with it, spec §5).
//!
//! Layer by layer, from the trait down:
//!
//! * [`provider`]: [`provider::ImpProvider`], the `ExecutionProvider` of one imp target; it
//!   hands each session a harness and keeps one lease actor per imp. [`settings`] reads the
//!   target's options once a provider is built, [`target_options`] checks them before.
//! * [`host_lease`]: one actor per imp that readies it, holds and renews this daemon's lease,
//!   and sleeps or destroys it, strictly one request after another.
//! * [`harness`]: one actor per remote process, keeping it connected across drops, impd
//!   restarts, sleeps and daemon restarts, a shell over [`harness_state`], its phase machine;
//!   [`connection`]: one actor per `/exec` connection attempt of a harness; [`input_queue`]:
//!   the harness's input, bounded and never dropped.
//! * [`guest_atc`]: the `<guestDir>/bin/atc` a readying installs for harnesses with hooks.
//! * [`naming`]: imp, exec session and guest socket names that fit impd's limits.
//! * [`cursor`]: where a harness is in its process's output, so a reconnect resumes by offset
//!   and no byte reaches a session twice.
//! * [`outcome`]: what a harness does when a connection ends; [`opening`]: what it opens the
//!   next connection with.
//! * [`report_forward`]: a harness's report socket inside its imp, and [`bridge`]: the session
//!   bridge protocol each of its connections speaks.
//! * [`broker`]: broker authentication, for agents whose credential stays in impd; it exists
//!   only for imp, so it lives in this wing. [`harness_broker`] is where a harness meets it.

pub mod bridge;
pub mod broker;
pub mod connection;
pub mod cursor;
pub mod guest_atc;
pub mod harness;
pub mod harness_broker;
pub mod harness_state;
pub mod host_error;
pub mod host_lease;
pub mod input_queue;
pub mod naming;
pub mod opening;
pub mod outcome;
pub mod provider;
pub mod report_forward;
pub mod settings;
pub mod target_options;

/// The `imp` kind as the provider registry lists it: each usable imp target gets an
/// [`provider::ImpProvider`] of its own, keeping its broker bindings in the daemon's store.
pub const KIND: crate::providers::registry::ProviderKind =
    crate::providers::registry::ProviderKind {
        name: "imp",
        check_options: target_options::check,
        identity: target_options::identity,
        credential_vars: target_options::credential_vars,
        build: build_provider,
    };

fn build_provider(
    target: &crate::providers::targets::Target,
    ctx: &crate::providers::registry::BuildContext<'_>,
) -> Option<std::sync::Arc<dyn crate::providers::ExecutionProvider>> {
    let settings = settings::ImpSettings::from_options(
        &target.id,
        &target.options,
        ctx.daemon_id,
        ctx.timings,
    )?
    // The daemon's own binary is what imps get as their atc (spec §5.3 step 4).
    .with_atc_binary(ctx.atc_program);
    Some(std::sync::Arc::new(
        provider::ImpProvider::new(settings, ctx.bridges.clone())
            .with_broker(ctx.bindings.clone())
            .with_metrics(ctx.metrics.clone()),
    ))
}
