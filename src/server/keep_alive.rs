//! [`keep_alive`]: the ping each socket gets, and the drop of one whose peer went silent.
//!
//! Why the pings are in step. Each socket has a timer of its own, and a timer started when its
//! socket opened fires at its own moment: 400 attached clients pinged every 15 s woke the
//! daemon about 27 times a second, and each pong once more, on a daemon that is otherwise
//! asleep. Every socket's pings now fall on the same beats, whole periods from one instant
//! the process shares, so one wake-up serves all of them and their pongs come back together.
//! A socket's first ping therefore comes less than a period after it opens rather than one
//! period after; its silence is still measured from the last frame its peer sent.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use actix::{ActorContext, AsyncContext};

use crate::config::Timings;
use crate::sessions::client_queue::{ClientQueue, Outgoing};

/// A socket actor the heartbeat can watch: when it last heard from its peer, and its queue.
pub trait SocketPeer: actix::Actor<Context = actix::Context<Self>> {
    /// When the peer last sent anything (any frame counts as a sign of life).
    fn last_heard(&self) -> Instant;
    /// The connection's outbound queue.
    fn queue(&self) -> &ClientQueue;
}

/// Pings the peer on every beat of `ws_ping` and stops the actor (closing the socket) once it
/// has been silent for `ws_timeout` or its socket writer is gone. Stopping only ends this
/// connection.
pub fn keep_alive<A: SocketPeer>(ctx: &mut actix::Context<A>, timings: &Timings) {
    let timeout = timings.ws_timeout;
    let every = timings.ws_ping;
    let first = until_next_beat(*BEATS_FROM.get_or_init(Instant::now), Instant::now(), every);
    ctx.run_later(first, move |act, ctx| {
        beat(act, ctx, timeout);
        ctx.run_interval(every, move |act, ctx| beat(act, ctx, timeout));
    });
}

/// The instant every socket's beats are counted from.
static BEATS_FROM: OnceLock<Instant> = OnceLock::new();

fn beat<A: SocketPeer>(act: &mut A, ctx: &mut actix::Context<A>, timeout: Duration) {
    if act.last_heard().elapsed() > timeout || act.queue().is_closed() {
        tracing::info!("socket peer went silent; dropping the connection");
        act.queue().push(Outgoing::Close);
        ctx.stop();
    } else {
        act.queue().push(Outgoing::Ping);
    }
}

/// How long from `now` to the next whole multiple of `every` after `from`: more than zero and
/// at most `every`. A zero period has no beats; it gives zero, as an interval of zero would.
fn until_next_beat(from: Instant, now: Instant, every: Duration) -> Duration {
    let every_ns = every.as_nanos();
    if every_ns == 0 {
        return Duration::ZERO;
    }
    let into_period = now.saturating_duration_since(from).as_nanos() % every_ns;
    // What is left of a period is under `every`, so it fits the u64 that `every` came from.
    let left = u64::try_from(every_ns - into_period).unwrap_or(u64::MAX);
    Duration::from_nanos(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_opened_at_different_moments_beat_together() {
        let from = Instant::now();
        let every = Duration::from_secs(15);
        for opened_ms in [
            0u64,
            1,
            7_500,
            14_999,
            15_000,
            15_001,
            31_234,
            3_600_000 + 17,
        ] {
            let opened = from + Duration::from_millis(opened_ms);
            let wait = until_next_beat(from, opened, every);
            assert!(
                wait > Duration::ZERO && wait <= every,
                "{opened_ms} ms: {wait:?}"
            );
            let first = (opened + wait).duration_since(from);
            assert_eq!(
                first.as_nanos() % every.as_nanos(),
                0,
                "{opened_ms} ms: first beat at {first:?}"
            );
            assert!(first.as_millis() > u128::from(opened_ms), "{opened_ms} ms");
        }
    }

    #[test]
    fn a_socket_opened_on_a_beat_waits_a_whole_period() {
        let from = Instant::now();
        let every = Duration::from_millis(100);
        assert_eq!(until_next_beat(from, from, every), every);
        assert_eq!(until_next_beat(from, from + every * 3, every), every);
    }

    #[test]
    fn an_instant_before_the_first_counts_as_the_first_and_no_period_has_no_beats() {
        let from = Instant::now() + Duration::from_secs(1);
        let every = Duration::from_secs(15);
        assert_eq!(until_next_beat(from, Instant::now(), every), every);
        assert_eq!(until_next_beat(from, from, Duration::ZERO), Duration::ZERO);
    }
}
