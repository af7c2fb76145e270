//! The stream bridge conformance suite on the memory bridge.

use std::sync::Arc;

use switchyard_conformance::stream_bridge::Capabilities;
use switchyard_core::{MemoryStreamBridge, StreamBridge};

switchyard_conformance::stream_bridge_suite!(
    |maxsize: usize| async move {
        MemoryStreamBridge::new(maxsize).map(|b| Arc::new(b) as Arc<dyn StreamBridge>)
    },
    Capabilities::MEMORY
);
