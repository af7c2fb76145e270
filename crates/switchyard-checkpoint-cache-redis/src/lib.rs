//! # switchyard-checkpoint-cache-redis
//!
//! [`CheckpointCache`](switchyard_core::cache::CheckpointCache) on Redis: a cache shared by every
//! worker of a deployment, byte-compatible with deer-flow's `RedisCheckpointHistoryCache`.
//!
//! * `get_many` is one `MGET`; `set_many` is one non-transactional pipeline of `SET key value [EX
//!   ttl]` (no `EX` when the TTL is 0); `delete_thread` is `SCAN cursor MATCH <stem>* COUNT 500`
//!   with an `UNLINK` per non-empty page.
//! * A stored value is the serializer's tag, one NUL byte, then the payload; reads split on the
//!   first NUL only, so payloads may contain NULs.
//! * Failures never reach the caller (ADR 0052): a Redis error during a read counts the keys as
//!   misses, a failed write is skipped, a failed purge leaves the rest to the TTL, and a value that
//!   cannot be decoded is a miss. Each degraded call logs one `tracing` warning. Commands fail fast
//!   while the connection is down and fred reconnects in the background, so hits return once Redis
//!   is back without any action by the caller.
//!
//! ## Redis Cluster (ADR 0095)
//!
//! A `redis-cluster://host:port?node=host:port&…` (or `rediss-cluster://`) URL selects fred's
//! cluster client and the [`CacheKeyLayout::Cluster`] layout: every stored key is the cache key
//! behind a hash tag naming its thread (`{c:<thread>}<cache key>`), so one thread's entries share
//! a slot. On a cluster:
//!
//! * `get_many` with keys of several threads sends one `MGET` per slot, pipelined; a slot whose
//!   node fails counts only its keys as misses.
//! * `set_many` stays one pipeline of single-key `SET`s, each routed to its slot.
//! * `delete_thread` scans **every primary** (`SCAN` covers one node) and unlinks per slot; a
//!   failover during a purge can leave residual entries to the TTL, as any failed purge does.
//!
//! Standalone and sentinel URLs keep the seed layout (keys used verbatim), byte-compatible with
//! deer-flow.

mod cache;
mod keys;

pub use cache::{RedisCheckpointCache, RedisCheckpointCacheOptions, scan_pattern_for_stem};
pub use keys::{CacheKeyLayout, CacheKeyLayoutExt, owner_tag};
