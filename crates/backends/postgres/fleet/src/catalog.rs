//! The catalog of [`PostgresFleetBackend`]: [`Catalog`] (guarantees `catalog.documents` and
//! `queue.names`).

use super::*;

#[async_trait]
impl CatalogOps for PostgresFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        sqlx::query(
            "INSERT INTO fleet_catalog (automation_type, doc) VALUES ($1, $2) \
             ON CONFLICT (automation_type) DO UPDATE SET doc = excluded.doc",
        )
        .bind(automation_type)
        .bind(doc)
        .execute(self.pool())
        .await
        .map_err(|e| db("catalog_set", automation_type, e))?;
        Ok(())
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT doc FROM fleet_catalog WHERE automation_type = $1")
            .bind(automation_type)
            .fetch_optional(self.pool())
            .await
            .map_err(|e| db("catalog_get", automation_type, e))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT automation_type, doc FROM fleet_catalog")
                .fetch_all(self.pool())
                .await
                .map_err(|e| db("catalog_all", "catalog", e))?;
        Ok(rows.into_iter().collect())
    }

    async fn queue_names(&self) -> Result<Vec<String>> {
        // Every task of every queue is one row of one table whatever its state, so one statement
        // is one snapshot. `COLLATE "C"` sorts by bytes, as every other adapter does, whatever the
        // database's collation. The records of finished tasks (ADR 0380) are no task a queue
        // holds.
        sqlx::query_scalar(
            "SELECT DISTINCT name COLLATE \"C\" AS name FROM fleet_tasks \
             WHERE state IN ('ready', 'reserved', 'scheduled', 'dead') ORDER BY 1",
        )
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("queue_names", "queues", e))
    }
}
