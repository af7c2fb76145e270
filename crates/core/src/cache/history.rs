//! The typed layer over the port: a [`CheckpointCache`] plus an [`EntrySerializer`] (ADR 0210).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::warn;

use super::{CacheStats, CheckpointCache, EntrySerializer, HistoryEntry, MsgpackSerializer};

/// A checkpoint cache of decoded [`HistoryEntry`] values: the port stores tag and payload bytes,
/// this layer encodes entries with its serializer on the way in and decodes them by their tag on
/// the way out. Cheap to clone (every clone shares the port and the counters).
///
/// * An entry the serializer cannot encode is skipped (one warning per call).
/// * A stored entry it cannot decode is a miss: [`stats`](Self::stats) moves it from the port's
///   hits to its misses, so `hits + misses` still equals the keys requested through this layer
///   (exact when this layer is the port's only reader).
#[derive(Clone)]
pub struct HistoryCache {
    port: Arc<dyn CheckpointCache>,
    serializer: Arc<dyn EntrySerializer>,
    undecodable: Arc<AtomicU64>,
}

impl fmt::Debug for HistoryCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistoryCache")
            .field("port", &self.port)
            .field("serializer", &self.serializer)
            .field("stats", &self.stats())
            .finish()
    }
}

impl HistoryCache {
    /// `port` with [`MsgpackSerializer`], what deer-flow's workers write.
    pub fn new(port: Arc<dyn CheckpointCache>) -> Self {
        Self::with_serializer(port, Arc::new(MsgpackSerializer))
    }

    /// `port` with `serializer`.
    pub fn with_serializer(
        port: Arc<dyn CheckpointCache>,
        serializer: Arc<dyn EntrySerializer>,
    ) -> Self {
        HistoryCache {
            port,
            serializer,
            undecodable: Arc::default(),
        }
    }

    /// The port underneath (tag and payload bytes).
    pub fn port(&self) -> &Arc<dyn CheckpointCache> {
        &self.port
    }

    /// The serializer.
    pub fn serializer(&self) -> &Arc<dyn EntrySerializer> {
        &self.serializer
    }

    /// Looks up `keys` and returns the hits that decode.
    pub async fn get_many(&self, keys: &[String]) -> HashMap<String, HistoryEntry> {
        let stored = self.port.get_many(keys).await;
        let mut found = HashMap::with_capacity(stored.len());
        let mut bad: Vec<String> = Vec::new();
        let mut first_error: Option<crate::Error> = None;
        for (key, typed) in stored {
            match self.serializer.loads_typed(&typed) {
                Ok(entry) => {
                    found.insert(key, entry);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    bad.push(key);
                }
            }
        }
        if let Some(error) = first_error {
            // The port counted one hit per occurrence of a key in the request.
            let set: HashSet<&str> = bad.iter().map(String::as_str).collect();
            let count = keys.iter().filter(|k| set.contains(k.as_str())).count();
            self.undecodable.fetch_add(count as u64, Ordering::Relaxed);
            warn!(
                undecodable = count,
                first_key = bad.first().map(String::as_str).unwrap_or_default(),
                error = %error,
                "checkpoint cache value undecodable; treating as miss"
            );
        }
        found
    }

    /// Encodes and stores `entries` in order; a key given twice keeps the later entry.
    pub async fn set_many(&self, entries: Vec<(String, HistoryEntry)>) {
        if entries.is_empty() {
            return;
        }
        let mut encoded = Vec::with_capacity(entries.len());
        let mut unencodable: Option<(usize, String, crate::Error)> = None;
        for (key, entry) in entries {
            match self.serializer.dumps_typed(&entry) {
                Ok(typed) => encoded.push((key, typed)),
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
        self.port.set_many(encoded).await;
    }

    /// Removes every entry of `thread_id` under `key_prefix` (guarantee `cache.exact_purge` of the
    /// port).
    pub async fn delete_thread(&self, key_prefix: &str, thread_id: &str) {
        self.port.delete_thread(key_prefix, thread_id).await;
    }

    /// The port's counters, with undecodable hits counted as misses.
    pub fn stats(&self) -> CacheStats {
        let port = self.port.stats();
        let undecodable = self.undecodable.load(Ordering::Relaxed);
        let moved = undecodable.min(port.hits);
        CacheStats {
            hits: port.hits - moved,
            misses: port.misses.saturating_add(moved),
            ..port
        }
    }

    /// False when the port stores nothing.
    pub fn enabled(&self) -> bool {
        self.port.enabled()
    }

    /// Closes the port.
    pub async fn close(&self) {
        self.port.close().await;
    }
}

#[cfg(test)]
mod tests {
    use rmpv::Value;

    use super::*;
    use crate::cache::{JsonSerializer, MemoryCheckpointCache, TypedPayload};

    #[tokio::test]
    async fn entries_round_trip_and_undecodable_ones_are_misses() {
        let port = Arc::new(MemoryCheckpointCache::with_capacity(16));
        let cache = HistoryCache::new(port.clone());
        let entry = HistoryEntry::with_seed(
            vec![Value::Binary(vec![0, 1]), Value::Ext(3, vec![9; 20])],
            Value::Nil,
        );
        cache.set_many(vec![("a".into(), entry.clone())]).await;
        port.set_many(vec![(
            "bad".into(),
            TypedPayload::new("msgpack", vec![0xc1]).expect("tag"),
        )])
        .await;
        let keys = ["a", "bad", "bad", "none"].map(String::from);
        let found = cache.get_many(&keys).await;
        assert_eq!(found.len(), 1);
        assert_eq!(found["a"], entry);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (1, 3));
        // The JSON serializer skips what JSON cannot hold, and still reads msgpack entries.
        let json = HistoryCache::with_serializer(port, Arc::new(JsonSerializer));
        json.set_many(vec![("b".into(), entry.clone())]).await;
        assert!(json.get_many(&["b".to_string()]).await.is_empty());
        assert_eq!(json.get_many(&["a".to_string()]).await["a"], entry);
    }
}
