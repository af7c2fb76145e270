//! Counters of [`SqliteFleetBackend`]: [`Counters`] (guarantee `counter.atomic`), on the seed's
//! tables.

use super::*;

#[async_trait]
impl CounterOps for SqliteFleetBackend {
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        // Read and write under one write lock (the seed's three autocommit statements could
        // return another process's total). Checked in Rust: SQLite would turn an overflow into a
        // REAL.
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "counter_incr", name).await?;
        let current: Option<i64> =
            sqlx::query_scalar("SELECT CAST(value AS INTEGER) FROM counters WHERE name = ?1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db("counter_incr", name, e))?;
        let next = current
            .unwrap_or(0)
            .checked_add(by)
            .ok_or_else(|| Error::invalid("by", "overflows the counter"))?;
        sqlx::query("INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)")
            .bind(name)
            .bind(next)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("counter_incr", name, e))?;
        tx.commit().await.map_err(|e| db("counter_incr", name, e))?;
        Ok(next)
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT CAST(value AS INTEGER) FROM counters WHERE name = ?1")
                .bind(name)
                .fetch_optional(self.r())
                .await
                .map_err(|e| db("counter_get", name, e))?;
        Ok(v.unwrap_or(0))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        sqlx::query("INSERT OR REPLACE INTO counters (name, value) VALUES (?1, ?2)")
            .bind(name)
            .bind(value)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("counter_set", name, e))?;
        Ok(())
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        let res = sqlx::query("DELETE FROM counters WHERE name = ?1")
            .bind(name)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("counter_del", name, e))?;
        Ok(res.rows_affected() == 1)
    }
}
