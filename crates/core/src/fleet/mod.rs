//! The fleet backend: coordination primitives for worker fleets.
//!
//! [`FleetBackend`] is the port; [`MemoryFleetBackend`] its reference adapter. The Redis and SQLite
//! adapters live in `switchyard-fleet-redis` and `switchyard-fleet-sqlite`, and the typed layer
//! users call (`Queue<T>`, `Consumer`, `Lock`, …) in `switchyard-fleet`, built on this trait only.
//!
//! Values are opaque bytes, as in the seed (fleet-framework 0.1.0). Every instant is unix seconds
//! (`f64`) read from the **store's** clock (Redis `TIME`, SQLite's clock, the memory adapter's
//! [`Clock`](crate::Clock)), never the caller's.

pub mod adapter;
mod flow;
mod memory;
mod port;
mod task_head;
mod tasks;
mod topics;

use std::fmt;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::{Map, Value};

use crate::{Error, Result};

pub use flow::{
    InFlight, MAX_BATCH, MAX_PROGRESS_BYTES, QueueBatches, QueueFlow, RateLimit, RunAt, Schedules,
    Submit, check_batch, check_progress, delay_ms,
};
pub use memory::MemoryFleetBackend;
pub use port::{
    Catalog, Counters, DeadLetters, Events, FleetBackend, JobQueue, Kv, Locks, Pools, Streams,
    Workers,
};
pub use task_head::{MAX_LAST_ERROR_BYTES, TaskHead, cut_to_bytes, task_head, task_id};
pub use tasks::{
    CancelOutcome, DEFAULT_MAX_RESULT_BYTES, Keep, MAX_EVENT_ERROR_BYTES, MAX_INLINE_RESULT_BYTES,
    MAX_TASK_BATCH, MAX_TASK_ID_BYTES, Retention, TaskEvent, TaskEvents, TaskInfo, TaskState,
    Tasks, check_task_id,
};
pub use topics::LocalTopics;

/// The port and its area traits, for callers that hold a concrete adapter type:
/// `use switchyard_core::fleet::prelude::*;` brings every fleet method into scope.
pub mod prelude {
    pub use super::flow::{QueueBatches, QueueFlow, Schedules};
    pub use super::port::{
        Catalog, Counters, DeadLetters, Events, FleetBackend, JobQueue, Kv, Locks, Pools, Streams,
        Workers,
    };
}

/// Tags of a pool item: a JSON object, matched by equality of every `where` pair.
pub type Tags = Map<String, Value>;

/// Live messages of one pub/sub topic, from the moment of subscription on. Dropping it
/// unsubscribes.
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
/// holder's delivery.
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

/// One task handed out by [`JobQueue::queue_reserve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Pass it back to ack, nack, extend or fail this delivery.
    pub receipt: Receipt,
    /// The body exactly as pushed (or as last nacked).
    pub body: Vec<u8>,
    /// The envelope's `"id"` when the body is a JSON object with a non-empty string or integer id.
    pub task_id: Option<String>,
    /// How many times this task has been delivered, this delivery included (1 on the first).
    /// Counted by the backend at delivery, so crashes and timeouts count too.
    pub attempt: u32,
    /// The tier it came from; nack and sweep put it back there.
    pub priority: Priority,
    /// Unix seconds (store clock) when the reservation lapses unless extended.
    pub visible_until: f64,
}

/// Idempotency record for [`JobQueue::queue_submit_once`]: the KV entry `(ns, key)` is set to
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

/// Result of [`JobQueue::queue_submit_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// The key was new: it was set and the body pushed.
    Enqueued,
    /// The key existed: nothing was pushed; this is the stored value.
    Duplicate(Vec<u8>),
}

/// The counts of one queue, read in one consistent snapshot by [`JobQueue::queue_stats`].
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
    /// [`JobQueue::queue_sweep_expired`] requeues them).
    pub overdue: u64,
    /// Delayed submits, nacks and releases not yet in their tier, due ones included until a
    /// reserve moves them.
    pub scheduled: u64,
    /// Of `scheduled`: those whose delay has passed (the next reserve moves them to their tier).
    pub due: u64,
    /// Length of the dead-letter queue.
    pub dead: u64,
    /// Reservations are paused (guarantee `queue.pause`).
    pub paused: bool,
    /// The queue's rate limit, if one is set (guarantee `queue.rate_limit`).
    #[serde(serialize_with = "serialize_rate_limit")]
    pub rate_limit: Option<RateLimit>,
    /// Milliseconds until the rate limit's next token; 0 when one is available or there is no
    /// limit (guarantee `queue.rate_limit`).
    pub throttled_ms: u64,
    /// Recorded tasks that ended `completed` (guarantee `task.end_counts`); not part of
    /// [`total`](QueueStats::total), like the three below.
    pub completed: u64,
    /// Recorded tasks that ended `failed`.
    pub failed: u64,
    /// Recorded tasks dead-lettered.
    pub dead_lettered: u64,
    /// Recorded tasks that ended `cancelled`.
    pub cancelled: u64,
}

fn serialize_rate_limit<S: serde::Serializer>(
    limit: &Option<RateLimit>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::Serialize;
    #[derive(Serialize)]
    struct Wire {
        max: u32,
        per_ms: u64,
    }
    limit
        .map(|l| Wire {
            max: l.max,
            per_ms: l.per_ms(),
        })
        .serialize(s)
}

impl QueueStats {
    /// Tasks waiting in the three tiers (what [`JobQueue::queue_size`] counts).
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
    /// Tags matched by [`Pools::pool_claim_any`].
    pub tags: Tags,
    /// Unix seconds when the item expires; `None` for never.
    pub expires_at: Option<f64>,
    /// Unix seconds when the live claim on it lapses; `None` when unclaimed.
    pub in_use_until: Option<f64>,
}

/// A claim won by [`Pools::pool_claim_any`].
#[derive(Debug, Clone, PartialEq)]
pub struct PoolClaim {
    /// The claimed item, with `in_use_until` set to the claim's end.
    pub item: PoolItem,
    /// Releases this claim only (a lapsed claim re-won by someone else is not freed).
    pub token: String,
}

/// A held lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGrant {
    /// Random 32-hex token; release and extend need it.
    pub token: String,
    /// Fencing number: strictly greater than every earlier grant of this lock.
    pub fence: u64,
}

/// Everything the registry knows of one worker.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// As given at registration.
    pub hardware: Value,
    /// The desired config.
    pub config: Value,
    /// Its generation; bumped by every config write, never reset.
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

/// A state report for [`Workers::worker_set_state`].
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

/// Result of [`Workers::worker_set_config`].
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
    /// The worker is not registered; nothing was written.
    NotRegistered,
}

/// Rejects an empty name (queue, pool, lock, …); shared by adapters.
pub fn check_name(field: &'static str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    Ok(())
}

/// Rejects NaN and infinities (scores, timestamps): no backend can order or store them alike.
pub fn check_finite(field: &'static str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(field, "must be finite"))
    }
}

/// Rejects a worker config that is not a JSON object (configs are merged key by key).
pub fn check_object(field: &'static str, value: &serde_json::Value) -> Result<()> {
    if value.is_object() {
        Ok(())
    } else {
        Err(Error::invalid(field, "must be a JSON object"))
    }
}

/// Rejects a zero hold, visibility or lock time and rounds sub-millisecond parts up: adapters
/// work in whole milliseconds (in the seed, zero meant three different things).
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

/// A fresh random 32-hex token (lock tokens, receipts, claim tokens).
pub fn random_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}
