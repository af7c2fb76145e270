#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod consumer;
mod envelope;
mod maintainer;
mod primitives;
mod queue;
mod registry;
mod schedule;
mod scheduler;

pub use consumer::{
    Batching, Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, HandlerError,
};
pub use envelope::{Envelope, LastError};
pub use maintainer::{
    Maintainer, MaintainerHandle, MaintainerOptions, MaintainerStats, QueueMaintained,
};
pub use primitives::{Counter, Events, Kv, Lock, LockGuard, Pool, PoolLease, Stream, Subscription};
pub use queue::{
    DeadLetter, DeadTask, InFlightTask, PushOptions, Queue, Reserved, Submitted, Task,
};
pub use registry::{Catalog, WorkerRegistry};
pub use schedule::{CatchUp, MAX_SCHEDULE_PAYLOAD_BYTES, ScheduleSpec};
pub use scheduler::{Fired, Scheduler, SchedulerHandle, SchedulerOptions};
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
