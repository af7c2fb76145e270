//! The task queue's guarantees, by what they are about: handing tasks out and taking them back
//! (`delivery`), tasks that fail, lapse or are not tasks at all (`recovery`), idempotent
//! submission (`submit_once`) and the counts snapshot (`stats`).

mod delivery;
mod recovery;
mod stats;
mod submit_once;

pub use delivery::{
    queue_attempts, queue_nack, queue_priority_fifo, queue_receipts, queue_reserve_atomic,
};
pub use recovery::{queue_bad_bodies, queue_fail_atomic, queue_sweep};
pub use stats::queue_stats;
pub use submit_once::queue_submit_once;
