//! KV entries of [`SqliteFleetBackend`]: [`Kv`] (guarantee `kv.entries`), on the seed's tables.

use super::*;

#[async_trait]
impl KvOps for SqliteFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        sqlx::query(concat!(
            "INSERT OR REPLACE INTO kv (ns, key, value, expires_at) VALUES (?1, ?2, ?3, ",
            now_sql!(),
            " + ?4)"
        ))
        .bind(ns)
        .bind(key)
        .bind(value)
        .bind(ttl_secs(ttl))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("kv_set", ns, e))?;
        Ok(())
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        let mut conn = self.writer().await?;
        Self::kv_set_nx_on(&mut conn, ns, key, value, ttl)
            .await
            .map_err(|e| db("kv_set_nx", ns, e))
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        // Expired rows are filtered, never deleted on read, so a read never writes.
        sqlx::query_scalar(concat!(
            "SELECT COALESCE(value, X'') FROM kv WHERE ns = ?1 AND key = ?2 ",
            "AND (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(ns)
        .bind(key)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("kv_get", ns, e))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        let live: Option<i64> = sqlx::query_scalar(concat!(
            "DELETE FROM kv WHERE ns = ?1 AND key = ?2 ",
            "RETURNING (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(ns)
        .bind(key)
        .fetch_optional(&mut *self.writer().await?)
        .await
        .map_err(|e| db("kv_del", ns, e))?;
        Ok(live == Some(1))
    }
}
