//! The impd client: everything the daemon says to impd, the control plane that runs imps
//! (microVMs), spoken exactly as `spec/impd-protocol.md` describes it.
//!
//! - [`client`]: [`ImpdClient`], the HTTP/oRPC procedures (system info, imps, leases) and
//!   the socket opener; [`broker`] the identity, secret and grant calls; [`envelope`] is the oRPC request/answer format, [`token`] where the
//!   bearer token comes from, [`types`] the shapes procedures answer.
//! - [`exec`]: `/exec` sockets (sessions and commands) as a writer plus an event stream;
//!   [`exec_messages`] their wire shapes, [`output`] the session continuity they report.
//! - [`run`]: a command run to completion (the daemon's guest setup and file transfer).
//! - [`tunnel`]: reverse forwards over `/tunnel` and their flow-controlled relays.
//! - [`error`]: [`ImpPortError`] and its [`ImpdCode`] (impd's codes and the ones this client
//!   adds); [`refusal`] reads the `data` of impd's refusals (forbidden reasons, missing kinds,
//!   failed requirements).
//! - [`names`]: the names atc gives its things on impd ([`exec_session_name`]).
//!
//! Everything runs on the current actix-rt arbiter (awc's futures are not `Send`); sockets get
//! their reader and writer tasks there.

pub mod broker;
pub mod client;
pub mod envelope;
pub mod error;
pub mod exec;
pub mod exec_messages;
pub mod names;
pub mod output;
pub mod refusal;
pub mod run;
pub mod token;
pub mod tunnel;
pub mod types;
mod ws_link;

pub use broker::{AuthScheme, PrincipalKind, Secret, SecretKind, SecretRule, TokenScope, WhoAmI};
pub use client::{ImpdClient, ImpdTimeouts};
pub use error::{ImpPortError, ImpdCode};
pub use exec::{ExecEvents, ExecSocket, ExecWriter, GatedOpenError};
pub use exec_messages::{
    AttachMsg, ExecEvent, Opening, Requirement, ResumeFrom, StartMsg, Started,
};
pub use names::exec_session_name;
pub use output::{cold_boot_after, ColdBoot, NoSession, Output, Previous, Resume};
pub use refusal::{ForbiddenReason, NotFoundKind, Precondition, PreconditionReason};
pub use run::{RunResult, RunSpec};
pub use token::TokenSource;
pub use tunnel::{Relay, RelayReader, RelayWriter, ReverseForward};
pub use types::{CreateImp, Features, Imp, Lease, SystemInfo};
