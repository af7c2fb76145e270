//! What a fleet adapter implements (ADR 0367): one narrow trait per area of the port, holding only
//! what the backend must do itself, each method one atomic step of the backend.
//!
//! Callers never see these traits. They call the port ([`FleetBackend`](super::FleetBackend) and
//! its area traits), which core implements once for every type that implements all of these:
//! `impl<T: KvOps> Kv for T`, and so on. That front, written once, does what every adapter would
//! otherwise write again:
//!
//! * **argument checks** — empty names, zero holds and visibilities, batch sizes, the bounds of
//!   `queue_reserve_many`, progress sizes, non-finite scores and timestamps, worker configs that
//!   are not objects, rate limits built past [`RateLimit::new`](super::RateLimit::new). An ops
//!   method is only called with arguments that passed them, and its rustdoc says which;
//! * **sugar** — `queue_submit_once` is `queue_submit` with the key, and `queue_push` is a plain
//!   submit unless the adapter has a cheaper path (then it overrides [`QueueOps::queue_push`]);
//! * **lock backoff** — `lock_acquire` retries the adapter's single
//!   [`LockOps::lock_try_acquire`] with a doubling backoff until its wait runs out;
//! * **the blocking reserve** — `queue_reserve` and `queue_reserve_many` try
//!   [`QueueOps::queue_try_reserve`] at least once, then sleep until the adapter's wake signal
//!   ([`QueueOps::queue_wake`] or [`QueueOps::queue_wait`]), the moment the adapter said
//!   something may change (a delayed task falling due, a rate-limit token), the adapter's poll
//!   interval, or the deadline, whichever comes first.
//!
//! * **task control** (ADR 0380) — the body's [`TaskHead`](super::TaskHead) is read once and
//!   handed to every queue step that writes a task's record; cancels are announced on
//!   [`cancel_topic`]; `queue_purge` and `queue_maintain` loop the adapter's bounded steps.
//!
//! An adapter that implements these traits gets the guarantees' argument rules for free; the
//! conformance suite (`fleet_backend_suite!`) checks the rest of the contract, as before.

mod front;
mod ops;
mod wait;

pub use front::cancel_topic;
pub use ops::{
    CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps, QueueBatchOps,
    QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
pub use wait::Attempt;
