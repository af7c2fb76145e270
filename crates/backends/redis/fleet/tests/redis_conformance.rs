//! The fleet backend conformance suite on Redis (the harness's shared server, one key prefix per
//! case).

use std::sync::Arc;

use switchyard_conformance::fleet::{FleetFixture, FleetSetup};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

async fn redis(_: FleetSetup) -> switchyard_core::Result<FleetFixture> {
    let config =
        RedisFleetConfig::new(redis_url()).with_prefix(format!("{}:", unique_prefix("fleet")));
    let backend = RedisFleetBackend::with_config(config).await?;
    Ok(FleetFixture::new(Arc::new(backend)))
}

switchyard_conformance::fleet_backend_suite!(redis);
switchyard_conformance::fleet_task_suite!(redis);
