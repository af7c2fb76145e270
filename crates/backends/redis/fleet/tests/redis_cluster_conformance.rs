//! The fleet backend conformance suite on the harness's Redis Cluster (3 masters, 3 replicas;
//! cluster key layout, one key prefix per case).

use std::sync::Arc;

use switchyard_conformance::fleet::{FleetFixture, FleetSetup};
use switchyard_conformance::harness::{redis_cluster_url, unique_prefix};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

async fn redis_cluster(_: FleetSetup) -> switchyard_core::Result<FleetFixture> {
    let config = RedisFleetConfig::new(redis_cluster_url())
        .with_prefix(format!("{}:", unique_prefix("fleetc")));
    let backend = RedisFleetBackend::with_config(config).await?;
    Ok(FleetFixture::new(Arc::new(backend)))
}

switchyard_conformance::fleet_backend_suite!(redis_cluster);
switchyard_conformance::fleet_task_suite!(redis_cluster);
