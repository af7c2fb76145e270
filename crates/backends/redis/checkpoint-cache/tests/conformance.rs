//! The `CheckpointCache` conformance suite on Redis (the shared test server, TTL 0).

use std::sync::Arc;
use std::time::Duration;

use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::checkpoint_cache::{CheckpointCacheFixture, CheckpointCacheSetup};
use switchyard_conformance::harness::redis_url;

async fn cache(_: CheckpointCacheSetup) -> switchyard_core::Result<CheckpointCacheFixture> {
    let options = RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        // The suite checks what the cache keeps, not how fast a loaded test machine answers: a
        // deadline that a busy CI core can miss would turn hits into misses.
        call_timeout: Duration::from_secs(5),
        ..RedisCheckpointCacheOptions::default()
    };
    let cache = RedisCheckpointCache::connect(&redis_url(), options).await?;
    assert!(
        cache.wait_connected(Duration::from_secs(10)).await,
        "the test Redis did not accept connections within 10 s"
    );
    Ok(CheckpointCacheFixture::new(Arc::new(cache)))
}

switchyard_conformance::checkpoint_cache_suite!(cache);
