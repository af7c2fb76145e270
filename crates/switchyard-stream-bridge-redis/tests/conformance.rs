//! The stream bridge conformance suite on Redis Streams (the harness's shared server).

use std::sync::Arc;

use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_conformance::stream_bridge::Capabilities;
use switchyard_core::StreamBridge;
use switchyard_stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};

async fn bridge(maxsize: usize) -> switchyard_core::Result<Arc<dyn StreamBridge>> {
    let mut config = RedisStreamBridgeConfig::new(redis_url());
    config.key_prefix = unique_prefix("bridge");
    config.queue_maxsize = maxsize;
    config.readers = 2;
    Ok(Arc::new(RedisStreamBridge::connect(config).await?))
}

switchyard_conformance::stream_bridge_suite!(bridge, Capabilities::REDIS_STREAMS);
