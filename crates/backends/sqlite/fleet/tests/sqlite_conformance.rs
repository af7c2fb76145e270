//! The fleet backend conformance suite on SQLite: a fresh file per case.

use std::sync::Arc;

use switchyard_conformance::fleet::{FleetFixture, FleetSetup};
use switchyard_conformance::harness::TempSqlite;
use switchyard_fleet_sqlite::SqliteFleetBackend;

async fn sqlite(_: FleetSetup) -> switchyard_core::Result<FleetFixture> {
    let db = TempSqlite::new();
    let backend = SqliteFleetBackend::open(db.path()).await?;
    // The file must outlive the case; the fixture drops it when the case is over.
    Ok(FleetFixture::new(Arc::new(backend)).keeping(db))
}

switchyard_conformance::fleet_backend_suite!(sqlite);
switchyard_conformance::fleet_task_suite!(sqlite);
