//! Broker authentication (spec §6): agents whose real credential stays in impd. The daemon
//! grants impd secrets to the agent's imp and launches it with placeholder variables; impd's
//! credential broker puts the real value on the way out. No credential value ever passes
//! through this module.
//!
//! - [`binding`]: a host's binding record, its grants, and the rules of their states.
//! - [`broker_error`]: every refusal the broker path gives (the `auth_*` codes).
//! - [`binder`]: create, verify, revoke, rebind and admission checks of one host's binding.
//! - [`gate`]: the read-only checks of impd and its token before the broker is relied on.
//! - [`host_binding`]: the actor that runs one host's operations in order, and its launch tickets.
//! - [`placement`]: which targets a broker-backed agent may start on.
//! - [`startup`]: settling, before the daemon serves, the bindings a dead daemon left mid-change.

pub mod binder;
pub mod binding;
pub mod binding_store;
pub mod broker_error;
pub mod gate;
pub mod host_binding;
pub mod placement;
pub mod startup;

// An agent's `auth` entry is config, and its guest plan is the agent's: both sit below the
// providers, which use them.
pub use crate::agents::guest_plan::BrokerLaunch;
pub use crate::config::agent_auth::AgentAuth;
pub use broker_error::BrokerError;
