//! Stored recurring schedules of [`SqliteFleetBackend`]: [`Schedules`] (guarantee
//! `schedule.stored`), one document per name in `switchyard_schedules`. The cron logic is the typed
//! layer's (ADR 0280).

use super::*;

#[async_trait]
impl ScheduleOps for SqliteFleetBackend {
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()> {
        sqlx::query(
            "INSERT INTO switchyard_schedules (name, doc) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET doc = excluded.doc",
        )
        .bind(name)
        .bind(doc)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("schedule_put", name, e))?;
        Ok(())
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT doc FROM switchyard_schedules WHERE name = ?1")
            .bind(name)
            .fetch_optional(self.r())
            .await
            .map_err(|e| db("schedule_get", name, e))
    }

    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT name, doc FROM switchyard_schedules")
                .fetch_all(self.r())
                .await
                .map_err(|e| db("schedule_list", "*", e))?;
        Ok(rows.into_iter().collect())
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let res = sqlx::query("DELETE FROM switchyard_schedules WHERE name = ?1")
            .bind(name)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("schedule_delete", name, e))?;
        Ok(res.rows_affected() == 1)
    }
}
