//! The narrow traits, one per area of the port (ADR 0367). Each method keeps the guarantee of the
//! port method of the same name (see the area traits of [`FleetBackend`](crate::fleet::FleetBackend));
//! its arguments have passed the checks the rustdoc names, and it does not repeat them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Notify;

use super::Attempt;
use crate::fleet::{
    CancelOutcome, ConfigWrite, DEFAULT_MAX_RESULT_BYTES, Delivery, EventStream, InFlight,
    LockGrant, PoolClaim, PoolItem, Priority, QueueStats, RateLimit, Receipt, Retention, Submit,
    SubmitOutcome, Tags, TaskEvents, TaskHead, TaskInfo, WorkerRecord, WorkerState,
};
use crate::{Error, Result};

/// Key-value entries; what [`Kv`](crate::fleet::Kv) needs of a backend. `ns` is never empty.
#[async_trait]
pub trait KvOps: Send + Sync {
    /// As [`Kv::kv_set`](crate::fleet::Kv::kv_set).
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;
    /// As [`Kv::kv_set_nx`](crate::fleet::Kv::kv_set_nx).
    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool>;
    /// As [`Kv::kv_get`](crate::fleet::Kv::kv_get).
    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>>;
    /// As [`Kv::kv_del`](crate::fleet::Kv::kv_del).
    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool>;
}

/// Leased pools; what [`Pools`](crate::fleet::Pools) needs of a backend. `name` is never empty.
#[async_trait]
pub trait PoolOps: Send + Sync {
    /// As [`Pools::pool_put`](crate::fleet::Pools::pool_put).
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()>;
    /// As [`Pools::pool_list`](crate::fleet::Pools::pool_list).
    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>>;
    /// As [`Pools::pool_size`](crate::fleet::Pools::pool_size).
    async fn pool_size(&self, name: &str) -> Result<u64>;
    /// As [`Pools::pool_remove`](crate::fleet::Pools::pool_remove).
    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool>;
    /// As [`Pools::pool_release`](crate::fleet::Pools::pool_release).
    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool>;
    /// As [`Pools::pool_claim_any`](crate::fleet::Pools::pool_claim_any), for `hold_ms` whole
    /// milliseconds (at least 1).
    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold_ms: u64,
    ) -> Result<Option<PoolClaim>>;
}

/// Fenced locks; what [`Locks`](crate::fleet::Locks) needs of a backend. `name` is never empty,
/// holds are whole milliseconds (at least 1). The front retries
/// [`lock_try_acquire`](LockOps::lock_try_acquire) until the caller's wait runs out.
#[async_trait]
pub trait LockOps: Send + Sync {
    /// One try: takes the lock for `hold_ms` if it is free or lapsed, raising its fence, in one
    /// step; `None` when someone holds it.
    async fn lock_try_acquire(&self, name: &str, hold_ms: u64) -> Result<Option<LockGrant>>;
    /// As [`Locks::lock_release`](crate::fleet::Locks::lock_release).
    async fn lock_release(&self, name: &str, token: &str) -> Result<bool>;
    /// As [`Locks::lock_extend`](crate::fleet::Locks::lock_extend).
    async fn lock_extend(&self, name: &str, token: &str, hold_ms: u64) -> Result<bool>;
    /// The first pause between two tries of a held lock; it doubles up to 500 ms.
    fn lock_backoff(&self) -> Duration {
        Duration::from_millis(50)
    }
}

/// Atomic counters; what [`Counters`](crate::fleet::Counters) needs of a backend. `name` is never
/// empty.
#[async_trait]
pub trait CounterOps: Send + Sync {
    /// As [`Counters::counter_incr`](crate::fleet::Counters::counter_incr).
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64>;
    /// As [`Counters::counter_get`](crate::fleet::Counters::counter_get).
    async fn counter_get(&self, name: &str) -> Result<i64>;
    /// As [`Counters::counter_set`](crate::fleet::Counters::counter_set).
    async fn counter_set(&self, name: &str, value: i64) -> Result<()>;
    /// As [`Counters::counter_del`](crate::fleet::Counters::counter_del).
    async fn counter_del(&self, name: &str) -> Result<bool>;
}

/// The job queue; what [`JobQueue`](crate::fleet::JobQueue) needs of a backend. `name` is never
/// empty, visibilities are whole milliseconds (at least 1).
///
/// A blocking reserve is written once, in the front: it calls
/// [`queue_try_reserve`](QueueOps::queue_try_reserve) at least once (so `timeout = 0` still
/// takes a ready task), then, while time is left, [`queue_before_wait`](QueueOps::queue_before_wait)
/// and sleeps until [`queue_wake`](QueueOps::queue_wake) is notified (or
/// [`queue_wait`](QueueOps::queue_wait) returns, for a backend without one), until the earliest
/// `retry_in` of the two attempts, the poll interval or the deadline, and tries again.
#[async_trait]
pub trait QueueOps: Send + Sync {
    /// As [`JobQueue::queue_submit`](crate::fleet::JobQueue::queue_submit); an idempotency key's
    /// `ns` is not empty. `queue_submit_once` arrives here too, as a submit with the key.
    ///
    /// `head` is the body's [`TaskHead`], read once by the front: with an id the adapter writes
    /// the task's record in the same step, or answers
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists) when a live or dead task has that
    /// id; a finished one's record is replaced (guarantee `task.unique_id`; an idempotency key's
    /// duplicate is answered first).
    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome>;
    /// As [`JobQueue::queue_push`](crate::fleet::JobQueue::queue_push). By default a plain
    /// [`queue_submit`](QueueOps::queue_submit); an adapter whose submit hands plain submits to
    /// its push path (a group commit) overrides this.
    async fn queue_push(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
    ) -> Result<()> {
        self.queue_submit(name, body, head, &Submit::new().priority(priority))
            .await
            .map(drop)
    }
    /// As [`JobQueue::queue_size`](crate::fleet::JobQueue::queue_size).
    async fn queue_size(&self, name: &str) -> Result<u64>;
    /// As [`JobQueue::queue_stats`](crate::fleet::JobQueue::queue_stats).
    async fn queue_stats(&self, name: &str) -> Result<QueueStats>;
    /// As [`JobQueue::queue_peek`](crate::fleet::JobQueue::queue_peek).
    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// One reserve attempt, never waiting: moves due scheduled tasks, then reserves up to `max`
    /// (1 to [`MAX_BATCH`](crate::fleet::MAX_BATCH)) ready tasks in serve order for
    /// `visibility_ms`, in one step (guarantees `queue.reserve_atomic`, `queue.batches`). With
    /// nothing taken, `retry_in` says when something may change that no wake signal announces.
    /// `again` is false on a call's first attempt and true after a sleep (a backend may look
    /// more cheaply first then).
    async fn queue_try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
        again: bool,
    ) -> Result<Attempt>;
    /// Called after an empty attempt when the caller will wait: the place to ask for wake-ups (a
    /// waiter lease) and to look again for what came in meanwhile. Nothing by default.
    async fn queue_before_wait(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
    ) -> Result<Attempt> {
        let _ = (name, max, visibility_ms);
        Ok(Attempt::default())
    }
    /// The signal this process raises when queue `name` may have work (a push, a requeue, a
    /// resume); `None` when the backend waits its own way, in [`queue_wait`](QueueOps::queue_wait).
    fn queue_wake(&self, name: &str) -> Option<Arc<Notify>>;
    /// Waits up to `nap` for work on queue `name`, for a backend without a
    /// [`queue_wake`](QueueOps::queue_wake) signal. A sleep by default.
    async fn queue_wait(&self, name: &str, nap: Duration) -> Result<()> {
        let _ = name;
        tokio::time::sleep(nap).await;
        Ok(())
    }
    /// The longest sleep of a waiting reserve between two attempts, first and at most: it starts
    /// at the first and doubles up to the second. 50 ms by default.
    fn queue_poll(&self) -> (Duration, Duration) {
        (Duration::from_millis(50), Duration::from_millis(50))
    }
    /// As [`JobQueue::queue_ack`](crate::fleet::JobQueue::queue_ack); with `result` (at most
    /// [`TaskOps::max_result_bytes`]), [`Tasks::queue_complete`](crate::fleet::Tasks::queue_complete):
    /// a recorded task's result is stored with its end in the same step.
    async fn queue_ack(&self, name: &str, receipt: &Receipt, result: Option<&[u8]>)
    -> Result<bool>;
    /// As [`JobQueue::queue_nack`](crate::fleet::JobQueue::queue_nack); `head` is the new body's
    /// (its `max_attempts` and `last_error` update the record).
    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
        delay: Duration,
    ) -> Result<bool>;
    /// As [`JobQueue::queue_extend`](crate::fleet::JobQueue::queue_extend).
    async fn queue_extend(&self, name: &str, receipt: &Receipt, visibility_ms: u64)
    -> Result<bool>;
    /// As [`JobQueue::queue_fail`](crate::fleet::JobQueue::queue_fail); `head` is the body's.
    async fn queue_fail(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool>;
    /// As [`JobQueue::queue_sweep_expired`](crate::fleet::JobQueue::queue_sweep_expired).
    async fn queue_sweep_expired(&self, name: &str) -> Result<u64>;
    /// As [`JobQueue::queue_promote_due`](crate::fleet::JobQueue::queue_promote_due).
    async fn queue_promote_due(&self, name: &str) -> Result<u64>;
    /// As [`JobQueue::queue_dead`](crate::fleet::JobQueue::queue_dead); `head` is the body's (a
    /// recorded task ends `dead`).
    async fn queue_dead(&self, name: &str, body: &[u8], head: &TaskHead) -> Result<()>;
}

/// Batches; what [`QueueBatches`](crate::fleet::QueueBatches) needs of a backend beyond
/// [`QueueOps::queue_try_reserve`]. `name` is never empty; batches hold 1 to
/// [`MAX_BATCH`](crate::fleet::MAX_BATCH) items (the front answers empty ones itself).
#[async_trait]
pub trait QueueBatchOps: Send + Sync {
    /// As [`QueueBatches::queue_push_many`](crate::fleet::QueueBatches::queue_push_many).
    /// `heads[i]` is `bodies[i]`'s; with one id taken (or repeated in the batch) nothing is
    /// pushed and the answer is [`Error::AlreadyExists`](crate::Error::AlreadyExists).
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()>;
    /// As [`QueueBatches::queue_ack_many`](crate::fleet::QueueBatches::queue_ack_many).
    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>>;
}

/// Flow control; what [`QueueFlow`](crate::fleet::QueueFlow) needs of a backend. `name` is never
/// empty; a rate limit is one [`RateLimit::new`] accepts; progress is at most
/// [`MAX_PROGRESS_BYTES`](crate::fleet::MAX_PROGRESS_BYTES).
#[async_trait]
pub trait QueueFlowOps: Send + Sync {
    /// As [`QueueFlow::queue_pause`](crate::fleet::QueueFlow::queue_pause).
    async fn queue_pause(&self, name: &str) -> Result<bool>;
    /// As [`QueueFlow::queue_resume`](crate::fleet::QueueFlow::queue_resume).
    async fn queue_resume(&self, name: &str) -> Result<bool>;
    /// As [`QueueFlow::queue_set_rate_limit`](crate::fleet::QueueFlow::queue_set_rate_limit).
    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()>;
    /// As [`QueueFlow::queue_progress`](crate::fleet::QueueFlow::queue_progress).
    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool>;
    /// As [`QueueFlow::queue_in_flight`](crate::fleet::QueueFlow::queue_in_flight).
    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>>;
    /// As [`QueueFlow::queue_release`](crate::fleet::QueueFlow::queue_release).
    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool>;
    /// As [`QueueFlow::queue_delivered`](crate::fleet::QueueFlow::queue_delivered).
    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>>;
}

/// Dead letters; what [`DeadLetters`](crate::fleet::DeadLetters) needs of a backend. `name` is
/// never empty; `dlq_requeue_chosen` gets at most [`MAX_BATCH`](crate::fleet::MAX_BATCH) bodies.
#[async_trait]
pub trait DeadLetterOps: Send + Sync {
    /// As [`DeadLetters::dlq_peek`](crate::fleet::DeadLetters::dlq_peek).
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// As [`DeadLetters::dlq_pop`](crate::fleet::DeadLetters::dlq_pop).
    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// As [`DeadLetters::dlq_length`](crate::fleet::DeadLetters::dlq_length).
    async fn dlq_length(&self, name: &str) -> Result<u64>;
    /// As [`DeadLetters::dlq_clear`](crate::fleet::DeadLetters::dlq_clear).
    async fn dlq_clear(&self, name: &str) -> Result<u64>;
    /// As [`DeadLetters::dlq_requeue`](crate::fleet::DeadLetters::dlq_requeue).
    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64>;
    /// As [`DeadLetters::dlq_requeue_chosen`](crate::fleet::DeadLetters::dlq_requeue_chosen).
    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>>;
}

/// Stored schedules; what [`Schedules`](crate::fleet::Schedules) needs of a backend. `name` is
/// never empty.
#[async_trait]
pub trait ScheduleOps: Send + Sync {
    /// As [`Schedules::schedule_put`](crate::fleet::Schedules::schedule_put).
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()>;
    /// As [`Schedules::schedule_get`](crate::fleet::Schedules::schedule_get).
    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// As [`Schedules::schedule_list`](crate::fleet::Schedules::schedule_list).
    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>>;
    /// As [`Schedules::schedule_delete`](crate::fleet::Schedules::schedule_delete).
    async fn schedule_delete(&self, name: &str) -> Result<bool>;
}

/// Sorted streams; what [`Streams`](crate::fleet::Streams) needs of a backend. `name` is never
/// empty; a pushed score is finite.
#[async_trait]
pub trait StreamOps: Send + Sync {
    /// As [`Streams::stream_push`](crate::fleet::Streams::stream_push).
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()>;
    /// As [`Streams::stream_pop`](crate::fleet::Streams::stream_pop).
    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// As [`Streams::stream_peek`](crate::fleet::Streams::stream_peek).
    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// As [`Streams::stream_length`](crate::fleet::Streams::stream_length).
    async fn stream_length(&self, name: &str) -> Result<u64>;
    /// As [`Streams::stream_trim`](crate::fleet::Streams::stream_trim).
    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()>;
}

/// Pub/sub; what [`Events`](crate::fleet::Events) needs of a backend. `topic` is never empty.
#[async_trait]
pub trait EventOps: Send + Sync {
    /// As [`Events::event_publish`](crate::fleet::Events::event_publish).
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()>;
    /// As [`Events::event_subscribe`](crate::fleet::Events::event_subscribe).
    async fn event_subscribe(&self, topic: &str) -> Result<EventStream>;
}

/// The worker registry; what [`Workers`](crate::fleet::Workers) needs of a backend. A registered
/// worker's automation type and id are not empty, a config written is a JSON object, a stats
/// frame's `ts` is finite.
#[async_trait]
pub trait WorkerOps: Send + Sync {
    /// As [`Workers::worker_register`](crate::fleet::Workers::worker_register).
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()>;
    /// As [`Workers::worker_get_config`](crate::fleet::Workers::worker_get_config).
    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)>;
    /// As [`Workers::worker_set_config`](crate::fleet::Workers::worker_set_config).
    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite>;
    /// As [`Workers::worker_set_state`](crate::fleet::Workers::worker_set_state).
    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool>;
    /// As [`Workers::worker_set_stats`](crate::fleet::Workers::worker_set_stats).
    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool>;
    /// As [`Workers::worker_stats_push`](crate::fleet::Workers::worker_stats_push).
    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool>;
    /// As [`Workers::worker_stats_history`](crate::fleet::Workers::worker_stats_history).
    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>>;
    /// As [`Workers::worker_get`](crate::fleet::Workers::worker_get).
    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>>;
    /// As [`Workers::worker_list`](crate::fleet::Workers::worker_list).
    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>>;
    /// As [`Workers::worker_remove`](crate::fleet::Workers::worker_remove).
    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool>;
}

/// The catalog; what [`Catalog`](crate::fleet::Catalog) needs of a backend. A stored document's
/// automation type is not empty.
#[async_trait]
pub trait CatalogOps: Send + Sync {
    /// As [`Catalog::catalog_set`](crate::fleet::Catalog::catalog_set).
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()>;
    /// As [`Catalog::catalog_get`](crate::fleet::Catalog::catalog_get).
    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>>;
    /// As [`Catalog::catalog_all`](crate::fleet::Catalog::catalog_all).
    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>>;
    /// As [`Catalog::queue_names`](crate::fleet::Catalog::queue_names).
    async fn queue_names(&self) -> Result<Vec<String>>;
}

/// Control of a task (ADR 0380); what [`Tasks`](crate::fleet::Tasks) needs of a backend beyond
/// its queue. `name` is never empty; ids are 1 to
/// [`MAX_TASK_ID_BYTES`](crate::fleet::MAX_TASK_ID_BYTES) bytes; batches hold 1 to
/// [`MAX_TASK_BATCH`](crate::fleet::MAX_TASK_BATCH) items.
///
/// Every method has a body answering [`Error::Rejected`](crate::Error::Rejected) ("task records
/// are not implemented by this backend yet"), so an adapter builds before it keeps records; one
/// that keeps them implements all of them and passes `fleet_task_suite!`.
#[async_trait]
pub trait TaskOps: Send + Sync {
    /// As [`Tasks::task_get`](crate::fleet::Tasks::task_get), in one atomic read.
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        let _ = id;
        Err(not_kept("task_get", name))
    }
    /// Cancels each of `ids` (distinct) in one step, answering per id in order.
    async fn task_cancel(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        let _ = ids;
        Err(not_kept("task_cancel", name))
    }
    /// Cancels up to `max` scheduled and waiting tasks in one step; how many it removed (fewer
    /// than `max` means none is left).
    async fn queue_purge_step(&self, name: &str, max: usize) -> Result<u64> {
        let _ = max;
        Err(not_kept("queue_purge", name))
    }
    /// Up to `max` events after `after` (`None`: the oldest kept; `"$"`: none, at the log's
    /// end), never waiting.
    async fn task_events(&self, name: &str, after: Option<&str>, max: usize) -> Result<TaskEvents> {
        let _ = (after, max);
        Err(not_kept("task_events", name))
    }
    /// The signal this process raises when queue `name` ends a task; `None` when the backend
    /// waits its own way, in [`task_events_wait`](TaskOps::task_events_wait).
    fn task_events_wake(&self, name: &str) -> Option<Arc<Notify>> {
        let _ = name;
        None
    }
    /// Waits up to `nap` for an event after `after`, for a backend without a wake signal. A
    /// sleep by default.
    ///
    /// A backend whose wait itself reads the events that woke it may hand back up to `max` of
    /// them, but only when it can tell they follow `after` with nothing between (no trim removed
    /// any); they are then the answer, as [`task_events`](TaskOps::task_events) would have given
    /// it. `None` sends the front to read the log again. This spares a waiter the second round
    /// trip after every wake (a result's waiter learns the end one step after the ack).
    async fn task_events_wait(
        &self,
        name: &str,
        after: &str,
        max: usize,
        nap: Duration,
    ) -> Result<Option<TaskEvents>> {
        let _ = (name, after, max);
        tokio::time::sleep(nap).await;
        Ok(None)
    }
    /// As [`Tasks::queue_retention`](crate::fleet::Tasks::queue_retention).
    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        Err(not_kept("queue_retention", name))
    }
    /// As [`Tasks::queue_set_retention`](crate::fleet::Tasks::queue_set_retention); `retention`
    /// passed [`Retention::check`].
    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        let _ = retention;
        Err(not_kept("queue_set_retention", name))
    }
    /// Removes up to `max` records and events retention no longer keeps, and repairs records a
    /// consumer without records moved, in one step; how many records it removed or repaired.
    async fn task_maintain(&self, name: &str, max: usize) -> Result<u64> {
        let _ = max;
        Err(not_kept("queue_maintain", name))
    }
    /// The largest result an ack stores, in bytes.
    fn max_result_bytes(&self) -> usize {
        DEFAULT_MAX_RESULT_BYTES
    }
}

fn not_kept(op: &'static str, name: &str) -> Error {
    Error::Rejected {
        op,
        key: name.to_owned(),
        message: "this backend keeps no task records yet (ADR 0380); use one that passes \
                  fleet_task_suite!"
            .into(),
    }
}
