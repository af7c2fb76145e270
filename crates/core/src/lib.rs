#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod cache;
pub mod clock;
pub mod context;
pub mod error;
pub mod event;
pub mod fleet;
pub mod keys;
pub mod lane;
pub mod observe;
pub mod pycompat;
pub mod status;
pub mod store;
pub mod stream;

pub use cache::{
    CacheStats, CheckpointCache, HistoryCache, HistoryEntry, MemoryCheckpointCache, TypedPayload,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::{RunContext, RunSummary, SessionClaim};
pub use error::{BoxError, Error, Result};
pub use event::{Event, Payload};
pub use fleet::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LockGrant,
    MemoryFleetBackend, PoolClaim, PoolItem, Priority, QueueStats, RateLimit, Receipt, RunAt,
    Submit, SubmitOutcome, Tags, WorkerRecord, WorkerState,
};
pub use status::{RunStatus, status_of};
pub use store::{Appended, EventStore, MemoryEventStore, Run};
pub use stream::{
    ItemStream, MemoryStreamBridge, StreamBridge, StreamEvent, StreamGap, StreamItem, publish_event,
};
