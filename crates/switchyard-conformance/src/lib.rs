//! # switchyard-conformance
//!
//! One suite per port, run against every adapter of that port, and the harness that gives tests
//! real servers. Each suite is a set of `pub async fn` cases, one module per area of the port,
//! plus a macro (`event_store_suite!(factory)`, …) that stamps out one named `#[tokio::test]` per
//! case, so a failing guarantee shows up by name. Every macro takes the same shape of factory
//! (ADR 0165): `async fn(<Port>Setup) -> switchyard_core::Result<<Port>Fixture>`, the fixture
//! carrying the port object and its hooks.

pub mod checkpoint_cache;
pub mod event_store;
pub mod fleet;
pub mod harness;
pub mod stream_bridge;

#[doc(hidden)]
pub use tokio as __tokio;
