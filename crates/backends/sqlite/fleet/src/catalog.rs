//! The catalog of [`SqliteFleetBackend`]: [`Catalog`] (guarantees `catalog.documents` and
//! `queue.names`), on the seed's tables.

use super::*;

#[async_trait]
impl CatalogOps for SqliteFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        sqlx::query("INSERT OR REPLACE INTO catalog (automation_type, doc) VALUES (?1, ?2)")
            .bind(automation_type)
            .bind(doc)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("catalog_set", automation_type, e))?;
        Ok(())
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT COALESCE(doc, X'') FROM catalog WHERE automation_type = ?1")
            .bind(automation_type)
            .fetch_optional(self.r())
            .await
            .map_err(|e| db("catalog_get", automation_type, e))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT automation_type, COALESCE(doc, X'') FROM catalog")
                .fetch_all(self.r())
                .await
                .map_err(|e| db("catalog_all", "catalog", e))?;
        Ok(rows.into_iter().collect())
    }

    async fn queue_names(&self) -> Result<Vec<String>> {
        // Every table that holds a queue's tasks is indexed by name first, and one statement is
        // one snapshot. UNION drops duplicates.
        sqlx::query_scalar(concat!(
            "SELECT name FROM queues UNION SELECT name FROM queue_processing ",
            "UNION SELECT name FROM queue_scheduled UNION SELECT name FROM queue_dead ",
            "ORDER BY name"
        ))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("queue_names", "queues", e))
    }
}
