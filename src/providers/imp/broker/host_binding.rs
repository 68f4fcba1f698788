//! One actor per host binding (spec §6.3, §6.4): every operation on one host's binding runs
//! strictly in order, each to its end before the next starts (every handler is an
//! `AtomicResponse`). That order is what makes the launch handshake hold:
//!
//! - `Admit` → a [`Ticket`] once the binding is `ready` and the launch's hash is current. A
//!   revoke queued before the admission runs first, so the launch is refused and nothing is
//!   sent; a revoke that arrives during the admission runs after the hand-over.
//! - [`Ticket::check`] is the last-moment check, asked once the connection to impd is open
//!   and before its opening message is written; a revoke that ran since refuses it.
//! - The ticket is released exactly once: by [`Ticket::release`] or when it is dropped.
//!   Its connection holds it for as long as it lives, so the counts ([`TicketCounts`], shown
//!   as `admissions` in `GET /v1/sessions/{id}/auth`) have one outstanding while a harness's
//!   connection is up or opening, and none once it ended (a drop, a refusal, a kill, a
//!   harness that let go).

use actix::prelude::*;

use super::binder::{HostContext, Launcher, Reconciled};
use super::binding::Binding;
use crate::providers::ProviderError;

/// Runs `op` on the actor's context with nothing else of this host's running meanwhile.
macro_rules! in_turn {
    ($self:ident, $op:expr) => {{
        let ctx = $self.ctx.clone();
        AtomicResponse::new(Box::pin(async move { $op(ctx).await }.into_actor($self)))
    }};
}

/// Which opening a ticket admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitKind {
    /// A `start` (a spawn, a revive, a restore).
    Start,
    /// An `attach` (a reconnect, a restart's re-attach).
    Attach,
}

/// The host binding's actor.
pub struct HostBinding {
    ctx: HostContext,
    counts: TicketCounts,
    next_ticket: u64,
}

/// How many tickets the actor gave out and got back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, MessageResponse)]
pub struct TicketCounts {
    /// Tickets handed over.
    pub issued: u64,
    /// Tickets released.
    pub released: u64,
}

impl TicketCounts {
    /// Tickets out now.
    pub fn outstanding(self) -> u64 {
        self.issued - self.released
    }
}

impl HostBinding {
    /// The actor over one host's operations.
    pub fn new(ctx: HostContext) -> HostBinding {
        HostBinding {
            ctx,
            counts: TicketCounts::default(),
            next_ticket: 0,
        }
    }
}

impl Actor for HostBinding {
    type Context = Context<Self>;
}

/// A new host: see [`HostContext::create`].
#[derive(Message)]
#[rtype(result = "Result<Binding, ProviderError>")]
pub struct Create(pub Launcher);

/// A launch onto an existing host: see [`HostContext::verify`].
#[derive(Message)]
#[rtype(result = "Result<Binding, ProviderError>")]
pub struct Verify(pub Launcher);

/// The harness behind a create really started.
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct MarkReady;

/// A create whose harness never started: see [`HostContext::abandon`].
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct Abandon(pub String);

/// The binding as a client sees it: see [`HostContext::status`].
#[derive(Message)]
#[rtype(result = "Result<atc_protocol::responses::AuthStatus, ProviderError>")]
pub struct Status;

/// A forget is about to destroy the host: see [`HostContext::forget_begin`].
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct ForgetBegin;

/// The host was destroyed: the binding's record goes.
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct ForgetEnd;

impl Handler<ForgetBegin> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, _: ForgetBegin, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.forget_begin().await })
    }
}

impl Handler<ForgetEnd> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, _: ForgetEnd, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.forget_end().await })
    }
}

/// Start-up reconciliation of the host's binding: see [`HostContext::reconcile`].
#[derive(Message)]
#[rtype(result = "Result<Reconciled, ProviderError>")]
pub struct Reconcile {
    /// Whether a listed session uses the host (it then owns an unfinished create).
    pub has_listed_session: bool,
}

impl Handler<Reconcile> for HostBinding {
    type Result = AtomicResponse<Self, Result<Reconciled, ProviderError>>;
    fn handle(&mut self, msg: Reconcile, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move {
            c.reconcile(msg.has_listed_session).await
        })
    }
}

/// Revoke every grant: see [`HostContext::revoke`].
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
pub struct Revoke;

/// Rebind the host to the agent's `auth` as configured now: see [`HostContext::rebind`].
/// Answers the new revision.
#[derive(Message)]
#[rtype(result = "Result<u32, ProviderError>")]
pub struct Rebind(pub Launcher);

impl Handler<Rebind> for HostBinding {
    type Result = AtomicResponse<Self, Result<u32, ProviderError>>;
    fn handle(&mut self, msg: Rebind, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.rebind(&msg.0).await })
    }
}

/// Admit one opening planned for the binding hash `hash`.
#[derive(Message)]
#[rtype(result = "Result<Ticket, ProviderError>")]
pub struct Admit {
    /// Start or attach.
    pub kind: AdmitKind,
    /// The binding hash the launch was planned for.
    pub hash: String,
    /// The create attempt the launch belongs to, if it is its host's first.
    pub creating: Option<uuid::Uuid>,
}

/// The last-moment check of ticket `id`.
#[derive(Message)]
#[rtype(result = "Result<(), ProviderError>")]
struct CheckTicket {
    hash: String,
    creating: Option<uuid::Uuid>,
}

/// Ticket `id` is given back.
#[derive(Message)]
#[rtype(result = "()")]
struct Released;

/// How many tickets went out and came back.
#[derive(Message)]
#[rtype(result = "TicketCounts")]
pub struct Counts;

impl Handler<Create> for HostBinding {
    type Result = AtomicResponse<Self, Result<Binding, ProviderError>>;
    fn handle(&mut self, msg: Create, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.create(&msg.0).await })
    }
}

impl Handler<Verify> for HostBinding {
    type Result = AtomicResponse<Self, Result<Binding, ProviderError>>;
    fn handle(&mut self, msg: Verify, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.verify(&msg.0).await })
    }
}

impl Handler<MarkReady> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, _: MarkReady, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.mark_ready().await })
    }
}

impl Handler<Abandon> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, msg: Abandon, _: &mut Self::Context) -> Self::Result {
        in_turn!(
            self,
            |c: HostContext| async move { c.abandon(&msg.0).await }
        )
    }
}

impl Handler<Status> for HostBinding {
    type Result = AtomicResponse<Self, Result<atc_protocol::responses::AuthStatus, ProviderError>>;
    fn handle(&mut self, _: Status, _: &mut Self::Context) -> Self::Result {
        let host = self.ctx.clone();
        AtomicResponse::new(Box::pin(
            async move { host.status().await }
                .into_actor(self)
                .map(|res, act, _| {
                    let mut status = res?;
                    // Read after the store, in turn: a ticket released meanwhile is counted.
                    status.admissions = atc_protocol::responses::AuthAdmissions {
                        issued: act.counts.issued,
                        released: act.counts.released,
                    };
                    Ok(status)
                }),
        ))
    }
}

impl Handler<Revoke> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, _: Revoke, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move { c.revoke().await })
    }
}

impl Handler<Admit> for HostBinding {
    type Result = AtomicResponse<Self, Result<Ticket, ProviderError>>;
    fn handle(&mut self, msg: Admit, ctx: &mut Self::Context) -> Self::Result {
        let host = self.ctx.clone();
        let addr = ctx.address();
        let (hash, creating) = (msg.hash.clone(), msg.creating);
        AtomicResponse::new(Box::pin(
            async move { host.admits(&hash, creating).await }
                .into_actor(self)
                .map(move |res, act, _| {
                    res?;
                    act.next_ticket += 1;
                    act.counts.issued += 1;
                    Ok(Ticket {
                        id: act.next_ticket,
                        kind: msg.kind,
                        hash: msg.hash,
                        creating: msg.creating,
                        binding: addr,
                        released: false,
                    })
                }),
        ))
    }
}

impl Handler<CheckTicket> for HostBinding {
    type Result = AtomicResponse<Self, Result<(), ProviderError>>;
    fn handle(&mut self, msg: CheckTicket, _: &mut Self::Context) -> Self::Result {
        in_turn!(self, |c: HostContext| async move {
            c.admits(&msg.hash, msg.creating).await
        })
    }
}

impl Handler<Released> for HostBinding {
    type Result = ();
    fn handle(&mut self, _: Released, _: &mut Self::Context) {
        self.counts.released += 1;
    }
}

impl Handler<Counts> for HostBinding {
    type Result = TicketCounts;
    fn handle(&mut self, _: Counts, _: &mut Self::Context) -> TicketCounts {
        self.counts
    }
}

/// An admission handed over to one connection.
pub struct Ticket {
    id: u64,
    kind: AdmitKind,
    hash: String,
    creating: Option<uuid::Uuid>,
    binding: Addr<HostBinding>,
    released: bool,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Ticket {
    /// What it admits.
    pub fn kind(&self) -> AdmitKind {
        self.kind
    }

    /// The last-moment check: whether the binding still admits this launch. A binding actor
    /// that is gone refuses (the daemon is stopping).
    pub async fn check(&self) -> Result<(), ProviderError> {
        self.binding
            .send(CheckTicket {
                hash: self.hash.clone(),
                creating: self.creating,
            })
            .await
            .unwrap_or(Err(ProviderError::Internal))
    }

    /// Gives the admission back; a ticket released (or dropped) once counts once.
    pub fn release(mut self) {
        self.give_back();
    }

    fn give_back(&mut self) {
        if !self.released {
            self.released = true;
            self.binding.do_send(Released);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.give_back();
    }
}
