//! The stream bridge conformance suite on PostgreSQL, each case in a schema of its own.

use std::sync::Arc;

use switchyard_conformance::harness::{postgres_url, unique_schema};
use switchyard_conformance::stream_bridge::{StreamBridgeFixture, StreamBridgeSetup};
use switchyard_stream_bridge_postgres::{PostgresStreamBridge, PostgresStreamBridgeConfig};

async fn bridge(setup: StreamBridgeSetup) -> switchyard_core::Result<StreamBridgeFixture> {
    let mut config = PostgresStreamBridgeConfig::new(postgres_url());
    config.schema = Some(unique_schema("bridge"));
    config.queue_maxsize = setup.retention;
    config.max_connections = 4;
    let bridge = PostgresStreamBridge::connect(config).await?;
    Ok(StreamBridgeFixture::new(Arc::new(bridge)))
}

switchyard_conformance::stream_bridge_suite!(bridge);
