//! The fleet backend conformance suite on the in-memory adapter.

use std::sync::Arc;

use switchyard_conformance::fleet::Backend;
use switchyard_core::MemoryFleetBackend;

async fn memory() -> Backend {
    Arc::new(MemoryFleetBackend::new())
}

switchyard_conformance::fleet_backend_suite!(memory);
