//! # switchyard-core
//!
//! The heart of switchyard: the agentdeck event model and its status fold, the run context, the
//! four port traits every adapter implements, the one [`Error`] type, the store-owned [`Clock`], and
//! the in-memory reference adapters. It does no I/O.
//!
//! [`pycompat`] writes what the Python peers write (`json.dumps`, float `repr`, `uuid4().hex`),
//! byte for byte; every writer of bytes a Python peer reads goes through it.
//!
//! | port | module | memory adapter |
//! |---|---|---|
//! | [`EventStore`] | [`store`] | [`MemoryEventStore`] |
//! | [`StreamBridge`] | [`stream`] | [`MemoryStreamBridge`] |
//! | [`CheckpointCache`] | [`cache`] | [`MemoryCheckpointCache`] |
//! | [`FleetBackend`] | [`fleet`] | [`MemoryFleetBackend`] |

pub mod cache;
pub mod clock;
pub mod context;
pub mod error;
pub mod event;
pub mod fleet;
pub mod keys;
pub mod pycompat;
pub mod status;
pub mod store;
pub mod stream;

pub use cache::{CacheStats, CheckpointCache, HistoryEntry, MemoryCheckpointCache};
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::{RunContext, RunSummary, SessionClaim};
pub use error::{BoxError, Error, Result};
pub use event::{Event, Payload};
pub use fleet::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LockGrant,
    MemoryFleetBackend, PoolClaim, PoolItem, Priority, QueueStats, Receipt, SubmitOutcome, Tags,
    WorkerRecord, WorkerState,
};
pub use status::{RunStatus, status_of};
pub use store::{EventStore, MemoryEventStore};
pub use stream::{
    ItemStream, MemoryStreamBridge, StreamBridge, StreamEvent, StreamGap, StreamItem,
};
