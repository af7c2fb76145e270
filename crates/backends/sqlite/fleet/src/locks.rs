//! Fenced locks of [`SqliteFleetBackend`]: [`Locks`] (guarantee `lock.fenced`), on the seed's
//! tables.

use super::*;

#[async_trait]
impl LockOps for SqliteFleetBackend {
    async fn lock_try_acquire(&self, name: &str, hold_ms: u64) -> Result<Option<LockGrant>> {
        let token = random_token();
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "lock_acquire", name).await?;
        let won = sqlx::query(concat!(
            "INSERT INTO locks (name, token, expires_at) VALUES (?1, ?2, ",
            now_sql!(),
            " + ?3) ON CONFLICT (name) DO UPDATE SET token = excluded.token, ",
            "expires_at = excluded.expires_at WHERE locks.expires_at <= ",
            now_sql!()
        ))
        .bind(name)
        .bind(&token)
        .bind(secs(hold_ms))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("lock_acquire", name, e))?
        .rows_affected()
            == 1;
        if won {
            let fence: i64 = sqlx::query_scalar(
                "INSERT INTO switchyard_lock_fences (name, fence) VALUES (?1, 1) \
                     ON CONFLICT (name) DO UPDATE SET fence = fence + 1 RETURNING fence",
            )
            .bind(name)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db("lock_acquire", name, e))?;
            tx.commit().await.map_err(|e| db("lock_acquire", name, e))?;
            return Ok(Some(LockGrant {
                token,
                fence: u64::try_from(fence).unwrap_or(0),
            }));
        }
        tx.rollback()
            .await
            .map_err(|e| db("lock_acquire", name, e))?;
        Ok(None)
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        let res = sqlx::query(concat!(
            "DELETE FROM locks WHERE name = ?1 AND token = ?2 AND expires_at > ",
            now_sql!()
        ))
        .bind(name)
        .bind(token)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("lock_release", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn lock_extend(&self, name: &str, token: &str, hold_ms: u64) -> Result<bool> {
        let res = sqlx::query(concat!(
            "UPDATE locks SET expires_at = ",
            now_sql!(),
            " + ?3 WHERE name = ?1 AND token = ?2 AND expires_at > ",
            now_sql!()
        ))
        .bind(name)
        .bind(token)
        .bind(secs(hold_ms))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("lock_extend", name, e))?;
        Ok(res.rows_affected() == 1)
    }
}
