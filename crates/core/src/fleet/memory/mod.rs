//! The in-process reference adapter of [`FleetBackend`](super::FleetBackend).

// One room per area of the port (ADR 0161); shared plumbing stays here.
mod batches;
mod catalog;
mod counters;
mod dead_letters;
mod events;
mod flow;
mod kv;
mod locks;
mod pools;
mod queue;
mod schedules;
mod streams;
mod tasks;
mod workers;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::Notify;

use super::LocalTopics;
use super::adapter::{
    Attempt, CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps,
    QueueBatchOps, QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
use super::{
    ConfigWrite, Delivery, EventStream, InFlight, LockGrant, PoolClaim, PoolItem, Priority,
    QueueStats, RateLimit, Receipt, Submit, SubmitOutcome, Tags, TaskHead, TaskState, WorkerRecord,
    WorkerState, delay_ms, random_token, task_id_of, ttl_ms,
};
use crate::{Clock, Error, Result, SystemClock};

/// [`FleetBackend`](super::FleetBackend) in process memory: state lives as long as the value (shared by clones).
///
/// Expiry is judged lazily against the injected [`Clock`]; blocking reserve waits on a
/// notification rather than polling only.
#[derive(Debug, Clone)]
pub struct MemoryFleetBackend {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    pushed: Arc<Notify>,
    /// Raised when a queue ends a recorded task (readers of the end-event log wait on it).
    ended: Arc<Notify>,
    topics: LocalTopics,
}

#[derive(Debug, Default)]
struct State {
    kv: HashMap<(String, String), (Vec<u8>, Option<f64>)>,
    pools: HashMap<String, Pool>,
    locks: HashMap<String, (String, f64)>,
    fences: HashMap<String, u64>,
    counters: HashMap<String, i64>,
    queues: HashMap<String, Queue>,
    streams: HashMap<String, Vec<(f64, Vec<u8>)>>,
    workers: BTreeMap<(String, String), Worker>,
    /// Generations outlive workers, so a re-registered worker never goes back.
    gens: HashMap<(String, String), u64>,
    catalog: BTreeMap<String, Vec<u8>>,
    schedules: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, Default)]
struct Pool {
    items: HashMap<String, Item>,
    claims: HashMap<String, (String, f64)>,
}

#[derive(Debug, Clone)]
struct Item {
    payload: Vec<u8>,
    tags: Tags,
    expires_at: Option<f64>,
}

#[derive(Debug, Clone)]
struct Entry {
    body: Vec<u8>,
    /// Deliveries so far; travels with the task through nack, sweep and schedule.
    attempts: u32,
    priority: Priority,
    /// The id of the task's record, when it has one (ADR 0380).
    id: Option<String>,
}

impl Entry {
    fn new(body: Vec<u8>, priority: Priority, id: Option<String>) -> Self {
        Entry {
            body,
            attempts: 0,
            priority,
            id,
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    tiers: [VecDeque<Entry>; 3],
    /// Reservations by receipt. Removing one ends the delivery, and its progress with it.
    processing: HashMap<String, Held>,
    scheduled: Vec<(f64, u64, Entry)>,
    next_seq: u64,
    dead: VecDeque<Vec<u8>>,
    /// Reservations are paused; kept with the queue, so it outlives the queue's tasks.
    paused: bool,
    bucket: Option<Bucket>,
    /// Task records, their retention and the end-event log (ADR 0380).
    tasks: tasks::Records,
}

/// One reservation: the task as delivered, its deadline and the last progress its holder reported.
#[derive(Debug, Clone)]
struct Held {
    entry: Entry,
    deadline: f64,
    progress: Option<Vec<u8>>,
}

/// The rate limit's token bucket (ADR 0281): the tokens left when last looked at, and when that
/// was. Refilled lazily on each look, so nothing runs between reserves.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: f64,
}

impl Bucket {
    fn full(limit: RateLimit, now: f64) -> Self {
        Bucket {
            limit,
            tokens: f64::from(limit.max),
            at: now,
        }
    }

    /// Tokens per second.
    fn rate(&self) -> f64 {
        f64::from(self.limit.max) / self.limit.per.as_secs_f64()
    }

    /// The bucket as of `now`: refilled at `rate` up to `max`. A clock that went back refills
    /// nothing.
    fn at(self, now: f64) -> Self {
        let elapsed = (now - self.at).max(0.0);
        Bucket {
            tokens: (self.tokens + elapsed * self.rate()).min(f64::from(self.limit.max)),
            at: now.max(self.at),
            ..self
        }
    }

    /// Whole tokens available.
    fn whole(&self) -> usize {
        // `tokens` is within 0..=max (a u32), so the cast neither wraps nor saturates.
        self.tokens.floor().max(0.0) as usize
    }

    /// Seconds until the next whole token; 0 when one is available.
    fn wait(&self) -> f64 {
        if self.tokens >= 1.0 {
            0.0
        } else {
            (1.0 - self.tokens) / self.rate()
        }
    }
}

/// Why a reserve found nothing: how long until the earliest event that could change that (a
/// delayed task falling due, a token), if the backend knows of one.
type Wait = Option<f64>;

#[derive(Debug)]
struct Worker {
    hardware: Value,
    config: Value,
    state: Option<(String, Option<String>, f64, Option<u64>)>,
    stats: Value,
    history: Vec<(f64, String)>,
}

fn tier(p: Priority) -> usize {
    match p {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl Default for MemoryFleetBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryFleetBackend {
    /// An empty backend on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty backend reading time from `clock` (tests pass a `ManualClock`).
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryFleetBackend {
            shared: Arc::new(Shared {
                clock,
                state: Mutex::new(State::default()),
                pushed: Arc::new(Notify::new()),
                ended: Arc::new(Notify::new()),
                topics: LocalTopics::default(),
            }),
        }
    }

    fn now(&self) -> f64 {
        self.shared.clock.now().timestamp_micros() as f64 / 1e6
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied operation: each operation
        // mutates in one place, so a poisoned state is still consistent.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, topic: &str, body: Vec<u8>) {
        self.shared.topics.publish(topic, body);
    }

    /// Reserves up to `max` ready tasks in serve order, in one step under the lock; when it
    /// takes none, says how long until one might be ready.
    fn try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
    ) -> std::result::Result<Vec<Delivery>, Wait> {
        let now = self.now();
        let mut st = self.state();
        let q = st.queues.entry(name.to_string()).or_default();
        if q.paused {
            // Only a resume ends a pause, and it wakes every waiter.
            return Err(None);
        }
        drain_scheduled(q, now);
        let ready: usize = q.tiers.iter().map(VecDeque::len).sum();
        let mut take = max.min(ready);
        let bucket = q.bucket.map(|b| b.at(now));
        if let Some(b) = bucket {
            take = take.min(b.whole());
            if take == 0 && ready > 0 {
                q.bucket = Some(b);
                return Err(Some(b.wait()));
            }
        }
        if take == 0 {
            let next_due = q
                .scheduled
                .iter()
                .map(|(at, _, _)| *at)
                .min_by(f64::total_cmp);
            return Err(next_due.map(|at| (at - now).max(0.0)));
        }
        if let Some(mut b) = bucket {
            // `take` is at most `max` (a u32), so the cast is exact.
            b.tokens -= take as f64;
            q.bucket = Some(b);
        }
        let deadline = now + secs(visibility_ms);
        let mut out = Vec::with_capacity(take);
        for _ in 0..take {
            let Some(mut entry) = Priority::ORDER
                .iter()
                .find_map(|p| q.tiers[tier(*p)].pop_front())
            else {
                break;
            };
            entry.attempts = entry.attempts.saturating_add(1);
            let receipt = random_token();
            q.tasks.started(&entry, &receipt, now);
            out.push(delivery(&receipt, &entry, deadline));
            q.processing.insert(
                receipt,
                Held {
                    entry,
                    deadline,
                    progress: None,
                },
            );
        }
        Ok(out)
    }
}

fn delivery(receipt: &str, entry: &Entry, deadline: f64) -> Delivery {
    Delivery {
        receipt: Receipt::new(receipt),
        task_id: task_id_of(&entry.body),
        body: entry.body.clone(),
        attempt: entry.attempts,
        priority: entry.priority,
        visible_until: deadline,
    }
}

/// Puts `entry` at the end of its tier, or after `delay_ms` into the scheduled set. Each scheduled
/// entry gets its own sequence number, so identical bodies stay distinct tasks and equal due times
/// keep their order.
fn enqueue(q: &mut Queue, entry: Entry, delay_ms: Option<u64>, now: f64) {
    let state = match delay_ms {
        Some(_) => TaskState::Scheduled,
        None => TaskState::Waiting,
    };
    q.tasks.moved(&entry, state);
    match delay_ms {
        Some(ms) => {
            q.next_seq += 1;
            q.scheduled.push((now + secs(ms), q.next_seq, entry));
        }
        None => q.tiers[tier(entry.priority)].push_back(entry),
    }
}

/// Moves the due scheduled entries to the end of their tiers, in due order; how many. The reserve
/// and `queue_promote_due` both move through here, under the state lock.
fn drain_scheduled(q: &mut Queue, now: f64) -> usize {
    if q.scheduled.is_empty() {
        return 0;
    }
    q.scheduled
        .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let due = q.scheduled.partition_point(|(at, _, _)| *at <= now);
    for (_, _, entry) in q.scheduled.drain(..due) {
        q.tasks.moved(&entry, TaskState::Waiting);
        q.tiers[tier(entry.priority)].push_back(entry);
    }
    due
}

fn live_kv(st: &mut State, ns: &str, key: &str, now: f64) -> Option<Vec<u8>> {
    let k = (ns.to_string(), key.to_string());
    match st.kv.get(&k) {
        Some((_, Some(exp))) if *exp <= now => {
            st.kv.remove(&k);
            None
        }
        Some((v, _)) => Some(v.clone()),
        None => None,
    }
}

fn item_live(item: &Item, now: f64) -> bool {
    item.expires_at.is_none_or(|x| x > now)
}

fn claim_live(pool: &Pool, id: &str, now: f64) -> Option<f64> {
    pool.claims
        .get(id)
        .map(|(_, until)| *until)
        .filter(|until| *until > now)
}

fn to_pool_item(id: &str, item: &Item, in_use_until: Option<f64>) -> PoolItem {
    PoolItem {
        id: id.to_string(),
        payload: item.payload.clone(),
        tags: item.tags.clone(),
        expires_at: item.expires_at,
        in_use_until,
    }
}

fn tags_match(tags: &Tags, where_: &Tags) -> bool {
    where_.iter().all(|(k, v)| tags.get(k) == Some(v))
}

/// Drops entries scored before `min_score` and the lowest beyond `max_len` (0 = no cap).
fn trim(s: &mut Vec<(f64, Vec<u8>)>, max_len: u64, min_score: Option<f64>) {
    if let Some(min) = min_score {
        let cut = s.partition_point(|(sc, _)| *sc < min);
        s.drain(..cut);
    }
    let max = usize::try_from(max_len).unwrap_or(usize::MAX);
    if max > 0 && s.len() > max {
        let excess = s.len() - max;
        s.drain(..excess);
    }
}
