//! The fleet backend conformance suite on SQLite: a fresh file per case.

use std::sync::Arc;

use switchyard_conformance::fleet::Backend;
use switchyard_conformance::harness::TempSqlite;
use switchyard_fleet_sqlite::SqliteFleetBackend;

async fn sqlite() -> Backend {
    // The file must outlive the case; the OS cleans the temporary directory.
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    Arc::new(
        SqliteFleetBackend::open(db.path())
            .await
            .expect("open SQLite fleet backend"),
    )
}

switchyard_conformance::fleet_backend_suite!(sqlite);
