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
//!
//! Errors are one [`Error`]: what the caller sent breaks a rule ([`Error::Invalid`]), what it
//! names does not exist ([`Error::NotFound`]), the data's state refuses it
//! ([`Error::Conflict`]), or a backend failed ([`Error::Backend`], whose variant says whether to
//! retry).

mod error;
pub mod queues;
pub mod runs;

pub use error::{Error, Result};

/// The longest duration a caller may ask for (`stale_after_secs`, `ttl_seconds`): ten years.
/// Larger values mean nothing useful and only risk overflowing a backend's clock arithmetic.
pub const MAX_DURATION_SECS: u64 = 10 * 365 * 24 * 3600;
