use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fred::bytes::Bytes;
use fred::clients::{Pipeline, Pool};
use fred::prelude::{ClientLike, Expiration, KeysInterface, Options, Value};
use fred::types::Key;
use switchyard_core::cache::{
    CacheStats, CheckpointCache, EntrySerializer, HistoryEntry, JsonSerializer, thread_key_stem,
};
use switchyard_core::{Error, Result};
use tracing::warn;

use switchyard_redis_support::connect::{ConnectionPolicy, Reconnect, build_error};
use switchyard_redis_support::scan::Scan;
use switchyard_redis_support::url::{RedisUrl, Topology};

use crate::keys::{CacheKeyLayout, CacheKeyLayoutExt};

/// Separates the serializer's tag from the payload in a stored value.
const TAG_SEPARATOR: u8 = 0;

/// How a [`RedisCheckpointCache`] talks to Redis. [`Default`] gives deer-flow's defaults.
#[derive(Clone, Debug)]
pub struct RedisCheckpointCacheOptions {
    /// Seconds an entry lives; 0 stores entries without expiry (`SET` without `EX`, which also
    /// clears a TTL left by an earlier write). Default 86,400 (one day), a leak safety net.
    pub ttl_seconds: u64,
    /// Connections in the pool (each auto-pipelines concurrent calls). Default 2.
    pub pool_size: usize,
    /// Longest wait for one command or pipeline before the call degrades. Default 2 s.
    pub command_timeout: Duration,
    /// Longest wait in [`RedisCheckpointCache::connect`] for the first connection; if Redis is not
    /// up by then the cache is returned anyway and serves misses until it is. Default 5 s.
    pub connect_timeout: Duration,
    /// Upper bound of the exponential reconnect delay (the first retry comes after 100 ms, and
    /// retries never stop). Default 2 s.
    pub max_reconnect_delay: Duration,
    /// Encodes entries into a tag plus payload. Default [`JsonSerializer`].
    pub serializer: Arc<dyn EntrySerializer>,
    /// The key layout; `None` (the default) picks it from the URL: [`CacheKeyLayout::Cluster`]
    /// for `redis-cluster://` and `rediss-cluster://`, else [`CacheKeyLayout::Seed`].
    pub layout: Option<CacheKeyLayout>,
}

impl Default for RedisCheckpointCacheOptions {
    fn default() -> Self {
        RedisCheckpointCacheOptions {
            ttl_seconds: 86_400,
            pool_size: 2,
            command_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
            max_reconnect_delay: Duration::from_secs(2),
            serializer: Arc::new(JsonSerializer),
            layout: None,
        }
    }
}

/// The checkpoint cache on Redis. See the crate docs for commands, value format and failure
/// policy.
pub struct RedisCheckpointCache {
    pool: Pool,
    // Per-command options: fail fast while disconnected, bounded wait otherwise.
    command_options: Options,
    expiration_seconds: Option<i64>,
    serializer: Arc<dyn EntrySerializer>,
    layout: CacheKeyLayout,
    hits: AtomicU64,
    misses: AtomicU64,
    closed: AtomicBool,
}

impl fmt::Debug for RedisCheckpointCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCheckpointCache")
            .field("pool_size", &self.pool.size())
            .field("expiration_seconds", &self.expiration_seconds)
            .field("serializer", &self.serializer)
            .field("layout", &self.layout)
            .field("stats", &self.stats())
            .finish()
    }
}

impl RedisCheckpointCache {
    /// Connects to the Redis at `url`: `redis://`, `rediss://`, `redis-sentinel://`,
    /// `rediss-sentinel://`, or a Redis Cluster as `redis-cluster://host:port?node=host:port&…`
    /// (also `rediss-cluster://`), which selects fred's cluster client and, unless
    /// [`RedisCheckpointCacheOptions::layout`] says otherwise, the cluster key layout.
    ///
    /// Fails only on configuration errors ([`Error::Config`]): an unreachable Redis is not an
    /// error for a cache, so the cache is returned and degrades to misses until Redis answers.
    pub async fn connect(url: &str, options: RedisCheckpointCacheOptions) -> Result<Self> {
        let parsed = RedisUrl::parse(
            url,
            "redis_url",
            &[Topology::Standalone, Topology::Sentinel, Topology::Cluster],
        )?;
        if options.pool_size == 0 {
            return Err(Error::config("pool_size", "must be at least 1"));
        }
        if options.command_timeout.is_zero() {
            return Err(Error::config(
                "command_timeout",
                "must be positive; a cache call must never hang",
            ));
        }
        let expiration_seconds = match options.ttl_seconds {
            0 => None,
            ttl => Some(
                i64::try_from(ttl)
                    .map_err(|_| Error::config("ttl_seconds", "is larger than Redis accepts"))?,
            ),
        };
        let command_timeout = options.command_timeout;
        let policy = ConnectionPolicy {
            command_timeout,
            connect_timeout: options.connect_timeout.min(command_timeout * 2),
            internal_command_timeout: command_timeout,
            // Cache commands are never re-sent after a reconnect: a miss is cheaper.
            max_command_attempts: 1,
            unresponsive: Some((
                command_timeout * 2,
                (command_timeout / 2).max(Duration::from_millis(50)),
            )),
            // Never give up, so Redis coming back is always noticed.
            reconnect: Reconnect {
                max_attempts: 0,
                min_delay: Duration::from_millis(100),
                max_delay: options.max_reconnect_delay.max(Duration::from_millis(100)),
            },
            // Keep reconnecting in the background when the first connection fails too.
            fail_fast: false,
        };
        let pool = policy
            .builder(&parsed)
            .build_pool(options.pool_size)
            .map_err(|e| build_error("redis_url", &parsed, &e))?;
        // The connection tasks run until `close`; their handles are not needed.
        drop(pool.connect_pool());
        match tokio::time::timeout(options.connect_timeout, pool.wait_for_connect()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                warn!(error = %e, "checkpoint cache: Redis not reachable yet; serving misses until it is")
            }
            Err(_) => warn!(
                timeout_ms = options.connect_timeout.as_millis() as u64,
                "checkpoint cache: Redis not reachable yet; serving misses until it is"
            ),
        }
        Ok(RedisCheckpointCache {
            pool,
            command_options: Options {
                fail_fast: true,
                timeout: Some(command_timeout),
                max_attempts: Some(1),
                ..Options::default()
            },
            expiration_seconds,
            serializer: options.serializer,
            layout: options
                .layout
                .unwrap_or_else(|| CacheKeyLayout::for_url(url)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn client(&self) -> fred::clients::WithOptions<fred::clients::Client> {
        self.pool.next().with_options(&self.command_options)
    }

    fn miss(&self, n: usize) {
        self.misses.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `tag NUL payload`.
    fn encode(&self, entry: &HistoryEntry) -> Result<Bytes> {
        let typed = self.serializer.dumps_typed(entry)?;
        if typed.tag.as_bytes().contains(&TAG_SEPARATOR) {
            return Err(Error::invalid("tag", "contains a NUL byte"));
        }
        let mut value = Vec::with_capacity(typed.tag.len() + 1 + typed.payload.len());
        value.extend_from_slice(typed.tag.as_bytes());
        value.push(TAG_SEPARATOR);
        value.extend_from_slice(&typed.payload);
        Ok(Bytes::from(value))
    }

    /// Splits on the first NUL only (payloads may contain NULs) and decodes by the tag.
    fn decode(&self, raw: &[u8]) -> Result<HistoryEntry> {
        let split = raw
            .iter()
            .position(|b| *b == TAG_SEPARATOR)
            .ok_or_else(|| Error::corrupt("value", "no NUL between tag and payload"))?;
        let tag = std::str::from_utf8(&raw[..split])
            .map_err(|_| Error::corrupt("value", "the tag is not UTF-8"))?;
        self.serializer.loads_typed(tag, &raw[split + 1..])
    }

    /// Unlinks every stored entry whose cache key starts with `stem`. SCAN covers one node, so on
    /// a cluster every primary is scanned; matches are checked against the layout before they are
    /// deleted, and deleted with one `UNLINK` per slot.
    async fn purge(&self, stem: &str) -> std::result::Result<u64, fred::error::Error> {
        let pattern = self.layout.purge_pattern(stem);
        let base = self.pool.next();
        let mut scan = Scan::new(base, &self.command_options, &pattern)?;
        let mut removed = 0u64;
        while let Some(keys) = scan.next_page().await? {
            let doomed: Vec<Key> = keys
                .into_iter()
                .filter(|k| {
                    self.layout == CacheKeyLayout::Seed
                        || self
                            .layout
                            .cache_key(k)
                            .is_some_and(|c| c.starts_with(stem))
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
            return client.unlink::<u64, _>(keys).await;
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
        for reply in pipeline.try_all::<Value>().await {
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

/// The `SCAN MATCH` pattern of a thread stem: the stem with the glob characters `* ? [ ] \`
/// escaped, then `*`. deer-flow used the stem unescaped, so a prefix containing glob characters
/// purged other prefixes' entries (ADR 0053).
pub fn scan_pattern_for_stem(stem: &str) -> String {
    switchyard_redis_support::scan::pattern_for_stem(stem)
}

#[async_trait]
impl CheckpointCache for RedisCheckpointCache {
    async fn get_many(&self, keys: &[String]) -> HashMap<String, HistoryEntry> {
        let mut found = HashMap::new();
        if keys.is_empty() {
            return found;
        }
        if self.is_closed() {
            self.miss(keys.len());
            return found;
        }
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
        let mut replies = pipeline.try_all::<Value>().await.into_iter();
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
                other => match other.as_bytes() {
                    Some(raw) => self.decode(raw),
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

    async fn set_many(&self, entries: Vec<(String, HistoryEntry)>) {
        if entries.is_empty() || self.is_closed() {
            return;
        }
        let expire = self.expiration_seconds.map(Expiration::EX);
        let pipeline = Pipeline::from(self.client());
        let total = entries.len();
        let mut unencodable: Option<(usize, String, Error)> = None;
        let mut queued = 0usize;
        for (key, entry) in entries {
            match self.encode(&entry) {
                Ok(value) => {
                    // Queuing only buffers the command in memory; errors surface from `all`.
                    let _: std::result::Result<(), _> = pipeline
                        .set(
                            self.layout.redis_key(&key),
                            value,
                            expire.clone(),
                            None,
                            false,
                        )
                        .await;
                    queued += 1;
                }
                Err(e) => match unencodable.as_mut() {
                    Some((n, _, _)) => *n += 1,
                    None => unencodable = Some((1, key, e)),
                },
            }
        }
        if let Some((count, first_key, error)) = unencodable {
            warn!(
                skipped = count,
                first_key,
                error = %error,
                "checkpoint cache write failed for unencodable entries; skipping them"
            );
        }
        if queued == 0 {
            return;
        }
        if let Err(e) = pipeline.all::<Value>().await {
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
