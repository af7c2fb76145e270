//! Counters of [`PostgresFleetBackend`]: [`Counters`] (guarantee `counter.atomic`).

use super::*;

#[async_trait]
impl CounterOps for PostgresFleetBackend {
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        // One upsert: the row lock orders concurrent increments. A bigint overflow is refused by
        // the server (numeric_value_out_of_range) and nothing is written.
        sqlx::query_scalar(
            "INSERT INTO fleet_counters (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = fleet_counters.value + excluded.value \
             RETURNING value",
        )
        .bind(name)
        .bind(by)
        .fetch_one(self.pool())
        .await
        .map_err(|e| {
            if support::sqlstate(&e).as_deref() == Some(OUT_OF_RANGE) {
                Error::invalid("by", "overflows the counter")
            } else {
                db("counter_incr", name, e)
            }
        })
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        let v: Option<i64> = sqlx::query_scalar("SELECT value FROM fleet_counters WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await
            .map_err(|e| db("counter_get", name, e))?;
        Ok(v.unwrap_or(0))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO fleet_counters (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        )
        .bind(name)
        .bind(value)
        .execute(self.pool())
        .await
        .map_err(|e| db("counter_set", name, e))?;
        Ok(())
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        let res = sqlx::query("DELETE FROM fleet_counters WHERE name = $1")
            .bind(name)
            .execute(self.pool())
            .await
            .map_err(|e| db("counter_del", name, e))?;
        Ok(res.rows_affected() == 1)
    }
}
