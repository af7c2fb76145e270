//! The `CheckpointCache` conformance suite on the in-memory LRU.

use std::sync::Arc;

use switchyard_core::cache::MemoryCheckpointCache;

switchyard_conformance::checkpoint_cache_suite!(|| async {
    Arc::new(MemoryCheckpointCache::with_capacity(20_000))
});
