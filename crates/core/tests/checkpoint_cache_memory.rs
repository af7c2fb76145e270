//! The `CheckpointCache` conformance suite on the in-memory LRU.

use std::sync::Arc;

use switchyard_conformance::checkpoint_cache::{CheckpointCacheFixture, CheckpointCacheSetup};
use switchyard_core::Result;
use switchyard_core::cache::MemoryCheckpointCache;

async fn cache(_: CheckpointCacheSetup) -> Result<CheckpointCacheFixture> {
    let cache = MemoryCheckpointCache::with_capacity(20_000);
    Ok(CheckpointCacheFixture::new(Arc::new(cache)))
}

switchyard_conformance::checkpoint_cache_suite!(cache);
