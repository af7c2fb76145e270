//! The fleet backend conformance suite on the in-memory adapter.

use std::sync::Arc;

use switchyard_conformance::fleet::{FleetFixture, FleetSetup};
use switchyard_core::{MemoryFleetBackend, Result};

async fn memory(_: FleetSetup) -> Result<FleetFixture> {
    Ok(FleetFixture::new(Arc::new(MemoryFleetBackend::new())))
}

switchyard_conformance::fleet_backend_suite!(memory);
switchyard_conformance::fleet_task_suite!(memory);
