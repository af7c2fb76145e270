//! The in-process reference adapter of [`FleetBackend`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::Notify;

use super::LocalTopics;
use super::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LockGrant, PoolClaim,
    PoolItem, Priority, QueueStats, Receipt, SubmitOutcome, Tags, WorkerRecord, WorkerState,
    check_hold, check_name, py_float, random_token, task_id_of, ttl_ms,
};
use crate::{Clock, Error, Result, SystemClock};

/// [`FleetBackend`] in process memory: state lives as long as the value (shared by clones).
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
    pushed: Notify,
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
    /// Generations outlive workers, so a re-registered worker never goes back (flaw W3).
    gens: HashMap<(String, String), u64>,
    catalog: BTreeMap<String, Vec<u8>>,
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
}

#[derive(Debug, Default)]
struct Queue {
    tiers: [VecDeque<Entry>; 3],
    processing: HashMap<String, (Entry, f64)>,
    scheduled: Vec<(f64, u64, Entry)>,
    next_seq: u64,
    dead: VecDeque<Vec<u8>>,
}

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
                pushed: Notify::new(),
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

    fn try_reserve(&self, name: &str, visibility_ms: u64) -> Option<Delivery> {
        let now = self.now();
        let mut st = self.state();
        let q = st.queues.entry(name.to_string()).or_default();
        drain_scheduled(q, now);
        let mut entry = Priority::ORDER
            .iter()
            .find_map(|p| q.tiers[tier(*p)].pop_front())?;
        entry.attempts = entry.attempts.saturating_add(1);
        let receipt = random_token();
        let deadline = now + secs(visibility_ms);
        q.processing
            .insert(receipt.clone(), (entry.clone(), deadline));
        Some(Delivery {
            receipt: Receipt::new(receipt),
            task_id: task_id_of(&entry.body),
            body: entry.body,
            attempt: entry.attempts,
            priority: entry.priority,
            visible_until: deadline,
        })
    }
}

fn drain_scheduled(q: &mut Queue, now: f64) {
    if q.scheduled.is_empty() {
        return;
    }
    q.scheduled
        .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let due = q.scheduled.partition_point(|(at, _, _)| *at <= now);
    for (_, _, entry) in q.scheduled.drain(..due) {
        q.tiers[tier(entry.priority)].push_back(entry);
    }
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

fn check_json_object(field: &'static str, v: &Value) -> Result<()> {
    if v.is_object() {
        Ok(())
    } else {
        Err(Error::invalid(field, "must be a JSON object"))
    }
}

#[async_trait]
impl FleetBackend for MemoryFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        check_name("ns", ns)?;
        let exp = ttl_ms(ttl).map(|ms| self.now() + secs(ms));
        self.state()
            .kv
            .insert((ns.into(), key.into()), (value.to_vec(), exp));
        Ok(())
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        check_name("ns", ns)?;
        let now = self.now();
        let mut st = self.state();
        if live_kv(&mut st, ns, key, now).is_some() {
            return Ok(false);
        }
        let exp = ttl_ms(ttl).map(|ms| now + secs(ms));
        st.kv.insert((ns.into(), key.into()), (value.to_vec(), exp));
        Ok(true)
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        check_name("ns", ns)?;
        let now = self.now();
        Ok(live_kv(&mut self.state(), ns, key, now))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        check_name("ns", ns)?;
        let now = self.now();
        let mut st = self.state();
        let existed = live_kv(&mut st, ns, key, now).is_some();
        st.kv.remove(&(ns.to_string(), key.to_string()));
        Ok(existed)
    }

    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("pool", name)?;
        let now = self.now();
        let expires_at = ttl_ms(ttl).map(|ms| now + secs(ms));
        let mut st = self.state();
        let pool = st.pools.entry(name.to_string()).or_default();
        pool.items.insert(
            id.to_string(),
            Item {
                payload: payload.to_vec(),
                tags: tags.clone(),
                expires_at,
            },
        );
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        check_name("pool", name)?;
        let now = self.now();
        let st = self.state();
        let Some(pool) = st.pools.get(name) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<PoolItem> = pool
            .items
            .iter()
            .filter(|(_, item)| item_live(item, now))
            .map(|(id, item)| to_pool_item(id, item, claim_live(pool, id, now)))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        check_name("pool", name)?;
        let now = self.now();
        let st = self.state();
        Ok(st.pools.get(name).map_or(0, |p| {
            p.items.values().filter(|i| item_live(i, now)).count() as u64
        }))
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        check_name("pool", name)?;
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(false);
        };
        pool.claims.remove(id);
        Ok(pool
            .items
            .remove(id)
            .is_some_and(|item| item_live(&item, now)))
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        check_name("pool", name)?;
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(false);
        };
        match pool.claims.get(id) {
            Some((t, until)) if t == token && *until > now => {
                pool.claims.remove(id);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>> {
        check_name("pool", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(None);
        };
        // Lazy prune of this pool only, bounded by its size (flaw P1 was every pool on every put).
        pool.items.retain(|_, item| item_live(item, now));
        pool.claims.retain(|_, (_, until)| *until > now);
        let best = pool
            .items
            .iter()
            .filter(|(id, item)| !pool.claims.contains_key(*id) && tags_match(&item.tags, where_))
            .max_by(|(ida, a), (idb, b)| {
                let ka = a.expires_at.unwrap_or(f64::NEG_INFINITY);
                let kb = b.expires_at.unwrap_or(f64::NEG_INFINITY);
                ka.total_cmp(&kb).then_with(|| idb.cmp(ida))
            })
            .map(|(id, item)| (id.clone(), item.clone()));
        let Some((id, item)) = best else {
            return Ok(None);
        };
        let until = now + secs(hold_ms);
        let token = random_token();
        pool.claims.insert(id.clone(), (token.clone(), until));
        Ok(Some(PoolClaim {
            item: to_pool_item(&id, &item, Some(until)),
            token,
        }))
    }

    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            {
                let now = self.now();
                let mut st = self.state();
                let free = st.locks.get(name).is_none_or(|(_, until)| *until <= now);
                if free {
                    let token = random_token();
                    st.locks
                        .insert(name.to_string(), (token.clone(), now + secs(hold_ms)));
                    let fence = st.fences.entry(name.to_string()).or_default();
                    *fence += 1;
                    return Ok(Some(LockGrant {
                        token,
                        fence: *fence,
                    }));
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
        let now = self.now();
        let mut st = self.state();
        match st.locks.get(name) {
            Some((t, until)) if t == token && *until > now => {
                st.locks.remove(name);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let now = self.now();
        let mut st = self.state();
        match st.locks.get_mut(name) {
            Some((t, until)) if t == token && *until > now => {
                *until = now + secs(hold_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        check_name("counter", name)?;
        let mut st = self.state();
        let v = st.counters.entry(name.to_string()).or_default();
        *v = v
            .checked_add(by)
            .ok_or_else(|| Error::invalid("by", "overflows the counter"))?;
        Ok(*v)
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        check_name("counter", name)?;
        Ok(self.state().counters.get(name).copied().unwrap_or(0))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        check_name("counter", name)?;
        self.state().counters.insert(name.to_string(), value);
        Ok(())
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        check_name("counter", name)?;
        Ok(self.state().counters.remove(name).is_some())
    }

    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        self.state()
            .queues
            .entry(name.to_string())
            .or_default()
            .tiers[tier(priority)]
        .push_back(Entry {
            body: body.to_vec(),
            attempts: 0,
            priority,
        });
        self.shared.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        check_name("queue", name)?;
        check_name("idem.ns", idem.ns)?;
        let now = self.now();
        {
            let mut st = self.state();
            if let Some(existing) = live_kv(&mut st, idem.ns, idem.key, now) {
                return Ok(SubmitOutcome::Duplicate(existing));
            }
            let exp = ttl_ms(idem.ttl).map(|ms| now + secs(ms));
            st.kv.insert(
                (idem.ns.to_string(), idem.key.to_string()),
                (idem.value.to_vec(), exp),
            );
            st.queues.entry(name.to_string()).or_default().tiers[tier(priority)].push_back(Entry {
                body: body.to_vec(),
                attempts: 0,
                priority,
            });
        }
        self.shared.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or(0, |q| q.tiers.iter().map(|t| t.len() as u64).sum()))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
        let now = self.now();
        let st = self.state();
        let mut stats = QueueStats::default();
        let Some(q) = st.queues.get(name) else {
            return Ok(stats);
        };
        let [high, normal, low] = &q.tiers;
        stats.high = high.len() as u64;
        stats.normal = normal.len() as u64;
        stats.low = low.len() as u64;
        stats.in_flight = q.processing.len() as u64;
        // Same cut-offs as sweep (`deadline <= now`) and drain (`at <= now`).
        stats.overdue = q.processing.values().filter(|(_, d)| *d <= now).count() as u64;
        stats.scheduled = q.scheduled.len() as u64;
        stats.due = q.scheduled.iter().filter(|(at, _, _)| *at <= now).count() as u64;
        stats.dead = q.dead.len() as u64;
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let st = self.state();
        Ok(st.queues.get(name).map_or_else(Vec::new, |q| {
            q.tiers
                .iter()
                .flatten()
                .take(n)
                .map(|e| e.body.clone())
                .collect()
        }))
    }

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.pushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Always try once, so `timeout = 0` takes a ready task (flaw Q2).
            if let Some(d) = self.try_reserve(name, visibility_ms) {
                return Ok(Some(d));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // Scheduled tasks fall due without a push: re-check at least every 50 ms.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(50)), notified).await;
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        let mut st = self.state();
        Ok(st
            .queues
            .get_mut(name)
            .and_then(|q| q.processing.remove(receipt.as_str()))
            .is_some())
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let now = self.now();
        let delay_ms = ttl_ms(Some(delay));
        {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(false);
            };
            let Some((mut entry, _)) = q.processing.remove(receipt.as_str()) else {
                return Ok(false);
            };
            entry.body = body.to_vec();
            match delay_ms {
                Some(ms) => {
                    q.next_seq += 1;
                    let seq = q.next_seq;
                    q.scheduled.push((now + secs(ms), seq, entry));
                }
                None => q.tiers[tier(entry.priority)].push_back(entry),
            }
        }
        self.shared.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let now = self.now();
        let mut st = self.state();
        match st
            .queues
            .get_mut(name)
            .and_then(|q| q.processing.get_mut(receipt.as_str()))
        {
            Some((_, deadline)) => {
                *deadline = now + secs(visibility_ms);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(false);
        };
        if q.processing.remove(receipt.as_str()).is_none() {
            return Ok(false);
        }
        q.dead.push_back(body.to_vec());
        Ok(true)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let now = self.now();
        let moved = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(0);
            };
            let mut lapsed: Vec<(String, f64)> = q
                .processing
                .iter()
                .filter(|(_, (_, deadline))| *deadline <= now)
                .map(|(r, (_, d))| (r.clone(), *d))
                .collect();
            lapsed.sort_by(|a, b| a.1.total_cmp(&b.1));
            for (receipt, _) in &lapsed {
                if let Some((entry, _)) = q.processing.remove(receipt) {
                    q.tiers[tier(entry.priority)].push_back(entry);
                }
            }
            lapsed.len() as u64
        };
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved)
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        self.state()
            .queues
            .entry(name.to_string())
            .or_default()
            .dead
            .push_back(body.to_vec());
        Ok(())
    }

    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or_else(Vec::new, |q| q.dead.iter().take(n).cloned().collect()))
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let mut st = self.state();
        Ok(st.queues.get_mut(name).map_or_else(Vec::new, |q| {
            let k = n.min(q.dead.len());
            q.dead.drain(..k).collect()
        }))
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        Ok(self
            .state()
            .queues
            .get(name)
            .map_or(0, |q| q.dead.len() as u64))
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let mut st = self.state();
        Ok(st.queues.get_mut(name).map_or(0, |q| {
            let n = q.dead.len() as u64;
            q.dead.clear();
            n
        }))
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        check_name("queue", name)?;
        let moved = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(0);
            };
            let k = n.min(q.dead.len());
            let bodies: Vec<Vec<u8>> = q.dead.drain(..k).collect();
            for body in bodies {
                q.tiers[tier(priority)].push_back(Entry {
                    body,
                    attempts: 0,
                    priority,
                });
            }
            k as u64
        };
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved)
    }

    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("stream", name)?;
        if !score.is_finite() {
            return Err(Error::invalid("score", "must be finite"));
        }
        {
            let mut st = self.state();
            let s = st.streams.entry(name.to_string()).or_default();
            s.retain(|(_, e)| e != envelope);
            let pos = s.partition_point(|(sc, e)| (*sc, e.as_slice()) < (score, envelope));
            s.insert(pos, (score, envelope.to_vec()));
            trim(s, max_len, ttl_ms(ttl).map(|ms| score - secs(ms)));
        }
        self.publish(&format!("{name}.emit"), py_float(score).into_bytes());
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        let mut st = self.state();
        Ok(st.streams.get_mut(name).map_or_else(Vec::new, |s| {
            let k = n.min(s.len());
            s.drain(..k).map(|(_, e)| e).collect()
        }))
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        let st = self.state();
        Ok(st.streams.get(name).map_or_else(Vec::new, |s| {
            s.iter().take(n).map(|(_, e)| e.clone()).collect()
        }))
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        check_name("stream", name)?;
        Ok(self.state().streams.get(name).map_or(0, |s| s.len() as u64))
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        check_name("stream", name)?;
        let now = self.now();
        let mut st = self.state();
        if let Some(s) = st.streams.get_mut(name) {
            trim(s, max_len, ttl_ms(ttl).map(|ms| now - secs(ms)));
        }
        Ok(())
    }

    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        self.publish(topic, body.to_vec());
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        Ok(self.shared.topics.subscribe(topic))
    }

    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        check_name("automation_type", automation_type)?;
        check_name("worker_id", worker_id)?;
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        if let Some(w) = st.workers.get_mut(&key) {
            w.hardware = hardware.clone();
            return Ok(());
        }
        // A generation left by a removed worker is bumped: the seeded `{}` is a new config for
        // any process still running with the old one (flaw W3).
        let next = st.gens.get(&key).map_or(0, |g| g + 1);
        st.gens.insert(key.clone(), next);
        st.workers.insert(
            key,
            Worker {
                hardware: hardware.clone(),
                config: Value::Object(Map::new()),
                state: None,
                stats: Value::Object(Map::new()),
                history: Vec::new(),
            },
        );
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        Ok(match st.workers.get(&key) {
            Some(w) => (w.config.clone(), st.gens.get(&key).copied().unwrap_or(0)),
            None => (Value::Object(Map::new()), 0),
        })
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        check_json_object("config", config)?;
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        if !st.workers.contains_key(&key) {
            return Ok(ConfigWrite::NotRegistered);
        }
        let current = st.gens.get(&key).copied().unwrap_or(0);
        if expected_gen.is_some_and(|e| e != current) {
            return Ok(ConfigWrite::GenMismatch { current });
        }
        st.gens.insert(key.clone(), current + 1);
        if let Some(w) = st.workers.get_mut(&key) {
            w.config = config.clone();
        }
        Ok(ConfigWrite::Applied {
            generation: current + 1,
        })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        w.state = Some((
            state.state.to_string(),
            state
                .last_error
                .filter(|e| !e.is_empty())
                .map(str::to_string),
            state.last_seen,
            state.applied_gen,
        ));
        Ok(true)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        w.stats = stats.clone();
        Ok(true)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        if !ts.is_finite() {
            return Err(Error::invalid("ts", "must be finite"));
        }
        let key = (automation_type.to_string(), worker_id.to_string());
        let encoded = serde_json::to_string(frame).map_err(|e| Error::invalid("frame", e))?;
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        // Same semantics as the seed's ZSET: an identical frame moves to the new ts.
        w.history.retain(|(_, f)| *f != encoded);
        let pos = w
            .history
            .partition_point(|(t, f)| (*t, f.as_str()) < (ts, encoded.as_str()));
        w.history.insert(pos, (ts, encoded));
        if max_entries > 0 && w.history.len() > max_entries {
            let excess = w.history.len() - max_entries;
            w.history.drain(..excess);
        }
        Ok(true)
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        let Some(w) = st.workers.get(&key) else {
            return Ok(Vec::new());
        };
        Ok(w.history
            .iter()
            .filter(|(t, _)| *t >= since)
            .take(limit)
            .filter_map(|(_, f)| serde_json::from_str(f).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        let Some(w) = st.workers.get(&key) else {
            return Ok(None);
        };
        let (state, last_error, last_seen, applied_gen) = w
            .state
            .clone()
            .unwrap_or_else(|| ("IDLE".to_string(), None, 0.0, None));
        Ok(Some(WorkerRecord {
            hardware: w.hardware.clone(),
            config: w.config.clone(),
            config_gen: st.gens.get(&key).copied().unwrap_or(0),
            state,
            last_seen,
            last_error,
            applied_gen,
            stats: w.stats.clone(),
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        let st = self.state();
        Ok(st
            .workers
            .keys()
            .filter(|(at, _)| automation_type.is_none_or(|want| want == at))
            .cloned()
            .collect())
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        Ok(self.state().workers.remove(&key).is_some())
    }

    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
        self.state()
            .catalog
            .insert(automation_type.to_string(), doc.to_vec());
        Ok(())
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.state().catalog.get(automation_type).cloned())
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.state().catalog.clone())
    }
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
