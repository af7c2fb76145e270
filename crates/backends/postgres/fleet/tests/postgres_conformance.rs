//! The fleet backend conformance suite on PostgreSQL: one schema for the whole binary (every case
//! uses its own random names), a backend of its own per case.

use std::sync::{Arc, OnceLock};

use switchyard_conformance::fleet::{FleetFixture, FleetSetup};
use switchyard_conformance::harness::{postgres_url, unique_schema};
use switchyard_fleet_postgres::{PostgresFleetBackend, PostgresFleetOptions};
use switchyard_postgres_support::Schema;

fn schema() -> &'static str {
    static SCHEMA: OnceLock<String> = OnceLock::new();
    SCHEMA.get_or_init(|| unique_schema("fleet"))
}

async fn postgres(_: FleetSetup) -> switchyard_core::Result<FleetFixture> {
    let options = PostgresFleetOptions {
        pool: PostgresFleetOptions::default()
            .pool
            .schema(Schema::new(schema())?),
        ..PostgresFleetOptions::default()
    };
    let backend = PostgresFleetBackend::open_with(&postgres_url(), options).await?;
    Ok(FleetFixture::new(Arc::new(backend)))
}

switchyard_conformance::fleet_backend_suite!(postgres);
switchyard_conformance::fleet_task_suite!(postgres);
