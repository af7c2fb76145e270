//! # switchyard-conformance
//!
//! One suite per port, run against every adapter of that port, and the harness that gives tests
//! real servers. Each suite is a set of `pub async fn` cases plus a macro
//! (`event_store_suite!(factory)`, …) that stamps out one named `#[tokio::test]` per case, so a
//! failing guarantee shows up by name.

pub mod checkpoint_cache;
pub mod event_store;
pub mod fleet;
pub mod harness;
pub mod stream_bridge;

#[doc(hidden)]
pub use tokio as __tokio;
