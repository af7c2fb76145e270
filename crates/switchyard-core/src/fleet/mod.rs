//! The fleet backend: coordination primitives for worker fleets.
//!
//! [`FleetBackend`] is the port; [`MemoryFleetBackend`] its reference adapter. The Redis and SQLite
//! adapters live in `switchyard-fleet-redis` and `switchyard-fleet-sqlite`, and the typed layer
//! users call (`Queue<T>`, `Consumer`, `Lock`, …) in `switchyard-fleet`, built on this trait only.
//!
//! Values are opaque bytes, as in the seed (fleet-framework 0.1.0). Every instant is unix seconds
//! (`f64`) read from the **store's** clock (Redis `TIME`, SQLite's clock, the memory adapter's
//! [`Clock`](crate::Clock)), never the caller's.

mod memory;
mod topics;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

use crate::{Error, Result};

pub use memory::MemoryFleetBackend;
pub use topics::LocalTopics;

/// Tags of a pool item: a JSON object, matched by equality of every `where` pair.
pub type Tags = Map<String, Value>;

/// Live messages of one pub/sub topic, from the moment of subscription on. Dropping it unsubscribes.
pub type EventStream = BoxStream<'static, Vec<u8>>;

/// The three queue tiers. Reserve serves `High`, then `Normal`, then `Low`; FIFO inside a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    /// `priority > 0` in the seed; key `fleet:queue:{name}:high`.
    High,
    /// `priority == 0`; key `fleet:queue:{name}`.
    #[default]
    Normal,
    /// `priority < 0`; key `fleet:queue:{name}:low`.
    Low,
}

impl Priority {
    /// The seed's integer priority: positive is high, negative is low, zero is normal.
    pub fn from_int(priority: i64) -> Self {
        match priority {
            p if p > 0 => Priority::High,
            p if p < 0 => Priority::Low,
            _ => Priority::Normal,
        }
    }

    /// One-letter code used in stored records (`h`, `n`, `l`).
    pub fn code(self) -> &'static str {
        match self {
            Priority::High => "h",
            Priority::Normal => "n",
            Priority::Low => "l",
        }
    }

    /// Inverse of [`Priority::code`].
    pub fn from_code(code: &str) -> Option<Self> {
        match code {
            "h" => Some(Priority::High),
            "n" => Some(Priority::Normal),
            "l" => Some(Priority::Low),
            _ => None,
        }
    }

    /// Tiers in the order reserve serves them.
    pub const ORDER: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];
}

/// Proof of one delivery. Ack, nack, extend and fail act only with the receipt of the current
/// delivery, so a late call from a worker whose visibility timed out cannot touch the next
/// holder's delivery (fleet flaw Q5).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Receipt(String);

impl Receipt {
    /// Wraps a receipt string (adapters mint them; callers only pass them back).
    pub fn new(receipt: impl Into<String>) -> Self {
        Receipt(receipt.into())
    }

    /// The receipt as stored by the backend.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Receipt({})", self.0)
    }
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One task handed out by [`FleetBackend::queue_reserve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Pass it back to ack, nack, extend or fail this delivery.
    pub receipt: Receipt,
    /// The body exactly as pushed (or as last nacked).
    pub body: Vec<u8>,
    /// The envelope's `"id"` when the body is a JSON object with a non-empty string or integer id.
    pub task_id: Option<String>,
    /// How many times this task has been delivered, this delivery included (1 on the first).
    /// Counted by the backend at delivery, so crashes and timeouts count too (fleet flaw Q8).
    pub attempt: u32,
    /// The tier it came from; nack and sweep put it back there (fleet flaw Q7).
    pub priority: Priority,
    /// Unix seconds (store clock) when the reservation lapses unless extended.
    pub visible_until: f64,
}

/// Idempotency record for [`FleetBackend::queue_submit_once`]: the KV entry `(ns, key)` is set to
/// `value` for `ttl` in the same atomic step as the push.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyKey<'a> {
    /// KV namespace, e.g. `idem:{automation_type}`.
    pub ns: &'a str,
    /// The caller's idempotency key.
    pub key: &'a str,
    /// What a duplicate submit gets back (the seed stores the task id).
    pub value: &'a [u8],
    /// How long the key is remembered; `None` means forever.
    pub ttl: Option<Duration>,
}

/// Result of [`FleetBackend::queue_submit_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// The key was new: it was set and the body pushed.
    Enqueued,
    /// The key existed: nothing was pushed; this is the stored value.
    Duplicate(Vec<u8>),
}

/// The counts of one queue, read in one consistent snapshot by [`FleetBackend::queue_stats`].
///
/// Every task the queue holds is counted exactly once in `high + normal + low + in_flight +
/// scheduled + dead` ([`QueueStats::total`]). `overdue` and `due` are parts of `in_flight` and
/// `scheduled`: the work the next sweep or reserve will do, not extra tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub struct QueueStats {
    /// Waiting in the high tier.
    pub high: u64,
    /// Waiting in the normal tier.
    pub normal: u64,
    /// Waiting in the low tier.
    pub low: u64,
    /// Reserved and not yet acked, nacked or failed, lapsed reservations included until a sweep
    /// returns them to their tier.
    pub in_flight: u64,
    /// Of `in_flight`: reservations whose visibility has lapsed (the next
    /// [`FleetBackend::queue_sweep_expired`] requeues them).
    pub overdue: u64,
    /// Delayed nacks not yet back in their tier, due ones included until a reserve moves them.
    pub scheduled: u64,
    /// Of `scheduled`: those whose delay has passed (the next reserve moves them to their tier).
    pub due: u64,
    /// Length of the dead-letter queue.
    pub dead: u64,
}

impl QueueStats {
    /// Tasks waiting in the three tiers (what [`FleetBackend::queue_size`] counts).
    pub fn waiting(&self) -> u64 {
        self.high + self.normal + self.low
    }

    /// Tasks waiting in the tier of `priority`.
    pub fn waiting_in(&self, priority: Priority) -> u64 {
        match priority {
            Priority::High => self.high,
            Priority::Normal => self.normal,
            Priority::Low => self.low,
        }
    }

    /// Every task the queue holds: waiting, in flight, scheduled and dead.
    pub fn total(&self) -> u64 {
        self.waiting() + self.in_flight + self.scheduled + self.dead
    }
}

/// An item of a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolItem {
    /// Item id, unique in its pool.
    pub id: String,
    /// Opaque payload.
    pub payload: Vec<u8>,
    /// Tags matched by [`FleetBackend::pool_claim_any`].
    pub tags: Tags,
    /// Unix seconds when the item expires; `None` for never.
    pub expires_at: Option<f64>,
    /// Unix seconds when the live claim on it lapses; `None` when unclaimed.
    pub in_use_until: Option<f64>,
}

/// A claim won by [`FleetBackend::pool_claim_any`].
#[derive(Debug, Clone, PartialEq)]
pub struct PoolClaim {
    /// The claimed item, with `in_use_until` set to the claim's end (fleet flaw P5).
    pub item: PoolItem,
    /// Releases this claim only (a lapsed claim re-won by someone else is not freed).
    pub token: String,
}

/// A held lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGrant {
    /// Random 32-hex token; release and extend need it.
    pub token: String,
    /// Fencing number: strictly greater than every earlier grant of this lock (fleet flaw R4).
    pub fence: u64,
}

/// Everything the registry knows of one worker.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// As given at registration.
    pub hardware: Value,
    /// The desired config.
    pub config: Value,
    /// Its generation; bumped by every config write, never reset (fleet flaw W3).
    pub config_gen: u64,
    /// `"IDLE"` until a state is reported.
    pub state: String,
    /// Unix seconds of the last state report; 0 before any.
    pub last_seen: f64,
    /// The last reported error, if any.
    pub last_error: Option<String>,
    /// The config generation the worker says it has applied (the seed discarded it).
    pub applied_gen: Option<u64>,
    /// Last stats document; `{}` before any.
    pub stats: Value,
}

/// A state report for [`FleetBackend::worker_set_state`].
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerState<'a> {
    /// e.g. `"RUNNING"`.
    pub state: &'a str,
    /// The last error, or `None` to clear it.
    pub last_error: Option<&'a str>,
    /// Unix seconds the worker was last seen.
    pub last_seen: f64,
    /// Config generation the worker has applied, if it reports one.
    pub applied_gen: Option<u64>,
}

/// Result of [`FleetBackend::worker_set_config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWrite {
    /// Written; this is the new generation.
    Applied {
        /// The generation of the config just written.
        generation: u64,
    },
    /// `expected_gen` did not match; nothing was written.
    GenMismatch {
        /// The generation currently stored.
        current: u64,
    },
    /// The worker is not registered; nothing was written (fleet flaw W7).
    NotRegistered,
}

/// The fleet backend port.
///
/// # Guarantees
///
/// Every adapter upholds these; `switchyard_conformance::fleet_backend_suite!` has one case per
/// guarantee, named after it.
///
/// 1. **kv** — `kv_set` upserts; with a TTL the value disappears after it, without one any old TTL
///    is cleared. `kv_set_nx` writes only when the key is absent or expired and says whether it
///    wrote. `kv_get` of a missing or expired key is `None`; `kv_del` says whether it deleted.
/// 2. **pool_claim_order** — `pool_claim_any` considers only live (unexpired, unclaimed) items whose
///    tags equal every `where` pair, takes the one with the latest `expires_at` first and items that
///    never expire last, and claims it for `hold` in one round trip (flaws P2, P6). The returned
///    item carries `in_use_until` (P5).
/// 3. **pool_claim_exclusive** — concurrent claimers never win the same item at once; a claim
///    lapses after its hold and the item can be claimed again; `pool_release` frees only the claim
///    its token names.
/// 4. **pool_expiry** — expired items are invisible to `pool_list`, `pool_size` and claims;
///    `pool_size` counts live items only; `pool_put` costs no whole-pool scan (P1, P3);
///    `pool_remove` deletes the item and its claim.
/// 5. **lock** — one holder at a time; `lock_acquire` waits up to `wait` and returns `None` on
///    timeout; release and extend act only with the holder's token; the lock lapses after its
///    hold; every grant's fence is greater than the previous one.
/// 6. **counter** — `counter_incr` is atomic and returns the new value; a missing counter reads 0.
/// 7. **queue_priority_fifo** — reserve serves high, then normal, then low; FIFO inside a tier;
///    `queue_size` and `queue_peek` cover the three tiers only.
/// 8. **queue_reserve_atomic** — a pushed task is delivered exactly once per reservation; pop and
///    registration are one atomic step (Q1); `timeout = 0` still takes a ready task (Q2);
///    concurrent reservers never receive the same delivery.
/// 9. **queue_receipts** — ack, nack, extend and fail act only for the current receipt; after a
///    timeout redelivery the first holder's late ack/nack/fail returns `false` and changes nothing
///    (Q5).
/// 10. **queue_attempts** — `Delivery::attempt` counts deliveries of the task: nack, sweep and
///     expiry keep the count, so a task whose worker dies reaches any maximum (Q8). Ack and fail
///     forget it.
/// 11. **queue_nack** — nack requeues the caller's body into the delivery's original tier (Q7),
///     at the tier's end or after `delay`; only when the reservation still existed, and says so
///     (Q13). Delayed identical bodies stay distinct tasks (Q12).
/// 12. **queue_fail_atomic** — `queue_fail` removes the reservation and appends the body to the
///     dead-letter queue in one step (Q11); the sweeper cannot resurrect it.
/// 13. **queue_sweep** — `queue_sweep_expired` returns each lapsed reservation to its tier once,
///     even with concurrent sweepers and acks (Q4); `queue_extend` pushes the deadline out.
/// 14. **queue_bad_bodies** — any bytes (non-JSON, no id, identical copies) are delivered with a
///     receipt like any task and can be acked or dead-lettered once; identical bodies never
///     collapse (Q10, Q12).
/// 15. **queue_submit_once** — `queue_submit_once` sets the idempotency key and pushes in one step
///     (Q14); a duplicate pushes nothing and returns the stored value.
/// 16. **dlq** — FIFO; `dlq_peek`/`dlq_pop` with `n = 0` return nothing (T2); pop and clear are
///     atomic (T4); `dlq_requeue` moves bodies back to a tier atomically with a fresh attempt count.
/// 17. **stream** — ordered by score, lowest first; push drops entries older than `score − ttl`
///     and the lowest beyond `max_len`; an identical envelope is stored once (moved to the new
///     score; T3, the seed's Redis behaviour); `n = 0` reads nothing (T2); push publishes the score
///     on topic `{name}.emit`.
/// 18. **events** — a subscriber receives every message published to its topic after it
///     subscribed, in order, and nothing of other topics.
/// 19. **worker_registry** — register creates config `{}` at generation 0 or keeps what exists;
///     every config write bumps the generation by one, compare-and-set when `expected_gen` is
///     given (W4); config and generation are read together (W1); calls on an unregistered worker
///     write nothing (W7); remove deletes everything but the generation, so a re-registered worker
///     gets a generation above any it saw (W3, W5).
/// 20. **worker_stats** — the stats history keeps the newest `max_entries` frames and returns
///     `ts ≥ since` oldest first, up to `limit`.
/// 21. **catalog** — one document per automation type; `catalog_all` returns them all.
/// 22. **hostile_names** — names, ids and keys may contain `:`, `|`, `{`, `}`, `%`, spaces,
///     unicode; distinct names never share state. Empty names and zero holds/visibilities are
///     [`Error::InvalidInput`].
/// 23. **queue_stats** — `queue_stats` reads every count of [`QueueStats`] in one consistent
///     snapshot (one Redis script on keys of the queue's slot, one SQLite statement, one lock):
///     waiting per tier, in flight (lapsed-but-unswept reservations included, and also counted
///     in `overdue`), scheduled (due-but-unmoved retries included, and also counted in `due`)
///     and dead, so `total()` never sees a task twice or not at all while others move it. It
///     changes nothing; an unknown queue is all zeros.
#[async_trait]
pub trait FleetBackend: Send + Sync + fmt::Debug {
    // ---- KV ----

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

    // ---- Pool ----

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
    /// Claims one live, unclaimed item matching `where_` for `hold` (see guarantee 2).
    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>>;

    // ---- Locks ----

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

    // ---- Counters ----

    /// Adds `by` and returns the new value.
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64>;
    /// The value; 0 when missing.
    async fn counter_get(&self, name: &str) -> Result<i64>;
    /// Overwrites the value.
    async fn counter_set(&self, name: &str, value: i64) -> Result<()>;
    /// Deletes the counter; `true` if it existed.
    async fn counter_del(&self, name: &str) -> Result<bool>;

    // ---- Job queue ----

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
    /// Tasks waiting in the three tiers (not scheduled, not reserved).
    async fn queue_size(&self, name: &str) -> Result<u64>;
    /// Every count of the queue in one consistent snapshot (guarantee 23); changes nothing.
    async fn queue_stats(&self, name: &str) -> Result<QueueStats>;
    /// Up to `n` waiting bodies in serve order.
    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
    /// Moves due scheduled tasks back to their tiers, then takes the next task and registers its
    /// reservation for `visibility`, atomically. Waits up to `timeout` for one (tries at least once).
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
    /// Appends `body` to the dead-letter queue (no reservation involved).
    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()>;

    // ---- Dead-letter queue ----

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

    // ---- Sorted streams ----

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

    // ---- Pub/sub ----

    /// Publishes `body` to everyone subscribed to `topic` now. At most once; nothing is stored.
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()>;
    /// Subscribes to `topic`; the subscription is active when this returns.
    async fn event_subscribe(&self, topic: &str) -> Result<EventStream>;

    // ---- Worker registry ----

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

    // ---- Catalog ----

    /// Stores the document of an automation type.
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()>;
    /// The document, if any.
    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>>;
    /// Every document by automation type.
    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>>;
}

/// Rejects an empty name (queue, pool, lock, …); shared by adapters.
pub fn check_name(field: &'static str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    Ok(())
}

/// Rejects a zero hold, visibility or lock time and rounds sub-millisecond parts up: adapters
/// work in whole milliseconds (fleet flaw P4: zero meant three different things in the seed).
pub fn check_hold(field: &'static str, hold: Duration) -> Result<u64> {
    let ms = hold.as_nanos().div_ceil(1_000_000);
    if ms == 0 {
        return Err(Error::invalid(field, "must be at least 1 ms"));
    }
    u64::try_from(ms).map_err(|_| Error::invalid(field, "is too long"))
}

/// A TTL in whole milliseconds (rounded up); `None` or zero means "never expires".
pub fn ttl_ms(ttl: Option<Duration>) -> Option<u64> {
    ttl.map(|t| t.as_nanos().div_ceil(1_000_000))
        .filter(|ms| *ms > 0)
        .map(|ms| u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The task id of a body: the `"id"` of a JSON object when it is a non-empty string or an integer.
pub fn task_id_of(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    match value.get("id")? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// Python's `repr(float)` for the finite values a score takes (`5.0`, `1795999426.797343`): the
/// shortest round-trip form, as the seed publishes on `{name}.emit`.
pub fn py_float(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x:?}")
    }
}

/// A fresh random 32-hex token (lock tokens, receipts, claim tokens).
pub fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}
