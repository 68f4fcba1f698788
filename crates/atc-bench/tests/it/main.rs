//! `atc-bench`'s tests, one binary: each phase as the bench runs it, against real PTYs and
//! real WebSockets (no timing is asserted). A phase's test goes in the module of what it
//! measures against. The bare-PTY test is a binary of its own (`tests/bare.rs`): it counts
//! this process's children, which the tests here would add to.

/// The bench's arguments from words, and a run with its report as JSON.
mod common;

/// The floor: a `--floor-only` run, and the floor under two clients.
mod floor;
/// The scale, spawn and reach phases against the real daemon in a child process.
mod scale;
