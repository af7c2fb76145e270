//! The stream bridge conformance suite on the memory bridge.

use std::sync::Arc;

use switchyard_conformance::stream_bridge::{StreamBridgeFixture, StreamBridgeSetup};
use switchyard_core::{MemoryStreamBridge, Result};

async fn bridge(setup: StreamBridgeSetup) -> Result<StreamBridgeFixture> {
    let bridge = MemoryStreamBridge::new(setup.retention)?;
    Ok(StreamBridgeFixture::new(Arc::new(bridge)))
}

switchyard_conformance::stream_bridge_suite!(bridge);
