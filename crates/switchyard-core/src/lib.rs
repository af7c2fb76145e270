//! # switchyard-core
//!
//! The heart of switchyard: the agentdeck event model and its status fold, the run context, the
//! four port traits every adapter implements, the one [`Error`] type, the store-owned [`Clock`], and
//! the in-memory reference adapters. It does no I/O.

pub mod cache;
pub mod clock;
pub mod error;
pub mod keys;

pub use cache::{CacheStats, CheckpointCache, HistoryEntry, MemoryCheckpointCache};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{BoxError, Error, Result};
pub mod context;
pub mod event;
pub mod status;
pub mod store;

pub use context::{RunContext, RunSummary, SessionClaim};
pub use event::{Event, Payload};
pub use status::{RunStatus, status_of};
pub use store::{EventStore, MemoryEventStore};
