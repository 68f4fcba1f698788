//! Messages about a shared host (spec §3.7, §3.8, §4.5): a sub-session may run on its
//! parent's host, and what happens to that host follows its owner. The owner's actor says what
//! it did to the host (slept, destroyed, woke); the manager, which alone knows who shares a
//! host key, passes it on to every other session there. Sessions never know their mates.

use actix::prelude::*;

use atc_protocol::SessionId;

/// The owner's host went to sleep with every harness inside (sent by the owner after a
/// successful suspend). Answered once every other session there is recorded asleep.
#[derive(Message)]
#[rtype(result = "()")]
pub struct HostSlept {
    /// The host.
    pub host_key: SessionId,
    /// The session that put it to sleep (told nothing more).
    pub owner: SessionId,
}

/// The owner's host was destroyed with everything on it (sent by the owner after a
/// successful destroy). Answered once every other session there is removed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct HostDestroyed {
    /// The host.
    pub host_key: SessionId,
    /// The session that destroyed it.
    pub owner: SessionId,
}

/// The owner's host woke with its revive (sent by the owner once its revive started). Every
/// other session suspended there is revived in the background; a failure is logged, never
/// the owner's answer (spec §3.8).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HostWoken {
    /// The host.
    pub host_key: SessionId,
    /// The session whose revive woke it.
    pub owner: SessionId,
}

/// Whether every live session on a host is idle (spec §5.5: a host sleeps only when nothing
/// on it is busy, its sub-sessions' turns included). The manager asks each; `true` when all
/// answer idle.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct HostIdle {
    /// The host.
    pub host_key: SessionId,
}

/// From the manager to a session on a host that went to sleep: let the harness go as
/// suspended, like the owner's own (`lastMsg` `asleep`). Answered once the exit is written.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SleepWithHost;

/// From the manager to a session on a host that was destroyed: the process went with it;
/// forget the session. Answered once it is removed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct GoWithHost;

/// Where a session tells the manager what it did to the host it owns.
#[derive(Clone)]
pub struct HostMates {
    /// See [`HostSlept`].
    pub slept: Recipient<HostSlept>,
    /// See [`HostDestroyed`].
    pub destroyed: Recipient<HostDestroyed>,
    /// See [`HostWoken`].
    pub woken: Recipient<HostWoken>,
    /// See [`HostIdle`].
    pub idle: Recipient<HostIdle>,
}
