//! Fenced locks of [`PostgresFleetBackend`]: [`Locks`] (guarantee `lock.fenced`).

use super::*;

#[async_trait]
impl LockOps for PostgresFleetBackend {
    /// Backs off from 20 ms: a lock row's update is cheap.
    fn lock_backoff(&self) -> Duration {
        Duration::from_millis(20)
    }

    async fn lock_try_acquire(&self, name: &str, hold_ms: u64) -> Result<Option<LockGrant>> {
        let token = random_token();
        // One statement: take the row if it is free or lapsed, and raise its fence. The row
        // (and so the fence) outlives every holder.
        let fence: Option<i64> = sqlx::query_scalar(
            "INSERT INTO fleet_locks (name, token, expires_at, fence) \
                 VALUES ($1, $2, fleet_now() + $3, 1) \
                 ON CONFLICT (name) DO UPDATE SET token = excluded.token, \
                 expires_at = excluded.expires_at, fence = fleet_locks.fence + 1 \
                 WHERE fleet_locks.expires_at <= fleet_now() RETURNING fence",
        )
        .bind(name)
        .bind(&token)
        .bind(secs(hold_ms))
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("lock_acquire", name, e))?;
        Ok(fence.map(|fence| LockGrant {
            token,
            fence: u64::try_from(fence).unwrap_or(0),
        }))
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        // The row stays, free, so the next grant's fence is above this one.
        let res = sqlx::query(
            "UPDATE fleet_locks SET token = NULL, expires_at = 0 \
             WHERE name = $1 AND token = $2 AND expires_at > fleet_now()",
        )
        .bind(name)
        .bind(token)
        .execute(self.pool())
        .await
        .map_err(|e| db("lock_release", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn lock_extend(&self, name: &str, token: &str, hold_ms: u64) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE fleet_locks SET expires_at = fleet_now() + $3 \
             WHERE name = $1 AND token = $2 AND expires_at > fleet_now()",
        )
        .bind(name)
        .bind(token)
        .bind(secs(hold_ms))
        .execute(self.pool())
        .await
        .map_err(|e| db("lock_extend", name, e))?;
        Ok(res.rows_affected() == 1)
    }
}
