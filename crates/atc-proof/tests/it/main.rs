//! `atc-proof`'s tests, one binary: the short version of each suite, run as a user runs the
//! full one (the real binary with `--json`), and the suites' child daemon. A suite's short
//! version goes in the module named for it.

/// Running a suite through the real binary and reading its figures back.
mod support;

/// The suites' child daemon: a real daemon, killed dead and started again on its state dir.
mod child_daemon;
/// `crashes`: `kill -9`s of the daemon during keyed spawns spawn nothing twice.
mod crashes;
/// `drops`: attached clients dropped at random moments lose and repeat nothing.
mod drops;
/// `frames`: every malformed frame gets a clear answer and harms nothing.
mod frames;
/// `remote`: each impd fault under a remote session meets the spec.
mod remote;
/// `security`: the walk finds nothing.
mod security;
/// `soak`: sessions held with churn lose nothing and do not grow; growth stops at the limit.
mod soak;
