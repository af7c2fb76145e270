//! The `CheckpointCache` conformance suite on the harness's Redis Cluster (3 masters, 3 replicas;
//! cluster key layout, TTL 0). Every case uses its own random prefix.

use std::sync::Arc;

use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::redis_cluster_url;

switchyard_conformance::checkpoint_cache_suite!(|| async {
    let options = RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        ..RedisCheckpointCacheOptions::default()
    };
    Arc::new(
        RedisCheckpointCache::connect(&redis_cluster_url(), options)
            .await
            .expect("connect"),
    )
});
