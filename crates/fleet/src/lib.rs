#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod cancel;
mod consumer;
mod envelope;
mod maintainer;
mod primitives;
mod queue;
mod registry;
mod retry;
mod schedule;
mod scheduler;

pub use cancel::{CancelReason, CancelToken};
pub use consumer::{
    Batching, Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, HandlerError, Output,
    Permanent, TaskOutput,
};
pub use envelope::{Envelope, LastError};
pub use maintainer::{
    Maintainer, MaintainerHandle, MaintainerOptions, MaintainerStats, QueueMaintained,
};
pub use primitives::{Counter, Events, Kv, Lock, LockGuard, Pool, PoolLease, Stream, Subscription};
pub use queue::{
    DeadLetter, DeadTask, InFlightTask, PushOptions, Queue, Reserved, Submitted, Task, TaskEnd,
    Waited,
};
pub use registry::{Catalog, WorkerRegistry};
pub use retry::{Backoff, Jitter, MAX_TASK_SECONDS, RetryPolicy, check_timeout};
pub use schedule::{CatchUp, MAX_SCHEDULE_PAYLOAD_BYTES, ScheduleSpec};
pub use scheduler::{Fired, Scheduler, SchedulerHandle, SchedulerOptions};
/// Task control's types (ADR 0380), as [`Queue`]'s task methods answer them.
pub use switchyard_core::fleet::{
    CancelOutcome, Keep, Retention, TaskEvent, TaskEvents, TaskInfo, TaskState,
};
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
