//! The `local-pty` wing: sessions whose process runs on this machine in a pseudo-terminal.
//!
//! - [`provider`]: [`LocalPty`], the provider itself: its capabilities, and where its starts,
//!   commands and archives go.
//! - [`harness`]: one actor per process, owning the child and its PTY.
//! - [`launch`] and [`launcher`]: the blocking half of a start, on launcher threads with a
//!   descriptor table of their own; [`pty_spawn`] starts the child without forking the daemon,
//!   and [`child_fds`] says which descriptors it gets.
//! - [`pty_input`], [`pty_output`], [`pty_reader`] and [`echo_spin`]: the PTY's two halves.
//! - [`command`]: commands run to completion, without a terminal.
//! - [`group_leader`]: who leads a session's processes, recorded to tell them from strangers.
//! - [`host_limit`]: the machine's limits a start can run into, named for the client.
//! - [`cgroup`]: each session's processes in a cgroup of their own, with its limits;
//!   [`clone_into`] starts a child straight into a cgroup v2.

pub mod cgroup;
pub mod child_fds;
pub mod clone_into;
pub mod command;
pub mod echo_spin;
pub mod group_leader;
pub mod harness;
pub mod host_limit;
pub mod launch;
pub mod launcher;
pub mod proc_stat;
pub mod provider;
pub mod pty_input;
pub mod pty_output;
pub mod pty_reader;
pub mod pty_spawn;

pub use provider::{LocalPty, KIND};
