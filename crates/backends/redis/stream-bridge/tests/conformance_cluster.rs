//! The stream bridge conformance suite on the harness Redis Cluster (3 masters, 3 replicas), in
//! the cluster layout with sharded pub/sub wake-ups that a `redis-cluster://` URL selects.

use std::sync::Arc;

use switchyard_conformance::harness::{redis_cluster_url, unique_prefix};
use switchyard_conformance::stream_bridge::{StreamBridgeFixture, StreamBridgeSetup};
use switchyard_stream_bridge_redis::{KeyLayout, RedisStreamBridge, RedisStreamBridgeConfig};

async fn bridge(setup: StreamBridgeSetup) -> switchyard_core::Result<StreamBridgeFixture> {
    let mut config = RedisStreamBridgeConfig::new(redis_cluster_url());
    config.key_prefix = unique_prefix("bridgec");
    config.queue_maxsize = setup.retention;
    let bridge = RedisStreamBridge::connect(config).await?;
    assert_eq!(bridge.layout(), KeyLayout::Cluster);
    Ok(StreamBridgeFixture::new(Arc::new(bridge)))
}

switchyard_conformance::stream_bridge_suite!(bridge);
