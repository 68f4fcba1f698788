//! Where the binder keeps its records: the `broker_bindings` and `broker_grants` rows of
//! spec §6.3. The daemon's store implements it (`store::bindings`); the broker names only
//! this trait, so the providers sit below the store and a test can keep rows in memory.
//!
//! Every write is committed when its future resolves, because the binder records each step
//! before it takes it. Operations on one host never interleave (one host binding actor each),
//! so the rows need no further locking.

use futures_util::future::LocalBoxFuture;

use super::binding::{Binding, Grant};
use atc_protocol::responses::{AuthBindingState, AuthGrantState};

/// Why a record could not be read or written; the binder logs it and answers `internal`.
pub type StoreFailure = Box<dyn std::error::Error + Send + Sync>;

/// The store as the broker's actors hold it.
pub type SharedBindingStore = std::sync::Arc<dyn BindingStore + Send + Sync>;

/// What an operation of the store answers.
pub type Stored<'a, T> = LocalBoxFuture<'a, Result<T, StoreFailure>>;

/// The binding records of every host.
pub trait BindingStore {
    /// The binding of `host_key`, if recorded.
    fn binding_get<'a>(&'a self, host_key: &'a str) -> Stored<'a, Option<Binding>>;
    /// Every binding, oldest first (start-up reconciliation).
    fn bindings_all(&self) -> Stored<'_, Vec<Binding>>;
    /// Records `binding` whole (inserted, or replacing the host's record; its grant rows stay).
    fn binding_put<'a>(&'a self, binding: &'a Binding) -> Stored<'a, ()>;
    /// Sets a recorded binding's state at `now` (epoch ms); fails if there is none.
    fn binding_set_state<'a>(
        &'a self,
        host_key: &'a str,
        state: AuthBindingState,
        now: i64,
    ) -> Stored<'a, ()>;
    /// Drops a host's binding and its grant rows.
    fn binding_delete<'a>(&'a self, host_key: &'a str) -> Stored<'a, ()>;
    /// Records a grant row whole; fails if its binding is not recorded.
    fn grant_put<'a>(&'a self, grant: &'a Grant) -> Stored<'a, ()>;
    /// Sets a recorded grant's state; fails if there is none.
    fn grant_set_state<'a>(
        &'a self,
        host_key: &'a str,
        secret: &'a str,
        state: AuthGrantState,
    ) -> Stored<'a, ()>;
    /// The grant rows of a host's binding, by secret name.
    fn grants_of<'a>(&'a self, host_key: &'a str) -> Stored<'a, Vec<Grant>>;
    /// Drops one grant row.
    fn grant_delete<'a>(&'a self, host_key: &'a str, secret: &'a str) -> Stored<'a, ()>;
}
