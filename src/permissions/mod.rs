//! Permission requests (spec §8): the `PermissionRegistry` actor.

pub mod registry;
