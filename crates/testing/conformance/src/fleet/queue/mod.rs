//! The task queue's guarantees, by what they are about: handing tasks out and taking them back
//! (`delivery`), tasks that fail, lapse or are not tasks at all (`recovery`), idempotent
//! submission (`submit_once`), the counts snapshot (`stats`), submitting for later (`delayed`),
//! batches (`batches`), pause and rate limits (`flow`), what a worker reports on or does with
//! its delivery (`progress`), and moving due tasks without reserving (`promote`).

mod batches;
mod delayed;
mod delivery;
mod flow;
mod progress;
mod promote;
mod recovery;
mod stats;
mod submit_once;

pub use batches::queue_batches;
pub use delayed::queue_delayed;
pub use flow::{queue_pause, queue_rate_limit};
pub use progress::{queue_progress, queue_release};
pub use promote::queue_promote_due;

pub use delivery::{
    queue_attempts, queue_nack, queue_priority_fifo, queue_receipts, queue_reserve_atomic,
};
pub use recovery::{queue_bad_bodies, queue_fail_atomic, queue_sweep};
pub use stats::queue_stats;
pub use submit_once::queue_submit_once;
