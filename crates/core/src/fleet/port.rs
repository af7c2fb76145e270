//! The fleet port: [`FleetBackend`] is the union of one trait per area (ADR 0161).
//!
//! Each area trait ([`Kv`], [`Pools`], [`Locks`], [`Counters`], [`JobQueue`], [`QueueBatches`],
//! [`QueueFlow`], [`DeadLetters`], [`Schedules`], [`Streams`], [`Events`], [`Workers`],
//! [`Catalog`], [`Tasks`]) states its own guarantees, each with a stable slug (`queue.delayed`) that code
//! and ADRs cite; the numbers are positions in the whole port's list, indexed on
//! [`FleetBackend`] and generated with the conformance cases from one table (ADR 0362). An
//! adapter implements the narrow trait of every area instead ([`adapter`](super::adapter), one
//! file each); core implements each area trait once over it, checking arguments and waiting for
//! every adapter alike (ADR 0367), and [`FleetBackend`] comes from the blanket impl. Callers keep using
//! `Arc<dyn FleetBackend>`: the methods of its supertraits resolve on the trait object without
//! importing them. A caller holding a concrete adapter type imports the area traits it calls, or
//! [`prelude`](super::prelude).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    ConfigWrite, Delivery, EventStream, IdempotencyKey, LockGrant, PoolClaim, PoolItem, Priority,
    QueueBatches, QueueFlow, QueueStats, Receipt, Schedules, Submit, SubmitOutcome, Tags, Tasks,
    WorkerRecord, WorkerState,
};
use crate::Result;

/// The fleet backend port: every area below, as one object-safe trait (`Arc<dyn FleetBackend>`).
///
/// # Guarantees
///
/// Every adapter upholds these; `switchyard_conformance::fleet_backend_suite!` has one case per
/// guarantee, named after it. Each is stated in full on the area trait that owns it; the one that
/// holds for every area is stated here.
///
/// 1. **kv** (`kv.entries`, see [`Kv`])
/// 2. **pool_claim_order** (`pool.claim_order`, see [`Pools`])
/// 3. **pool_claim_exclusive** (`pool.claim_exclusive`, see [`Pools`])
/// 4. **pool_expiry** (`pool.expiry`, see [`Pools`])
/// 5. **lock** (`lock.fenced`, see [`Locks`])
/// 6. **counter** (`counter.atomic`, see [`Counters`])
/// 7. **queue_priority_fifo** (`queue.priority_fifo`, see [`JobQueue`])
/// 8. **queue_reserve_atomic** (`queue.reserve_atomic`, see [`JobQueue`])
/// 9. **queue_receipts** (`queue.receipts`, see [`JobQueue`])
/// 10. **queue_attempts** (`queue.attempts`, see [`JobQueue`])
/// 11. **queue_nack** (`queue.nack`, see [`JobQueue`])
/// 12. **queue_fail_atomic** (`queue.fail_atomic`, see [`JobQueue`])
/// 13. **queue_sweep** (`queue.sweep`, see [`JobQueue`])
/// 14. **queue_bad_bodies** (`queue.bad_bodies`, see [`JobQueue`])
/// 15. **queue_submit_once** (`queue.submit_once`, see [`JobQueue`])
/// 16. **queue_stats** (`queue.stats`, see [`JobQueue`])
/// 17. **queue_delayed** (`queue.delayed`, see [`JobQueue`])
/// 18. **queue_promote_due** (`queue.promote_due`, see [`JobQueue`])
/// 19. **queue_batches** (`queue.batches`, see [`QueueBatches`])
/// 20. **queue_pause** (`queue.pause`, see [`QueueFlow`])
/// 21. **queue_rate_limit** (`queue.rate_limit`, see [`QueueFlow`])
/// 22. **queue_progress** (`queue.progress`, see [`QueueFlow`])
/// 23. **queue_release** (`queue.release`, see [`QueueFlow`])
/// 24. **dlq** (`dlq.fifo_atomic`, see [`DeadLetters`])
/// 25. **dlq_requeue_chosen** (`dlq.requeue_chosen`, see [`DeadLetters`])
/// 26. **schedules** (`schedule.stored`, see [`Schedules`])
/// 27. **stream** (`streams.sorted`, see [`Streams`])
/// 28. **events** (`events.pubsub`, see [`Events`])
/// 29. **worker_registry** (`worker.registry`, see [`Workers`])
/// 30. **worker_stats** (`worker.stats`, see [`Workers`])
/// 31. **catalog** (`catalog.documents`, see [`Catalog`])
/// 32. **queue_names** (`queue.names`, see [`Catalog`])
/// 33. **hostile_names** (`fleet.hostile_names`) — names, ids and keys may contain `:`, `|`, `{`,
///     `}`, `%`, spaces, unicode; distinct names never share state. Empty names and zero
///     holds/visibilities are [`Error::InvalidInput`](crate::Error::InvalidInput).
pub trait FleetBackend:
    Kv
    + Pools
    + Locks
    + Counters
    + JobQueue
    + QueueBatches
    + QueueFlow
    + DeadLetters
    + Schedules
    + Streams
    + Events
    + Workers
    + Catalog
    + Tasks
    + Send
    + Sync
    + fmt::Debug
{
}

impl<T> FleetBackend for T where
    T: Kv
        + Pools
        + Locks
        + Counters
        + JobQueue
        + QueueBatches
        + QueueFlow
        + DeadLetters
        + Schedules
        + Streams
        + Events
        + Workers
        + Catalog
        + Tasks
        + Send
        + Sync
        + fmt::Debug
        + ?Sized
{
}

/// Key-value entries in namespaces, with optional TTLs. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 1. **kv** (`kv.entries`) — `kv_set` upserts; with a TTL the value disappears after it, without
///    one any old TTL is cleared. `kv_set_nx` writes only when the key is absent or expired and
///    says whether it wrote. `kv_get` of a missing or expired key is `None`; `kv_del` says whether
///    it deleted.
#[async_trait]
pub trait Kv: Send + Sync {
    /// Upserts `value`; expires after `ttl` if given, else never (clearing an old TTL).
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;
    /// Sets only if absent or expired; `true` if it set.
    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool>;
    /// The live value, if any.
    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>>;
    /// `true` if a live value was deleted.
    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool>;
}

/// Leased pools: items with tags and expiry, claimed exclusively for a hold. Part of
/// [`FleetBackend`].
///
/// # Guarantees
///
/// 2. **pool_claim_order** (`pool.claim_order`) — `pool_claim_any` considers only live (unexpired,
///    unclaimed) items whose tags equal every `where` pair, takes the one with the latest
///    `expires_at` first and items that never expire last, and claims it for `hold` in one round
///    trip (the seed matched tags and claimed in separate steps). The returned item carries
///    `in_use_until`, the claim's end.
/// 3. **pool_claim_exclusive** (`pool.claim_exclusive`) — concurrent claimers never win the same
///    item at once; a claim lapses after its hold and the item can be claimed again; `pool_release`
///    frees only the claim its token names.
/// 4. **pool_expiry** (`pool.expiry`) — expired items are invisible to `pool_list`, `pool_size` and
///    claims; `pool_size` counts live items only; `pool_put` costs no whole-pool scan;
///    `pool_remove` deletes the item and its claim.
#[async_trait]
pub trait Pools: Send + Sync {
    /// Upserts an item; with `ttl` it expires after it. Any previous claim on the id stays.
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()>;
    /// Live items, with `in_use_until` set on claimed ones. Order unspecified.
    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>>;
    /// Number of live (unexpired) items, claimed or not.
    async fn pool_size(&self, name: &str) -> Result<u64>;
    /// Deletes the item and its claim; `true` if the item existed.
    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool>;
    /// Frees the claim named by `token`; `false` if that claim is gone (lapsed or re-won).
    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool>;
    /// Claims one live, unclaimed item matching `where_` for `hold` (see guarantee
    /// `pool.claim_order`).
    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>>;
}

/// Fenced locks with a hold, released or extended only by their holder. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 5. **lock** (`lock.fenced`) — one holder at a time; `lock_acquire` waits up to `wait` and
///    returns `None` on timeout; release and extend act only with the holder's token; the lock
///    lapses after its hold; every grant's fence is greater than the previous one.
#[async_trait]
pub trait Locks: Send + Sync {
    /// Tries to take the lock for `hold`, retrying with backoff until `wait` runs out.
    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>>;
    /// Releases the lock if `token` still holds it.
    async fn lock_release(&self, name: &str, token: &str) -> Result<bool>;
    /// Sets the hold to `hold` from now if `token` still holds it.
    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool>;
}

/// Atomic integer counters. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 6. **counter** (`counter.atomic`) — `counter_incr` is atomic and returns the new value; a
///    missing counter reads 0.
#[async_trait]
pub trait Counters: Send + Sync {
    /// Adds `by` and returns the new value.
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64>;
    /// The value; 0 when missing.
    async fn counter_get(&self, name: &str) -> Result<i64>;
    /// Overwrites the value.
    async fn counter_set(&self, name: &str, value: i64) -> Result<()>;
    /// Deletes the counter; `true` if it existed.
    async fn counter_del(&self, name: &str) -> Result<bool>;
}

/// The priority job queue: tiers, reservations under receipts with a visibility timeout,
/// attempts, delayed retries and idempotent submits. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 7. **queue_priority_fifo** (`queue.priority_fifo`) — reserve serves high, then normal, then low;
///    FIFO inside a tier; `queue_size` and `queue_peek` cover the three tiers only.
/// 8. **queue_reserve_atomic** (`queue.reserve_atomic`) — a pushed task is delivered exactly once
///    per reservation; pop and registration are one atomic step; `timeout = 0` still takes a ready
///    task; concurrent reservers never receive the same delivery.
/// 9. **queue_receipts** (`queue.receipts`) — ack, nack, extend and fail act only for the current
///    receipt; after a timeout redelivery the first holder's late ack/nack/fail returns `false` and
///    changes nothing.
/// 10. **queue_attempts** (`queue.attempts`) — `Delivery::attempt` counts deliveries of the task:
///     nack, sweep and expiry keep the count, so a task whose worker dies reaches any maximum. Ack
///     and fail forget it.
/// 11. **queue_nack** (`queue.nack`) — nack requeues the caller's body into the delivery's original
///     tier, at the tier's end or after `delay`; only when the reservation still existed, and says
///     so. Delayed identical bodies stay distinct tasks.
/// 12. **queue_fail_atomic** (`queue.fail_atomic`) — `queue_fail` removes the reservation and
///     appends the body to the dead-letter queue in one step; the sweeper cannot resurrect it.
/// 13. **queue_sweep** (`queue.sweep`) — `queue_sweep_expired` returns each lapsed reservation to
///     its tier once, even with concurrent sweepers and acks; `queue_extend` pushes the deadline
///     out.
/// 14. **queue_bad_bodies** (`queue.bad_bodies`) — any bytes (non-JSON, no id, identical copies)
///     are delivered with a receipt like any task and can be acked or dead-lettered once; identical
///     bodies never collapse. Identical copies are bodies without an id: a body whose id a live or
///     dead-lettered task holds is refused (guarantee `task.unique_id`, ADR 0380).
/// 15. **queue_submit_once** (`queue.submit_once`) — `queue_submit_once` sets the idempotency key
///     and pushes in one step; a duplicate pushes nothing and returns the stored value.
/// 16. **queue_stats** (`queue.stats`) — `queue_stats` reads every count of [`QueueStats`] in one
///     consistent snapshot (one Redis script on keys of the queue's slot, one SQLite statement, one
///     lock): waiting per tier, in flight (lapsed-but-unswept reservations included, and also
///     counted in `overdue`), scheduled (due-but-unmoved retries included, and also counted in
///     `due`) and dead, so `total()` never sees a task twice or not at all while others move it. It
///     changes nothing; an unknown queue is all zeros (not paused, no rate limit).
/// 17. **queue_delayed** (`queue.delayed`) — `queue_submit` with [`RunAt::After`](super::RunAt) or
///     a future [`RunAt::At`](super::RunAt) schedules the task: it is counted in `scheduled` (and
///     in `due` once due), is not reservable before its time on the backend's clock, and once due
///     goes to the end of its tier at the next reserve, so a reserve already waiting past that time
///     gets it within one wake-up. `RunAt::Now`, a zero delay and a past instant enqueue at once,
///     as `queue_push` does. With an idempotency key the key is set and the task submitted (now or
///     scheduled) in one step, and a duplicate submits nothing (guarantee `queue.submit_once`).
///     Identical delayed bodies stay distinct tasks.
/// 18. **queue_promote_due** (`queue.promote_due`) — `queue_promote_due` moves every due scheduled
///     task (delayed submits and delayed nacks, in both Redis forms) to the end of its own tier, as
///     the next reserve would, and reserves nothing; it returns how many it moved. Each due
///     task moves exactly once even with concurrent promoters, reserves and acks (each move is
///     one atomic step: one script on the queue's Redis slot, one SQLite transaction, one
///     PostgreSQL statement, one lock); a moved task keeps its attempt count (guarantee
///     `queue.attempts`); a task not yet due stays scheduled. A paused queue moves nothing and
///     returns 0, as its reserve does (guarantee `queue.pause`): its due tasks stay scheduled until
///     the resume (ADR 0353). An unknown queue returns 0.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Appends `body` to the tier of `priority`.
    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()>;
    /// Sets the idempotency key and pushes, atomically; a duplicate pushes nothing.
    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome>;
    /// Submits one task: now or later, idempotent or not (see guarantee `queue.delayed`).
    /// `queue_push` is `Submit::new().priority(p)`, `queue_submit_once` the same with `.idem(key)`.
    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome>;
    /// Tasks waiting in the three tiers (not scheduled, not reserved).
    async fn queue_size(&self, name: &str) -> Result<u64>;
    /// Every count of the queue in one consistent snapshot (guarantee `queue.stats`); changes
    /// nothing.
    async fn queue_stats(&self, name: &str) -> Result<QueueStats>;
    /// Up to `n` waiting bodies in serve order.
    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// Moves due scheduled tasks back to their tiers, then takes the next task and registers its
    /// reservation for `visibility`, atomically. Waits up to `timeout` for one (tries at least
    /// once).
    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>>;
    /// Ends the delivery successfully; `false` if the receipt is no longer current.
    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool>;
    /// Ends the delivery and requeues `body` (the caller's updated copy) into the delivery's tier,
    /// now or after `delay`; `false` and nothing requeued if the receipt is no longer current.
    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool>;
    /// Sets the reservation's deadline to now + `visibility`; `false` if no longer current.
    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool>;
    /// Ends the delivery and appends `body` to the dead-letter queue in one step; `false` and
    /// nothing written if the receipt is no longer current.
    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool>;
    /// Returns every lapsed reservation to its tier; how many were returned.
    async fn queue_sweep_expired(&self, name: &str) -> Result<u64>;
    /// Moves every due scheduled task (both Redis forms) to the end of its own tier, as the next
    /// reserve would, without reserving anything; how many moved (guarantee `queue.promote_due`).
    /// Nothing on a paused queue. For a maintainer that keeps delayed tasks flowing to consumers
    /// that do not move them themselves (a queue served only by fleet-framework workers on Redis).
    async fn queue_promote_due(&self, name: &str) -> Result<u64>;
    /// Appends `body` to the dead-letter queue (no reservation involved).
    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()>;
}

/// A queue's dead letters: read, pop, clear and replay. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 24. **dlq** (`dlq.fifo_atomic`) — FIFO; `dlq_peek`/`dlq_pop` with `n = 0` return nothing (the
///     seed's Redis `dlq_peek(0)` returned one item where its other backends returned none); pop
///     and clear are atomic (the seed's were several commands, so a crash between them lost tasks);
///     `dlq_requeue` moves bodies back to a tier atomically with a fresh attempt count.
/// 25. **dlq_requeue_chosen** (`dlq.requeue_chosen`) — `dlq_requeue_chosen` moves, for each body
///     given, the oldest dead letter with exactly those bytes (one per entry given, so a body given
///     twice moves two copies) to the end of `priority`'s tier with a fresh attempt count, all in
///     one step, and answers each entry: `false` when no such dead letter was left. Dead letters
///     not chosen keep their order. This is how an operator replays the letters they picked from a
///     peek: identical bodies are interchangeable, so bytes name a letter without positions that
///     shift.
#[async_trait]
pub trait DeadLetters: Send + Sync {
    /// Up to `n` dead bodies, oldest first.
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// Removes and returns up to `n` dead bodies, oldest first, atomically.
    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// Number of dead bodies.
    async fn dlq_length(&self, name: &str) -> Result<u64>;
    /// Deletes every dead body; how many there were.
    async fn dlq_clear(&self, name: &str) -> Result<u64>;
    /// Moves up to `n` dead bodies, oldest first, unchanged to the end of `priority`'s tier, in one
    /// step, with their attempt count reset. How many moved.
    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64>;
    /// Moves the chosen dead letters, matched by their bytes, back to `priority`'s tier in one
    /// step; one answer per body given (see guarantee `dlq.requeue_chosen`). More than
    /// [`MAX_BATCH`](super::MAX_BATCH) bodies is
    /// [`Error::InvalidInput`](crate::Error::InvalidInput).
    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>>;
}

/// Sorted streams: envelopes ordered by score, trimmed by age and length. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 27. **stream** (`streams.sorted`) — ordered by score, lowest first; push drops entries older
///     than `score − ttl` and the lowest beyond `max_len`; an identical envelope is stored once
///     (moved to the new score, as the seed's Redis sorted set does); `n = 0` reads nothing (the
///     seed's Redis `stream_peek(0)` read everything); push publishes the score on topic
///     `{name}.emit`.
#[async_trait]
pub trait Streams: Send + Sync {
    /// Inserts `envelope` at `score`, trims by `ttl` (relative to `score`) and `max_len` (0 = no
    /// cap), and publishes the score on topic `{name}.emit`.
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()>;
    /// Removes and returns the `n` lowest-scored envelopes.
    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// The `n` lowest-scored envelopes.
    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// Number of envelopes.
    async fn stream_length(&self, name: &str) -> Result<u64>;
    /// Drops envelopes scored before now − `ttl` (store clock) and the lowest beyond `max_len`.
    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()>;
}

/// Pub/sub topics: at-most-once, live messages. Part of [`FleetBackend`].
///
/// # Guarantees
///
/// 28. **events** (`events.pubsub`) — a subscriber receives every message published to its topic
///     after it subscribed, in order, and nothing of other topics.
#[async_trait]
pub trait Events: Send + Sync {
    /// Publishes `body` to everyone subscribed to `topic` now. At most once; nothing is stored.
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()>;
    /// Subscribes to `topic`; the subscription is active when this returns.
    async fn event_subscribe(&self, topic: &str) -> Result<EventStream>;
}

/// The worker registry: hardware, generation-numbered config, state, stats and history. Part of
/// [`FleetBackend`].
///
/// # Guarantees
///
/// 29. **worker_registry** (`worker.registry`) — register creates config `{}` at generation 0 or
///     keeps what exists; every config write bumps the generation by one, compare-and-set when
///     `expected_gen` is given, so concurrent patches never lose each other's keys; config and
///     generation are read together, never a torn pair; calls on an unregistered worker write
///     nothing; remove deletes everything (stats history included) but the generation, so a
///     re-registered worker gets a generation above any it saw.
/// 30. **worker_stats** (`worker.stats`) — the stats history keeps the newest `max_entries` frames
///     and returns `ts ≥ since` oldest first, up to `limit`.
#[async_trait]
pub trait Workers: Send + Sync {
    /// Registers the worker (or updates its hardware), seeding config `{}` if it has none.
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()>;
    /// `(config, generation)` read together; `({}, 0)` for an unknown worker.
    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)>;
    /// Replaces the config and bumps the generation, if registered and `expected_gen` matches.
    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite>;
    /// Overwrites the state report; `false` (nothing written) if the worker is not registered.
    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool>;
    /// Overwrites the stats document; `false` if not registered.
    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool>;
    /// Appends a stats frame at `ts`, keeping the newest `max_entries`; `false` if not registered.
    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool>;
    /// Frames with `ts ≥ since`, oldest first, at most `limit`.
    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>>;
    /// The record of a registered worker.
    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>>;
    /// `(automation_type, worker_id)` of registered workers, sorted; all types when `None`.
    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>>;
    /// Unregisters the worker and deletes its data except the generation; `true` if it existed.
    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool>;
}

/// One document per automation type, and the names of the queues that hold tasks. Part of
/// [`FleetBackend`].
///
/// # Guarantees
///
/// 31. **catalog** (`catalog.documents`) — one document per automation type; `catalog_all` returns
///     them all.
/// 32. **queue_names** (`queue.names`) — `queue_names` lists every queue holding at least one task
///     in any state (waiting in a tier, in flight, scheduled, dead), sorted, once each, spelt as
///     given (hostile names included). A queue whose last task is gone is no longer listed: queues
///     are implicit, and nothing is kept for an empty one. Meant for operators (it may scan the
///     backend), not for hot paths.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// Stores the document of an automation type.
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()>;
    /// The document, if any.
    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>>;
    /// Every document by automation type.
    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>>;
    /// The queues that hold at least one task, sorted (see guarantee `queue.names`).
    async fn queue_names(&self) -> Result<Vec<String>>;
}
