//! Fenced locks of [`PostgresFleetBackend`]: [`Locks`] (guarantee `lock.fenced`).

use super::*;

#[async_trait]
impl Locks for PostgresFleetBackend {
    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(20);
        loop {
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
            if let Some(fence) = fence {
                return Ok(Some(LockGrant {
                    token,
                    fence: u64::try_from(fence).unwrap_or(0),
                }));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
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

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
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
