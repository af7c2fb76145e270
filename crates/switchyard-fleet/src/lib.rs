//! # switchyard-fleet
//!
//! The typed fleet layer users call, over any `Arc<dyn FleetBackend>`: the memory adapter of
//! `switchyard-core`, `switchyard-fleet-sqlite` or `switchyard-fleet-redis`. It depends on
//! `switchyard-core` only, so picking a backend is picking its crate (ADR 0160).
//!
//! * [`Queue<T>`] pushes and reserves tasks in the seed's envelope (§2 of the fleet spec, exact
//!   JSON), and [`Consumer`] runs a handler on them with concurrency N, visibility heartbeats,
//!   retries with backoff, dead-lettering and graceful shutdown.
//! * [`Pool`], [`Lock`] (with a [`LockGuard`] that extends, releases and knows when it was lost),
//!   [`Counter`], [`Kv`], [`Stream`], [`Events`], [`WorkerRegistry`] and [`Catalog`] wrap the rest
//!   of the port.

mod consumer;
mod envelope;
mod primitives;
mod queue;
mod registry;

pub use consumer::{Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, HandlerError};
pub use envelope::Envelope;
pub use primitives::{Counter, Events, Kv, Lock, LockGuard, Pool, PoolLease, Stream, Subscription};
pub use queue::{PushOptions, Queue, Reserved, Submitted, Task};
pub use registry::{Catalog, WorkerRegistry};
/// `uuid4().hex`, the seed's task ids; kept here for callers of the typed layer (the gateway
/// names runs with it).
pub use switchyard_core::pycompat::uuid4_hex;

use std::time::{SystemTime, UNIX_EPOCH};

/// The producer's clock in unix seconds, microsecond precision (Python's `time.time()`).
pub(crate) fn unix_now() -> f64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_micros() as f64) / 1e6
}
