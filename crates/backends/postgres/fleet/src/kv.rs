//! KV entries of [`PostgresFleetBackend`]: [`Kv`] (guarantee `kv.entries`).

use super::*;

#[async_trait]
impl KvOps for PostgresFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        sqlx::query(
            "INSERT INTO fleet_kv (ns, key, value, expires_at) VALUES ($1, $2, $3, fleet_now() + $4) \
             ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
        )
        .bind(ns)
        .bind(key)
        .bind(value)
        .bind(ttl_secs(ttl))
        .execute(self.pool())
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
        let res = sqlx::query(KV_SET_NX)
            .bind(ns)
            .bind(key)
            .bind(value)
            .bind(ttl_secs(ttl))
            .execute(self.pool())
            .await
            .map_err(|e| db("kv_set_nx", ns, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        // Expired rows are filtered, never deleted on read: a read stays a read.
        sqlx::query_scalar(
            "SELECT value FROM fleet_kv WHERE ns = $1 AND key = $2 \
             AND (expires_at IS NULL OR expires_at > fleet_now())",
        )
        .bind(ns)
        .bind(key)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("kv_get", ns, e))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        let live: Option<bool> = sqlx::query_scalar(
            "DELETE FROM fleet_kv WHERE ns = $1 AND key = $2 \
             RETURNING (expires_at IS NULL OR expires_at > fleet_now())",
        )
        .bind(ns)
        .bind(key)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("kv_del", ns, e))?;
        Ok(live == Some(true))
    }
}
