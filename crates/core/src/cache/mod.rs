//! The checkpoint cache port: a shared cache of immutable checkpoint-history entries whose
//! failures never reach the caller.
//!
//! Entries memoise a channel's history at one checkpoint (deer-flow's
//! `runtime/checkpoint_cache/`). Checkpoint lineage is append-only, so an entry never changes once
//! written: there is no invalidation, only a thread-scoped purge when a thread's checkpoints are
//! deleted. A cache is a performance device: an outage costs hits, never availability, which is
//! why every method of [`CheckpointCache`] is infallible.
//!
//! * [`CheckpointCache`]: the port, with its contract. It stores [`TypedPayload`]s — a
//!   serializer's type tag and payload bytes — so an entry a Python worker wrote is read and
//!   written back byte for byte (ADR 0210).
//! * [`HistoryCache`]: the typed layer above the port, with an [`EntrySerializer`]:
//!   [`MsgpackSerializer`] (the default, what LangGraph's `JsonPlusSerializer` writes for
//!   deer-flow) or [`JsonSerializer`] (ADR 0211). Entries are [`HistoryEntry`] values of msgpack
//!   [`rmpv::Value`]s.
//! * [`make_history_key`], [`thread_key_stem`], [`is_thread_entry_key`],
//!   [`checkpoint_cache_key_prefix`]: deer-flow's key layout, thread ids raw (ADR 0212).
//! * [`MemoryCheckpointCache`]: the process-local LRU.

mod entry;
mod history;
mod keys;
mod memory;
mod serializer;

use std::collections::HashMap;
use std::fmt;

use async_trait::async_trait;
use serde::Serialize;

pub use entry::{EntrySerializer, HistoryEntry, TypedPayload, value_from_json, value_to_json};
pub use history::HistoryCache;
pub use keys::{
    CACHE_FORMAT_VERSION, DatabaseIdentity, ENTRY_HASH_LEN, checkpoint_cache_key_prefix,
    database_hash, is_thread_entry_key, make_history_key, thread_key_stem,
};
pub use memory::MemoryCheckpointCache;
/// The msgpack value model of [`HistoryEntry`] (re-exported so callers use the same version).
pub use rmpv;
pub use serializer::{JSON_TAG, JsonSerializer, MSGPACK_TAG, MsgpackSerializer};

/// Counters of one cache instance (per process; a shared Redis cache counts only this process's
/// calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct CacheStats {
    /// Requested keys that were found (and decoded).
    pub hits: u64,
    /// Requested keys that were absent, undecodable, or not looked up because the backend failed.
    pub misses: u64,
    /// Entries dropped to make room (LRU caches only; purges are not evictions).
    pub evictions: u64,
    /// Entries held now (process-local caches only; 0 for shared caches).
    pub entries: u64,
}

impl CacheStats {
    /// The four counters in deer-flow's `as_dict()` order: hits, misses, evictions, entries.
    pub fn as_pairs(&self) -> [(&'static str, u64); 4] {
        [
            ("hits", self.hits),
            ("misses", self.misses),
            ("evictions", self.evictions),
            ("entries", self.entries),
        ]
    }
}

/// A cache of immutable checkpoint-history entries, shared by the workers that use one database.
/// Entries are [`TypedPayload`]s (type tag and payload bytes); [`HistoryCache`] encodes and
/// decodes them.
///
/// Object safe: the facade hands out `Arc<dyn CheckpointCache>`.
///
/// # Contract
///
/// Every adapter guarantees the following; the conformance suite
/// (`switchyard_conformance::checkpoint_cache_suite!`) has one case per guarantee.
///
/// 1. **Only hits come back, every key is counted** (`cache.hits_counted`).
///    [`get_many`](Self::get_many) returns exactly the requested keys that were found, each with
///    the entry last stored under it; every requested key adds one to `hits` or one to `misses`, so
///    a key requested twice in one call counts twice.
/// 2. **An empty request is free** (`cache.empty_is_free`). `get_many(&[])` and `set_many(vec![])`
///    return at once, do no I/O and change no counter.
/// 3. **Entries round-trip byte for byte** (`cache.round_trip`). What [`set_many`](Self::set_many)
///    stored comes back with the same tag and the same payload bytes (any bytes: NUL, invalid
///    UTF-8, empty, a megabyte); the adapter never re-encodes them.
/// 4. **Keys are used verbatim** (`cache.verbatim_keys`). Any string is a key; keys are never
///    re-prefixed, and distinct keys never share an entry.
/// 5. **Purges are exact** (`cache.exact_purge`). [`delete_thread`](Self::delete_thread)`(prefix,
///    t)` removes every entry whose key is [`thread_key_stem`]`(prefix, t)` followed by one
///    entry-hash segment ([`is_thread_entry_key`]) and nothing else: thread `t10` survives a purge
///    of `t1`, and so does thread `t1:x` (whose keys start with `t1`'s stem), other prefixes, and
///    keys that are not history keys; glob characters in the prefix or thread id are matched
///    literally (`[ab]` never takes `a` and `b`). A purge is not an eviction.
/// 6. **No expiry unless configured** (`cache.no_expiry_by_default`). A cache configured without a
///    TTL (TTL 0) keeps entries until they are purged or evicted.
/// 7. **Failures never reach the caller** (`cache.failures_are_misses`). No method returns an error
///    or panics. A backend error during a read counts the unanswered keys as misses and returns the
///    hits it has; a failed write is skipped; a failed purge leaves residual entries to the TTL; a
///    stored value that is not an entry (no tag) is a miss. Each degraded call logs one `tracing`
///    warning, never one per key.
/// 8. **Safe to share** (`cache.safe_to_share`). Calls from many tasks at once are safe and the
///    counters stay exact: `hits + misses` equals the number of keys requested.
/// 9. **Close is final and quiet** (`cache.close_is_final`). After [`close`](Self::close) every
///    call still returns (reads are all misses), and the counters recorded before closing are kept.
#[async_trait]
pub trait CheckpointCache: Send + Sync + fmt::Debug {
    /// Looks up `keys` and returns the hits (guarantees `cache.hits_counted`, `cache.empty_is_free`
    /// and `cache.failures_are_misses`).
    async fn get_many(&self, keys: &[String]) -> HashMap<String, TypedPayload>;

    /// Stores `entries` in order; a key given twice keeps the later entry (guarantees
    /// `cache.empty_is_free`, `cache.round_trip` and `cache.failures_are_misses`).
    async fn set_many(&self, entries: Vec<(String, TypedPayload)>);

    /// Removes every entry of `thread_id` under `key_prefix` (guarantee `cache.exact_purge`).
    async fn delete_thread(&self, key_prefix: &str, thread_id: &str);

    /// This instance's counters.
    fn stats(&self) -> CacheStats;

    /// False when the cache stores nothing (a memory cache of capacity 0), so callers can skip
    /// building entries.
    fn enabled(&self) -> bool {
        true
    }

    /// Releases the cache's resources (guarantee `cache.close_is_final`).
    async fn close(&self);
}
