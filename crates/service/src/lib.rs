//! `switchyard-service`: the rules of runs and queues that every door into switchyard shares —
//! the gateway's routes, the `switchyard` binary's direct mode and a library user's own code —
//! as typed requests and answers over the ports, with no HTTP in it (ADR 0372).
//!
//! A rule written here holds the same way wherever a run is started or a task is acked: a claim
//! that steps over stale runs closes them and publishes their end; an append lands only while
//! its run is open and reaches the run's stream; a finished run's stream is released after its
//! grace period. The request and answer types derive `serde` and `utoipa::ToSchema`, so the
//! gateway's OpenAPI document describes exactly what the service takes and gives.
//!
//! * [`runs`]: start (a claim that closes the stale runs it steps over), append (only while the
//!   run is open), end, resume (exactly once), read, list, status, and where to follow a run's
//!   stream; every stored event is published to the stream bridge, and a finished run's stream
//!   released after its grace period.
//! * [`queues`]: submit, reserve, ack, nack, fail, extend, progress, dead letters, stats,
//!   pause, rate limits, schedules and workers.
//! * [`webhooks`]: subscriptions to run and task ends, delivered signed (Standard Webhooks)
//!   and retried through an internal queue, with a delivery log.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use switchyard_core::stream::MemoryStreamBridge;
//! use switchyard_core::{MemoryEventStore, Payload, RunContext, RunStatus};
//! use switchyard_service::runs::{RunSettings, Runs, StartOutcome, StartRun};
//!
//! let store = Arc::new(MemoryEventStore::new());
//! let bridge = Arc::new(MemoryStreamBridge::new(1_000)?);
//! let settings = RunSettings {
//!     stale_after: Duration::from_secs(300),
//!     stream_grace: Duration::from_secs(60),
//! };
//! let runs = Runs::new(store, bridge, settings);
//! let request: StartRun = serde_json::from_value(serde_json::json!({
//!     "run_id": "r1", "session_id": "s1",
//!     "invocable": "helper", "kind_of_invocable": "agent", "input": [],
//! }))?;
//! let StartOutcome::Started(started) = runs.start(request).await? else {
//!     panic!("a fresh session is free");
//! };
//! assert_eq!(started.log_key, "s1");
//! let ctx = RunContext::new("r1").with_session("s1");
//! runs.append(&ctx, vec![Payload::text_delta("m1", "Hello")], None).await?;
//! let ended = runs.end(&ctx, Payload::cancelled(None), None).await?;
//! assert_eq!(ended.status, RunStatus::Cancelled);
//! assert_eq!(runs.read(&ctx, 0).await?.events.len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Errors are one [`Error`]: what the caller sent breaks a rule ([`Error::Invalid`]), what it
//! names does not exist ([`Error::NotFound`]), the data's state refuses it
//! ([`Error::Conflict`]), or a backend failed ([`Error::Backend`], whose variant says whether to
//! retry).

// `Error` is built only on the refusing path of one call, and carries what the caller must read
// (the field, the code, the details); boxing it buys nothing.
#![allow(clippy::result_large_err)]

mod error;
pub mod queues;
pub mod runs;
pub mod webhooks;

pub use error::{Error, Result};

/// The longest duration a caller may ask for (`stale_after_secs`, `ttl_seconds`): ten years.
/// Larger values mean nothing useful and only risk overflowing a backend's clock arithmetic.
pub const MAX_DURATION_SECS: u64 = 10 * 365 * 24 * 3600;
