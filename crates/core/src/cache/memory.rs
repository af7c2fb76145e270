//! The process-local LRU checkpoint cache (deer-flow `memory.py`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{CacheStats, CheckpointCache, TypedPayload, is_thread_entry_key, thread_key_stem};
use crate::{Error, Result};

/// deer-flow's default capacity (`max_entries=128`).
pub const DEFAULT_MAX_ENTRIES: usize = 128;

/// A process-local LRU cache of at most `max_entries` entries.
///
/// * A read moves the entry to the most-recently-used end; a write stores the entry there and
///   then evicts least-recently-used entries while the cache is over capacity, one insert at a
///   time, so a batch larger than the capacity evicts its own early members.
/// * Capacity 0 disables the cache: writes are ignored and every read is a miss
///   ([`CheckpointCache::enabled`] is false).
/// * Entries are immutable bytes ([`TypedPayload`]), so what was passed in or handed out can
///   never change the cache.
/// * [`CheckpointCache::close`] drops every entry and keeps the counters.
#[derive(Debug)]
pub struct MemoryCheckpointCache {
    max_entries: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    // key -> (recency tick, entry); `order` maps ticks back to keys, oldest first.
    entries: HashMap<String, (u64, TypedPayload)>,
    order: BTreeMap<u64, String>,
    tick: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
    closed: bool,
}

impl State {
    fn touch(&mut self, key: &str) -> Option<TypedPayload> {
        self.tick += 1;
        let tick = self.tick;
        let (old, entry) = self.entries.get_mut(key)?;
        let previous = std::mem::replace(old, tick);
        let entry = entry.clone();
        if let Some(k) = self.order.remove(&previous) {
            self.order.insert(tick, k);
        }
        Some(entry)
    }

    fn insert(&mut self, key: String, entry: TypedPayload) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((previous, _)) = self.entries.insert(key.clone(), (tick, entry)) {
            self.order.remove(&previous);
        }
        self.order.insert(tick, key);
    }

    fn remove(&mut self, key: &str) {
        if let Some((tick, _)) = self.entries.remove(key) {
            self.order.remove(&tick);
        }
    }
}

impl MemoryCheckpointCache {
    /// A cache of `max_entries` entries, as deer-flow configures it: 0 disables the cache, a
    /// negative value is refused with [`Error::InvalidInput`].
    pub fn new(max_entries: i64) -> Result<Self> {
        let max_entries = usize::try_from(max_entries)
            .map_err(|_| Error::invalid("max_entries", "must be 0 or more"))?;
        Ok(Self::with_capacity(max_entries))
    }

    /// A cache of `max_entries` entries (0 disables it).
    pub fn with_capacity(max_entries: usize) -> Self {
        MemoryCheckpointCache {
            max_entries,
            state: Mutex::new(State::default()),
        }
    }

    /// The capacity.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    // Every critical section is short and panic-free, so a poisoned lock still holds
    // consistent data.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryCheckpointCache {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_MAX_ENTRIES)
    }
}

#[async_trait]
impl CheckpointCache for MemoryCheckpointCache {
    async fn get_many(&self, keys: &[String]) -> HashMap<String, TypedPayload> {
        let mut found = HashMap::new();
        if keys.is_empty() {
            return found;
        }
        let mut state = self.lock();
        for key in keys {
            let hit = if state.closed { None } else { state.touch(key) };
            match hit {
                Some(entry) => {
                    state.hits += 1;
                    found.insert(key.clone(), entry);
                }
                None => state.misses += 1,
            }
        }
        found
    }

    async fn set_many(&self, entries: Vec<(String, TypedPayload)>) {
        if self.max_entries == 0 || entries.is_empty() {
            return;
        }
        let mut state = self.lock();
        if state.closed {
            return;
        }
        for (key, entry) in entries {
            state.insert(key, entry);
            while state.entries.len() > self.max_entries {
                let Some((_, oldest)) = state.order.pop_first() else {
                    break;
                };
                state.entries.remove(&oldest);
                state.evictions += 1;
            }
        }
    }

    async fn delete_thread(&self, key_prefix: &str, thread_id: &str) {
        let stem = thread_key_stem(key_prefix, thread_id);
        let mut state = self.lock();
        let doomed: Vec<String> = state
            .entries
            .keys()
            .filter(|k| is_thread_entry_key(k, &stem))
            .cloned()
            .collect();
        for key in doomed {
            state.remove(&key);
        }
    }

    fn stats(&self) -> CacheStats {
        let state = self.lock();
        CacheStats {
            hits: state.hits,
            misses: state.misses,
            evictions: state.evictions,
            entries: state.entries.len() as u64,
        }
    }

    fn enabled(&self) -> bool {
        self.max_entries > 0
    }

    async fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.entries.clear();
        state.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> Vec<String> {
        ks.iter().map(|k| k.to_string()).collect()
    }

    fn entry(n: i64) -> TypedPayload {
        TypedPayload::new("json", n.to_string()).expect("tag")
    }

    #[tokio::test]
    async fn lru_evicts_the_least_recently_used_and_counts() {
        let cache = MemoryCheckpointCache::with_capacity(2);
        cache
            .set_many(vec![("a".into(), entry(1)), ("b".into(), entry(2))])
            .await;
        assert_eq!(cache.get_many(&keys(&["a"])).await.len(), 1); // a is now most recent
        cache.set_many(vec![("c".into(), entry(3))]).await;
        let found = cache.get_many(&keys(&["a", "b", "c"])).await;
        assert!(found.contains_key("a") && found.contains_key("c"));
        assert!(!found.contains_key("b"), "b was least recently used");
        let stats = cache.stats();
        assert_eq!((stats.evictions, stats.entries), (1, 2));
    }

    #[tokio::test]
    async fn a_batch_larger_than_capacity_evicts_its_own_early_members() {
        let cache = MemoryCheckpointCache::with_capacity(2);
        cache
            .set_many((0..5).map(|i| (format!("k{i}"), entry(i))).collect())
            .await;
        let found = cache.get_many(&keys(&["k0", "k1", "k2", "k3", "k4"])).await;
        let mut hit: Vec<_> = found.keys().cloned().collect();
        hit.sort();
        assert_eq!(hit, ["k3", "k4"]);
        assert_eq!(cache.stats().evictions, 3);
    }

    #[tokio::test]
    async fn overwriting_a_key_does_not_evict() {
        let cache = MemoryCheckpointCache::with_capacity(2);
        cache.set_many(vec![("a".into(), entry(1))]).await;
        cache.set_many(vec![("a".into(), entry(2))]).await;
        assert_eq!(cache.stats().evictions, 0);
        assert_eq!(cache.stats().entries, 1);
        assert_eq!(cache.get_many(&keys(&["a"])).await["a"], entry(2));
    }

    #[tokio::test]
    async fn zero_capacity_disables() {
        let cache = MemoryCheckpointCache::new(0).expect("0 is allowed");
        assert!(!cache.enabled());
        cache.set_many(vec![("a".into(), entry(1))]).await;
        assert!(cache.get_many(&keys(&["a"])).await.is_empty());
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.misses, stats.evictions), (0, 1, 0));
    }

    #[test]
    fn negative_capacity_is_refused() {
        assert!(matches!(
            MemoryCheckpointCache::new(-1),
            Err(Error::InvalidInput { ref field, .. }) if field == "max_entries"
        ));
        assert_eq!(MemoryCheckpointCache::default().max_entries(), 128);
    }

    #[tokio::test]
    async fn purge_is_not_an_eviction_and_close_clears_but_keeps_counters() {
        let cache = MemoryCheckpointCache::with_capacity(8);
        let k1 = super::super::make_history_key("p", "t1", "", "c", "x");
        let k2 = super::super::make_history_key("p", "t2", "", "c", "x");
        cache
            .set_many(vec![(k1.clone(), entry(1)), (k2.clone(), entry(2))])
            .await;
        cache.delete_thread("p", "t1").await;
        assert_eq!(cache.stats().entries, 1);
        assert_eq!(cache.stats().evictions, 0);
        assert_eq!(cache.get_many(std::slice::from_ref(&k2)).await.len(), 1);
        cache.close().await;
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.hits), (0, 1));
        cache.set_many(vec![(k2.clone(), entry(2))]).await;
        assert!(cache.get_many(&[k2]).await.is_empty());
    }
}
