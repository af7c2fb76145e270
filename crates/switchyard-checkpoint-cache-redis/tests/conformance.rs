//! The `CheckpointCache` conformance suite on Redis (the shared test server, TTL 0).

use std::sync::Arc;

use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::redis_url;

switchyard_conformance::checkpoint_cache_suite!(|| async {
    let options = RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        ..RedisCheckpointCacheOptions::default()
    };
    Arc::new(
        RedisCheckpointCache::connect(&redis_url(), options)
            .await
            .expect("connect"),
    )
});
