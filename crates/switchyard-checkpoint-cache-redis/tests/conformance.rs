//! The `CheckpointCache` conformance suite on Redis (the shared test server, TTL 0).

use std::sync::Arc;

use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::checkpoint_cache::{CheckpointCacheFixture, CheckpointCacheSetup};
use switchyard_conformance::harness::redis_url;

async fn cache(_: CheckpointCacheSetup) -> switchyard_core::Result<CheckpointCacheFixture> {
    let options = RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        ..RedisCheckpointCacheOptions::default()
    };
    let cache = RedisCheckpointCache::connect(&redis_url(), options).await?;
    Ok(CheckpointCacheFixture::new(Arc::new(cache)))
}

switchyard_conformance::checkpoint_cache_suite!(cache);
