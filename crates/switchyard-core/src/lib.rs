//! # switchyard-core
//!
//! The heart of switchyard: the agentdeck event model and its status fold, the run context, the
//! four port traits every adapter implements, the one [`Error`] type, the store-owned [`Clock`], and
//! the in-memory reference adapters. It does no I/O.

pub mod clock;
pub mod error;
pub mod keys;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{BoxError, Error, Result};

pub mod fleet;
pub use fleet::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LockGrant,
    MemoryFleetBackend, PoolClaim, PoolItem, Priority, Receipt, SubmitOutcome, Tags, WorkerRecord,
    WorkerState,
};
