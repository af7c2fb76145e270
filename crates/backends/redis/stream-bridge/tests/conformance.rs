//! The stream bridge conformance suite on Redis Streams (the harness's shared server).

use std::sync::Arc;

use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_conformance::stream_bridge::{StreamBridgeFixture, StreamBridgeSetup};
use switchyard_stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};

async fn bridge(setup: StreamBridgeSetup) -> switchyard_core::Result<StreamBridgeFixture> {
    let mut config = RedisStreamBridgeConfig::new(redis_url());
    config.key_prefix = unique_prefix("bridge");
    config.queue_maxsize = setup.retention;
    config.readers = 2;
    let bridge = RedisStreamBridge::connect(config).await?;
    Ok(StreamBridgeFixture::new(Arc::new(bridge)))
}

switchyard_conformance::stream_bridge_suite!(bridge);
