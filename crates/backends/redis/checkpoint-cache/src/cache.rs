use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use fred::bytes::Bytes;
use fred::clients::{Pipeline, Pool};
use fred::prelude::{ClientLike, Expiration, KeysInterface, Options, Value};
use fred::types::Key;
use switchyard_core::cache::{
    CacheStats, CheckpointCache, TypedPayload, is_thread_entry_key, thread_key_stem,
};
use switchyard_core::{Error, Result};
use tracing::warn;

use switchyard_redis_support::circuit::Circuit;
use switchyard_redis_support::connect::{ConnectionPolicy, Reconnect, build_error};
use switchyard_redis_support::scan::Scan;
use switchyard_redis_support::url::{RedisUrl, Topology};

use crate::keys::{CacheKeyLayout, CacheKeyLayoutExt};

/// Separates the serializer's tag from the payload in a stored value.
const TAG_SEPARATOR: u8 = 0;
/// fred adds up to this much random delay to every reconnect attempt.
const RECONNECT_JITTER: Duration = Duration::from_millis(100);

/// How a [`RedisCheckpointCache`] talks to Redis. [`Default`] gives the defaults below.
///
/// Failure is a miss, now (ADR 0213): opening never waits for Redis, a call while the connection
/// is down answers at once, a call never takes longer than `call_timeout`, and after Redis returns
/// the cache answers again within one `reconnect_interval`.
#[derive(Clone, Debug)]
pub struct RedisCheckpointCacheOptions {
    /// Seconds an entry lives; 0 stores entries without expiry (`SET` without `EX`, which also
    /// clears a TTL left by an earlier write). Default 86,400 (one day), a leak safety net.
    pub ttl_seconds: u64,
    /// Connections in the pool (each auto-pipelines concurrent calls). Default 2.
    pub pool_size: usize,
    /// Longest a call (or one command of a purge) waits for Redis before it degrades to a miss.
    /// Default 250 ms: a healthy Redis answers a 100-key `MGET` in well under a millisecond, and
    /// a cache that waits longer than recomputing costs more than it saves.
    pub call_timeout: Duration,
    /// Longest wait for one TCP (and TLS) connect attempt. Default 1 s.
    pub connect_timeout: Duration,
    /// Longest time between reconnect attempts while Redis is away, jitter included, so hits
    /// return at most this long after Redis does. Default 500 ms; at least 150 ms.
    pub reconnect_interval: Duration,
    /// The key layout; `None` (the default) picks it from the URL: [`CacheKeyLayout::Cluster`]
    /// for `redis-cluster://` and `rediss-cluster://`, else [`CacheKeyLayout::Seed`].
    pub layout: Option<CacheKeyLayout>,
}

impl Default for RedisCheckpointCacheOptions {
    fn default() -> Self {
        RedisCheckpointCacheOptions {
            ttl_seconds: 86_400,
            pool_size: 2,
            call_timeout: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(1),
            reconnect_interval: Duration::from_millis(500),
            layout: None,
        }
    }
}

/// The checkpoint cache on Redis. See the crate docs for commands, value format and failure
/// policy.
pub struct RedisCheckpointCache {
    pool: Pool,
    // Whether the first connection attempt has finished: until it has, a call waits for it
    // (within its deadline) instead of missing, as deer-flow's client connects on its first
    // command and answers it (ADR 0355).
    circuit: Circuit,
    // Per-command options: fail at once while disconnected, bounded wait otherwise.
    command_options: Options,
    call_timeout: Duration,
    expiration_seconds: Option<i64>,
    layout: CacheKeyLayout,
    hits: AtomicU64,
    misses: AtomicU64,
    closed: AtomicBool,
}

impl fmt::Debug for RedisCheckpointCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCheckpointCache")
            .field("pool_size", &self.pool.size())
            .field("call_timeout", &self.call_timeout)
            .field("expiration_seconds", &self.expiration_seconds)
            .field("layout", &self.layout)
            .field("stats", &self.stats())
            .finish()
    }
}

impl RedisCheckpointCache {
    /// Opens the cache on the Redis at `url`: `redis://`, `rediss://`, `redis-sentinel://`,
    /// `rediss-sentinel://`, or a Redis Cluster as `redis-cluster://host:port?node=host:port&…`
    /// (also `rediss-cluster://`), which selects fred's cluster client and, unless
    /// [`RedisCheckpointCacheOptions::layout`] says otherwise, the cluster key layout.
    ///
    /// Returns at once: the connections are made in the background. A call made before the
    /// first connection attempt has finished waits for it, within the call's deadline, so a
    /// cache used right after opening answers; once an attempt has failed (Redis is down) calls
    /// are misses at once until a connection is up ([`wait_connected`](Self::wait_connected)
    /// waits for every connection, for a warm start). Fails only on configuration errors
    /// ([`Error::Config`]).
    pub async fn connect(url: &str, options: RedisCheckpointCacheOptions) -> Result<Self> {
        let parsed = RedisUrl::parse(
            url,
            "redis_url",
            &[Topology::Standalone, Topology::Sentinel, Topology::Cluster],
        )?;
        if options.pool_size == 0 {
            return Err(Error::config("pool_size", "must be at least 1"));
        }
        if options.call_timeout.is_zero() {
            return Err(Error::config(
                "call_timeout",
                "must be positive; a cache call must never hang",
            ));
        }
        let floor = RECONNECT_JITTER + Duration::from_millis(50);
        if options.reconnect_interval < floor {
            return Err(Error::config(
                "reconnect_interval",
                format!("must be at least {} ms", floor.as_millis()),
            ));
        }
        let expiration_seconds = match options.ttl_seconds {
            0 => None,
            ttl => Some(
                i64::try_from(ttl)
                    .map_err(|_| Error::config("ttl_seconds", "is larger than Redis accepts"))?,
            ),
        };
        let call_timeout = options.call_timeout;
        let policy = ConnectionPolicy {
            command_timeout: call_timeout,
            connect_timeout: options.connect_timeout,
            // fred's own commands (handshake, CLUSTER SLOTS) get a little more room than a call.
            internal_command_timeout: call_timeout.max(Duration::from_secs(1)),
            // Cache commands are never re-sent after a reconnect: a miss is cheaper.
            max_command_attempts: 1,
            // A connection that answers nothing for this long is dropped and reconnected, so a
            // half-open socket costs a few timed-out calls, not a dead cache.
            unresponsive: Some((
                (call_timeout * 4).max(Duration::from_secs(2)),
                (call_timeout / 2).max(Duration::from_millis(50)),
            )),
            // Never give up, so Redis coming back is always noticed; fred adds its jitter on top
            // of the delay, so the delay is capped at the interval minus the jitter.
            reconnect: Reconnect {
                max_attempts: 0,
                min_delay: Duration::from_millis(50),
                max_delay: options.reconnect_interval - RECONNECT_JITTER,
            },
            // A first connect that fails is left to the reconnect loop, not an error.
            fail_fast: false,
        };
        policy.validate("checkpoint_cache")?;
        let pool = policy
            .builder(&parsed)
            .build_pool(options.pool_size)
            .map_err(|e| build_error("redis_url", &parsed, &e))?;
        let circuit = Circuit::new(&parsed);
        for client in pool.clients() {
            circuit.watch(client);
        }
        // The connection tasks run until `close`; their handles are not needed, and nothing here
        // waits for them (ADR 0213): the first calls wait for the first attempt instead.
        drop(pool.connect_pool());
        Ok(RedisCheckpointCache {
            pool,
            circuit,
            command_options: Options {
                fail_fast: true,
                timeout: Some(call_timeout),
                max_attempts: Some(1),
                ..Options::default()
            },
            call_timeout,
            expiration_seconds,
            layout: options
                .layout
                .unwrap_or_else(|| CacheKeyLayout::for_url(url)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// Waits up to `timeout` until every connection of the pool is up; true when they are. For a
    /// warm start or a test: the cache works without it (calls are misses until then).
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.pool.wait_for_connect()).await,
            Ok(Ok(()))
        )
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether any connection of the pool is up now (calls while none is are misses at once).
    pub fn is_connected(&self) -> bool {
        self.pool.clients().iter().any(|c| c.is_connected())
    }

    /// A connected client when there is one, with the per-call options.
    fn client(&self) -> fred::clients::WithOptions<fred::clients::Client> {
        self.pool
            .next_connected()
            .with_options(&self.command_options)
    }

    fn miss(&self, n: usize) {
        self.misses.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The deadline of a call starting now.
    fn deadline(&self) -> Instant {
        Instant::now() + self.call_timeout
    }

    /// Before the first connection attempt has finished, waits for it until `deadline`: a fresh
    /// cache is milliseconds from its connection, and a call that waits gets an answer instead of
    /// a miss. After that (up, or known down) it returns at once.
    async fn settle(&self, deadline: Instant) {
        if !self.circuit.is_connecting() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            self.circuit.wait_settled(left).await;
        }
    }

    /// Runs `call` within the call deadline; a late call is a failed one.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = std::result::Result<T, fred::error::Error>>,
    ) -> std::result::Result<T, fred::error::Error> {
        self.bounded_until(self.deadline(), call).await
    }

    /// Runs `call` until `deadline`; a late call is a failed one.
    async fn bounded_until<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = std::result::Result<T, fred::error::Error>>,
    ) -> std::result::Result<T, fred::error::Error> {
        match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => result,
            Err(_) => Err(fred::error::Error::new(
                fred::error::ErrorKind::Timeout,
                format!(
                    "no answer within the call timeout ({} ms)",
                    self.call_timeout.as_millis()
                ),
            )),
        }
    }

    /// Unlinks every stored entry of the thread with stem `stem`: `SCAN` with the stem's glob
    /// characters escaped, then each match checked structurally ([`is_thread_entry_key`]: the
    /// stem, then exactly one entry-hash segment), so thread `t1` never takes `t1:x`'s entries
    /// (ADR 0212). SCAN covers one node, so on a cluster every primary is scanned; deletes are one
    /// `UNLINK` per slot.
    async fn purge(&self, stem: &str) -> std::result::Result<u64, fred::error::Error> {
        let pattern = self.layout.purge_pattern(stem);
        self.settle(self.deadline()).await;
        // The shared scan covers every primary of a cluster; each page runs within the call
        // deadline.
        let mut scan = Scan::new(self.pool.next_connected(), &self.command_options, &pattern)?;
        let mut removed = 0u64;
        while let Some(keys) = self.bounded(scan.next_page()).await? {
            let doomed: Vec<Key> = keys
                .into_iter()
                .filter(|k| {
                    self.layout
                        .cache_key(k)
                        .is_some_and(|c| is_thread_entry_key(c, stem))
                })
                .map(Key::from)
                .collect();
            removed += self.unlink(doomed).await?;
        }
        Ok(removed)
    }

    /// One `UNLINK` per slot (all in one when not clustered), pipelined.
    async fn unlink(&self, keys: Vec<Key>) -> std::result::Result<u64, fred::error::Error> {
        if keys.is_empty() {
            return Ok(0);
        }
        let client = self.client();
        if !client.is_clustered() {
            return self.bounded(client.unlink::<u64, _>(keys)).await;
        }
        let mut by_slot: BTreeMap<u16, Vec<Key>> = BTreeMap::new();
        for key in keys {
            by_slot
                .entry(fred::util::redis_keyslot(key.as_bytes()))
                .or_default()
                .push(key);
        }
        let pipeline = Pipeline::from(client);
        for group in by_slot.into_values() {
            let _: std::result::Result<(), _> = pipeline.unlink(group).await;
        }
        let mut removed = 0u64;
        for reply in self
            .bounded(async { Ok::<_, fred::error::Error>(pipeline.try_all::<Value>().await) })
            .await?
        {
            removed += reply?.as_u64().unwrap_or(0);
        }
        Ok(removed)
    }

    /// The indices of `redis_keys`, grouped so that each group can be one `MGET`: all of them on
    /// standalone Redis, one group per slot on a cluster.
    fn mget_groups(&self, redis_keys: &[String]) -> Vec<Vec<usize>> {
        if !self.pool.next().is_clustered() {
            return vec![(0..redis_keys.len()).collect()];
        }
        let mut by_slot: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, key) in redis_keys.iter().enumerate() {
            by_slot
                .entry(fred::util::redis_keyslot(key.as_bytes()))
                .or_default()
                .push(i);
        }
        by_slot.into_values().collect()
    }
}

/// `tag NUL payload`, deer-flow's stored value.
fn encode(entry: &TypedPayload) -> Bytes {
    let mut value = Vec::with_capacity(entry.tag().len() + 1 + entry.payload().len());
    value.extend_from_slice(entry.tag().as_bytes());
    value.push(TAG_SEPARATOR);
    value.extend_from_slice(entry.payload());
    Bytes::from(value)
}

/// Splits a stored value on its first NUL only (payloads may contain NULs); the payload is a
/// slice of the reply, not a copy.
fn decode(raw: Bytes) -> Result<TypedPayload> {
    let split = raw
        .iter()
        .position(|b| *b == TAG_SEPARATOR)
        .ok_or_else(|| Error::corrupt("value", "no NUL between tag and payload"))?;
    let tag = std::str::from_utf8(&raw[..split])
        .map_err(|_| Error::corrupt("value", "the tag is not UTF-8"))?;
    TypedPayload::new(tag, raw.slice(split + 1..))
}

/// The `SCAN MATCH` pattern of a thread stem: the stem with the glob characters `* ? [ ] \\`
/// escaped, then `*`. deer-flow used the stem unescaped, so a prefix containing glob characters
/// purged other prefixes' entries (ADR 0053).
pub use switchyard_redis_support::scan::pattern_for_stem as scan_pattern_for_stem;

#[async_trait]
impl CheckpointCache for RedisCheckpointCache {
    async fn get_many(&self, keys: &[String]) -> HashMap<String, TypedPayload> {
        let mut found = HashMap::new();
        if keys.is_empty() {
            return found;
        }
        if self.is_closed() {
            self.miss(keys.len());
            return found;
        }
        let deadline = self.deadline();
        self.settle(deadline).await;
        let redis_keys: Vec<String> = keys.iter().map(|k| self.layout.redis_key(k)).collect();
        let groups = self.mget_groups(&redis_keys);
        // One MGET per group, pipelined; a group that fails leaves its keys unanswered (misses).
        let pipeline = Pipeline::from(self.client());
        for group in &groups {
            let group_keys: Vec<String> = group.iter().map(|&i| redis_keys[i].clone()).collect();
            let _: std::result::Result<(), _> = pipeline.mget(group_keys).await;
        }
        let mut values: Vec<Option<Value>> = vec![None; keys.len()];
        let mut unanswered = 0usize;
        let mut failure: Option<String> = None;
        // fred answers a pipeline that failed as a whole with a single error: the groups without
        // a reply of their own are unanswered too.
        let mut replies = match self
            .bounded_until(deadline, async { Ok(pipeline.try_all::<Value>().await) })
            .await
        {
            Ok(replies) => replies.into_iter(),
            Err(e) => vec![Err(e)].into_iter(),
        };
        for group in &groups {
            match replies.next().unwrap_or_else(|| {
                Err(fred::error::Error::new(
                    fred::error::ErrorKind::Unknown,
                    "no reply for this slot's MGET",
                ))
            }) {
                Ok(Value::Array(group_values)) if group_values.len() == group.len() => {
                    for (&i, v) in group.iter().zip(group_values) {
                        values[i] = Some(v);
                    }
                }
                Ok(other) => {
                    unanswered += group.len();
                    failure.get_or_insert_with(|| format!("unexpected reply {:?}", other.kind()));
                }
                Err(e) => {
                    unanswered += group.len();
                    failure.get_or_insert_with(|| e.to_string());
                }
            }
        }
        if let Some(error) = failure {
            self.miss(unanswered);
            warn!(
                keys = keys.len(),
                unanswered,
                error,
                "checkpoint cache mget failed; treating the unanswered keys as misses"
            );
        }
        let (mut hits, mut misses) = (0usize, 0usize);
        let mut corrupt: Option<(usize, &str, Error)> = None;
        for (key, value) in keys.iter().zip(values) {
            let Some(value) = value else { continue };
            let decoded = match value {
                Value::Null => {
                    misses += 1;
                    continue;
                }
                other => match other.into_bytes() {
                    Some(raw) => decode(raw),
                    None => Err(Error::corrupt("value", "not a string value")),
                },
            };
            match decoded {
                Ok(entry) => {
                    hits += 1;
                    found.insert(key.clone(), entry);
                }
                Err(e) => {
                    misses += 1;
                    match corrupt.as_mut() {
                        Some((n, _, _)) => *n += 1,
                        None => corrupt = Some((1, key.as_str(), e)),
                    }
                }
            }
        }
        self.hits.fetch_add(hits as u64, Ordering::Relaxed);
        self.miss(misses);
        if let Some((count, first_key, error)) = corrupt {
            warn!(
                corrupt = count,
                first_key,
                error = %error,
                "checkpoint cache value undecodable; treating as miss"
            );
        }
        found
    }

    async fn set_many(&self, entries: Vec<(String, TypedPayload)>) {
        if entries.is_empty() || self.is_closed() {
            return;
        }
        let deadline = self.deadline();
        self.settle(deadline).await;
        let expire = self.expiration_seconds.map(Expiration::EX);
        let pipeline = Pipeline::from(self.client());
        let total = entries.len();
        for (key, entry) in entries {
            // Queuing only buffers the command in memory; errors surface from `all`.
            let _: std::result::Result<(), _> = pipeline
                .set(
                    self.layout.redis_key(&key),
                    encode(&entry),
                    expire.clone(),
                    None,
                    false,
                )
                .await;
        }
        if let Err(e) = self.bounded_until(deadline, pipeline.all::<Value>()).await {
            warn!(entries = total, error = %e, "checkpoint cache write failed; skipping");
        }
    }

    async fn delete_thread(&self, key_prefix: &str, thread_id: &str) {
        if self.is_closed() {
            return;
        }
        let stem = thread_key_stem(key_prefix, thread_id);
        if let Err(e) = self.purge(&stem).await {
            warn!(
                stem,
                error = %e,
                "checkpoint cache thread purge failed; residual entries expire via TTL"
            );
        }
    }

    fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: 0,
            entries: 0,
        }
    }

    async fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // QUIT may fail when Redis is down; the client stops either way.
        let _ = self.pool.quit().await;
    }
}

#[cfg(test)]
mod tests {
    use super::scan_pattern_for_stem;

    #[test]
    fn scan_pattern_escapes_glob_characters() {
        assert_eq!(scan_pattern_for_stem("p:t1:"), "p:t1:*");
        assert_eq!(
            scan_pattern_for_stem("a*b?[c]\\:t:"),
            "a\\*b\\?\\[c\\]\\\\:t:*"
        );
    }
}
