//! Typed wrappers of the non-queue primitives: pools, locks, counters, KV, streams and events.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use switchyard_core::fleet::{EventStream, FleetBackend, LockGrant, PoolClaim, PoolItem, Tags};
use switchyard_core::pycompat::Dumps;
use switchyard_core::{Error, Result};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{unix_now, uuid4_hex};

fn decode_json<T: DeserializeOwned>(location: impl fmt::Display, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::corrupt(location.to_string(), e))
}

/// `json.dumps(value)`, as the seed's producers write envelopes and documents (ADR 0177); a
/// value that cannot be written is [`Error::InvalidInput`] on `field`.
pub(crate) fn encode_json<T: Serialize + ?Sized>(
    field: &'static str,
    value: &T,
) -> Result<Vec<u8>> {
    Dumps::DEFAULT.to_vec(value).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid(field, reason),
        e => e,
    })
}

// ---------------------------------------------------------------- KV

/// A KV namespace.
#[derive(Debug, Clone)]
pub struct Kv {
    backend: Arc<dyn FleetBackend>,
    ns: String,
}

impl Kv {
    /// Namespace `ns` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, ns: impl Into<String>) -> Self {
        Kv {
            backend,
            ns: ns.into(),
        }
    }

    /// Upserts `value`; it expires after `ttl` if given.
    pub async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        self.backend.kv_set(&self.ns, key, value, ttl).await
    }

    /// Sets only if absent or expired; `true` if it set.
    pub async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool> {
        self.backend.kv_set_nx(&self.ns, key, value, ttl).await
    }

    /// The live value.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.backend.kv_get(&self.ns, key).await
    }

    /// `true` if a live value was deleted.
    pub async fn del(&self, key: &str) -> Result<bool> {
        self.backend.kv_del(&self.ns, key).await
    }

    /// Stores `value` as JSON (Python `json.dumps` bytes).
    pub async fn set_json<T: Serialize + ?Sized>(
        &self,
        key: &str,
        value: &T,
        ttl: Option<Duration>,
    ) -> Result<()> {
        self.set(key, &encode_json("value", value)?, ttl).await
    }

    /// Reads a JSON value; a value that does not decode as `T` is [`Error::Corrupt`].
    pub async fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.get(key).await? {
            Some(bytes) => {
                decode_json(format_args!("kv[{:?}, {key:?}]", self.ns), &bytes).map(Some)
            }
            None => Ok(None),
        }
    }
}

// ---------------------------------------------------------------- Counter

/// An integer counter.
#[derive(Debug, Clone)]
pub struct Counter {
    backend: Arc<dyn FleetBackend>,
    name: String,
}

impl Counter {
    /// Counter `name` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, name: impl Into<String>) -> Self {
        Counter {
            backend,
            name: name.into(),
        }
    }

    /// Adds `by`; the new value.
    pub async fn incr(&self, by: i64) -> Result<i64> {
        self.backend.counter_incr(&self.name, by).await
    }

    /// The value (0 when missing).
    pub async fn get(&self) -> Result<i64> {
        self.backend.counter_get(&self.name).await
    }

    /// Overwrites the value.
    pub async fn set(&self, value: i64) -> Result<()> {
        self.backend.counter_set(&self.name, value).await
    }

    /// Deletes the counter; `true` if it existed.
    pub async fn del(&self) -> Result<bool> {
        self.backend.counter_del(&self.name).await
    }
}

// ---------------------------------------------------------------- Pool

/// A pool of tagged items with exclusive, lapsing claims (proxies, accounts, sessions).
#[derive(Debug, Clone)]
pub struct Pool {
    backend: Arc<dyn FleetBackend>,
    name: String,
}

/// A won claim. Release it when done; it lapses by itself after its hold otherwise.
#[derive(Debug)]
pub struct PoolLease {
    backend: Arc<dyn FleetBackend>,
    pool: String,
    claim: PoolClaim,
}

impl PoolLease {
    /// The claimed item (`in_use_until` is the claim's end).
    pub fn item(&self) -> &PoolItem {
        &self.claim.item
    }

    /// The item's payload decoded from JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        decode_json(
            format_args!("pool[{:?}, {:?}]", self.pool, self.claim.item.id),
            &self.claim.item.payload,
        )
    }

    /// Frees the claim; `false` if it had lapsed (and maybe been won by someone else, whose
    /// claim stays untouched).
    pub async fn release(self) -> Result<bool> {
        self.backend
            .pool_release(&self.pool, &self.claim.item.id, &self.claim.token)
            .await
    }
}

impl Pool {
    /// Pool `name` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, name: impl Into<String>) -> Self {
        Pool {
            backend,
            name: name.into(),
        }
    }

    /// Upserts an item.
    pub async fn put(
        &self,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        self.backend
            .pool_put(&self.name, id, payload, tags, ttl)
            .await
    }

    /// Upserts an item whose payload is `value` as JSON.
    pub async fn put_json<T: Serialize + ?Sized>(
        &self,
        id: &str,
        value: &T,
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        self.put(id, &encode_json("payload", value)?, tags, ttl)
            .await
    }

    /// Live items.
    pub async fn list(&self) -> Result<Vec<PoolItem>> {
        self.backend.pool_list(&self.name).await
    }

    /// Number of live items.
    pub async fn len(&self) -> Result<u64> {
        self.backend.pool_size(&self.name).await
    }

    /// Whether the pool has no live item.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Deletes an item and its claim.
    pub async fn remove(&self, id: &str) -> Result<bool> {
        self.backend.pool_remove(&self.name, id).await
    }

    /// Claims one free item whose tags match every pair of `where_`, for `hold`.
    pub async fn claim(&self, where_: &Tags, hold: Duration) -> Result<Option<PoolLease>> {
        Ok(self
            .backend
            .pool_claim_any(&self.name, where_, hold)
            .await?
            .map(|claim| PoolLease {
                backend: self.backend.clone(),
                pool: self.name.clone(),
                claim,
            }))
    }
}

// ---------------------------------------------------------------- Lock

/// A named token lock.
#[derive(Debug, Clone)]
pub struct Lock {
    backend: Arc<dyn FleetBackend>,
    name: String,
}

#[derive(Debug)]
struct GuardState {
    lost: AtomicBool,
    changed: Notify,
    /// Conservative local deadline: taken before the backend call, so never later than the
    /// store's.
    valid_until: Mutex<Instant>,
}

impl GuardState {
    fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
            || Instant::now() >= *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_valid_until(&self, at: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = at;
        self.changed.notify_waiters();
    }
}

/// A held lock. It knows when it was lost (its hold ran out, or an extend found another
/// holder); [`LockGuard::keep_alive`] renews it in the background. Dropping it releases it
/// (in the background, best effort); [`LockGuard::release`] says whether that worked.
#[derive(Debug)]
pub struct LockGuard {
    backend: Arc<dyn FleetBackend>,
    name: String,
    grant: LockGrant,
    state: Arc<GuardState>,
    renewer: Option<JoinHandle<()>>,
    released: bool,
}

impl Lock {
    /// Lock `name` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, name: impl Into<String>) -> Self {
        Lock {
            backend,
            name: name.into(),
        }
    }

    /// Takes the lock for `hold`, waiting up to `wait`; `None` on timeout.
    pub async fn acquire(&self, hold: Duration, wait: Duration) -> Result<Option<LockGuard>> {
        let started = Instant::now();
        let Some(grant) = self.backend.lock_acquire(&self.name, hold, wait).await? else {
            return Ok(None);
        };
        // The hold counts from the backend's grant, which came after `started`, so
        // `started + hold` is a safe local deadline.
        let state = Arc::new(GuardState {
            lost: AtomicBool::new(false),
            changed: Notify::new(),
            valid_until: Mutex::new(started + hold),
        });
        let guard = LockGuard {
            backend: self.backend.clone(),
            name: self.name.clone(),
            grant,
            state,
            renewer: None,
            released: false,
        };
        // After a wait, `started` may be long before the grant: re-anchor with an extend.
        if started.elapsed() > Duration::from_millis(50) {
            guard.extend(hold).await?;
        }
        Ok(Some(guard))
    }

    /// Takes the lock for `hold` only if it is free now.
    pub async fn try_acquire(&self, hold: Duration) -> Result<Option<LockGuard>> {
        self.acquire(hold, Duration::ZERO).await
    }
}

impl LockGuard {
    /// The fencing number of this grant: greater than every earlier grant's. Pass it to
    /// whatever the lock protects so it can refuse a stale holder.
    pub fn fence(&self) -> u64 {
        self.grant.fence
    }

    /// The lock token.
    pub fn token(&self) -> &str {
        &self.grant.token
    }

    /// Whether the lock is (possibly) no longer ours: an extend failed or the hold ran out.
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// Resolves once the lock is lost (a failed extend, or its hold running out unrenewed).
    pub async fn lost(&self) {
        loop {
            let changed = self.state.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.state.lost.load(Ordering::SeqCst) {
                return;
            }
            let until = *self
                .state
                .valid_until
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {
                    if self.state.is_lost() {
                        return;
                    }
                }
                _ = changed => {}
            }
        }
    }

    /// Renews the hold to `hold` from now; `false` (and the guard is lost) if another holder
    /// has it.
    pub async fn extend(&self, hold: Duration) -> Result<bool> {
        extend(
            &self.backend,
            &self.name,
            &self.grant.token,
            hold,
            &self.state,
        )
        .await
    }

    /// Renews the lock every `every` with a hold of `hold` in a background task until it is
    /// released, dropped or lost.
    pub fn keep_alive(&mut self, every: Duration, hold: Duration) {
        if let Some(old) = self.renewer.take() {
            old.abort();
        }
        let (backend, name, token, state) = (
            self.backend.clone(),
            self.name.clone(),
            self.grant.token.clone(),
            self.state.clone(),
        );
        self.renewer = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match extend(&backend, &name, &token, hold, &state).await {
                    Ok(true) => {}
                    Ok(false) => return,
                    // A transient error: the local deadline decides whether we still hold it.
                    Err(e) => {
                        tracing::warn!(lock = %name, error = %e, "lock renewal failed");
                        if state.is_lost() {
                            state.mark_lost();
                            return;
                        }
                    }
                }
            }
        }));
    }

    /// Releases the lock; `false` if it was already lost.
    pub async fn release(mut self) -> Result<bool> {
        self.released = true;
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
        let ok = self
            .backend
            .lock_release(&self.name, &self.grant.token)
            .await?;
        self.state.mark_lost();
        Ok(ok)
    }
}

async fn extend(
    backend: &Arc<dyn FleetBackend>,
    name: &str,
    token: &str,
    hold: Duration,
    state: &GuardState,
) -> Result<bool> {
    let started = Instant::now();
    let ok = backend.lock_extend(name, token, hold).await?;
    if ok {
        state.set_valid_until(started + hold);
    } else {
        state.mark_lost();
    }
    Ok(ok)
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
        if self.released {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (backend, name, token) = (
                self.backend.clone(),
                self.name.clone(),
                self.grant.token.clone(),
            );
            rt.spawn(async move {
                let _ = backend.lock_release(&name, &token).await;
            });
        }
    }
}

// ---------------------------------------------------------------- Stream

/// A sorted stream of envelopes (the master's worker-output stream).
#[derive(Debug, Clone)]
pub struct Stream {
    backend: Arc<dyn FleetBackend>,
    name: String,
    max_len: u64,
    ttl: Option<Duration>,
}

impl Stream {
    /// The seed's output stream settings: `max_len = 50000`, `ttl = 3600 s`.
    pub fn new(backend: Arc<dyn FleetBackend>, name: impl Into<String>) -> Self {
        Self::with_limits(backend, name, 50_000, Some(Duration::from_secs(3600)))
    }

    /// A stream with its own caps (`max_len = 0`: no cap).
    pub fn with_limits(
        backend: Arc<dyn FleetBackend>,
        name: impl Into<String>,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Self {
        Stream {
            backend,
            name: name.into(),
            max_len,
            ttl,
        }
    }

    /// Inserts `envelope` at `score`, trimming by the stream's caps.
    pub async fn push(&self, envelope: &[u8], score: f64) -> Result<()> {
        self.backend
            .stream_push(&self.name, envelope, score, self.max_len, self.ttl)
            .await
    }

    /// Pushes the master's output envelope `{"id", "slot_id", "ts", "payload"}` scored by `ts`
    /// (now); returns its id.
    pub async fn emit<T: Serialize + ?Sized>(&self, slot_id: i64, payload: &T) -> Result<String> {
        let id = uuid4_hex();
        let ts = unix_now();
        let payload = serde_json::to_value(payload).map_err(|e| Error::invalid("payload", e))?;
        let env = json!({"id": id, "slot_id": slot_id, "ts": ts, "payload": payload});
        self.push(&encode_json("envelope", &env)?, ts).await?;
        Ok(id)
    }

    /// Removes and returns the `n` lowest-scored envelopes.
    pub async fn pop(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.backend.stream_pop(&self.name, n).await
    }

    /// The `n` lowest-scored envelopes.
    pub async fn peek(&self, n: usize) -> Result<Vec<Vec<u8>>> {
        self.backend.stream_peek(&self.name, n).await
    }

    /// Number of envelopes.
    pub async fn len(&self) -> Result<u64> {
        self.backend.stream_length(&self.name).await
    }

    /// Whether the stream is empty.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Applies the caps relative to now.
    pub async fn trim(&self) -> Result<()> {
        self.backend
            .stream_trim(&self.name, self.max_len, self.ttl)
            .await
    }

    /// The scores of later pushes (topic `{name}.emit`).
    pub async fn notifications(&self) -> Result<Subscription> {
        Events::new(self.backend.clone())
            .subscribe(&format!("{}.emit", self.name))
            .await
    }
}

// ---------------------------------------------------------------- Events

/// Pub/sub: at most once, nothing stored.
#[derive(Debug, Clone)]
pub struct Events {
    backend: Arc<dyn FleetBackend>,
}

/// Messages of one topic, as a [`futures::Stream`]. Dropping it unsubscribes.
pub struct Subscription {
    inner: EventStream,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl futures::Stream for Subscription {
    type Item = Vec<u8>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        self.inner.poll_next_unpin(cx)
    }
}

impl Subscription {
    /// The messages decoded as JSON `T`; one that does not decode is an [`Error::Corrupt`] item.
    pub fn json<T: DeserializeOwned>(self) -> impl futures::Stream<Item = Result<T>> + Send {
        self.map(|m| decode_json("event", &m))
    }
}

impl Events {
    /// Pub/sub on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>) -> Self {
        Events { backend }
    }

    /// Publishes `body` to the topic's current subscribers.
    pub async fn publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        self.backend.event_publish(topic, body).await
    }

    /// Publishes `value` as JSON.
    pub async fn publish_json<T: Serialize + ?Sized>(&self, topic: &str, value: &T) -> Result<()> {
        self.publish(topic, &encode_json("body", value)?).await
    }

    /// Subscribes; active when this returns.
    pub async fn subscribe(&self, topic: &str) -> Result<Subscription> {
        Ok(Subscription {
            inner: self.backend.event_subscribe(topic).await?,
        })
    }
}

/// Decodes a JSON document of the catalog or a worker record field.
pub(crate) fn value_of(location: impl fmt::Display, bytes: &[u8]) -> Result<Value> {
    decode_json(location, bytes)
}
