//! Leased pools of [`SqliteFleetBackend`]: [`Pools`] (guarantees `pool.claim_order`,
//! `pool.claim_exclusive` and `pool.expiry`), on the seed's tables.

use super::*;

#[async_trait]
impl PoolOps for SqliteFleetBackend {
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let tags = json_text("tags", tags)?;
        // An upsert, not INSERT OR REPLACE: no whole-pool prune, unlike the seed's.
        sqlx::query(concat!(
            "INSERT INTO pool_items (name, item_id, payload, tags, expires_at) VALUES (?1, ?2, ?3, ?4, ",
            now_sql!(),
            " + ?5) ON CONFLICT (name, item_id) DO UPDATE SET payload = excluded.payload, ",
            "tags = excluded.tags, expires_at = excluded.expires_at"
        ))
        .bind(name)
        .bind(id)
        .bind(payload)
        .bind(tags)
        .bind(ttl_secs(ttl))
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("pool_put", name, e))?;
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        let rows: Vec<ItemRow> = sqlx::query_as(concat!(
            "SELECT i.item_id, COALESCE(i.payload, X''), i.tags, CAST(i.expires_at AS REAL), ",
            "CAST(c.until AS REAL) FROM pool_items i LEFT JOIN pool_claims c ",
            "ON c.name = i.name AND c.item_id = i.item_id AND c.until > ",
            now_sql!(),
            " WHERE i.name = ?1 AND (i.expires_at IS NULL OR i.expires_at > ",
            now_sql!(),
            ") ORDER BY i.item_id"
        ))
        .bind(name)
        .fetch_all(self.r())
        .await
        .map_err(|e| db("pool_list", name, e))?;
        rows.into_iter().map(|r| item_from_row(name, r)).collect()
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM pool_items WHERE name = ?1 AND (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("pool_size", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "pool_remove", name).await?;
        sqlx::query("DELETE FROM pool_claims WHERE name = ?1 AND item_id = ?2")
            .bind(name)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("pool_remove", name, e))?;
        let live: Option<i64> = sqlx::query_scalar(concat!(
            "DELETE FROM pool_items WHERE name = ?1 AND item_id = ?2 ",
            "RETURNING (expires_at IS NULL OR expires_at > ",
            now_sql!(),
            ")"
        ))
        .bind(name)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("pool_remove", name, e))?;
        tx.commit().await.map_err(|e| db("pool_remove", name, e))?;
        Ok(live == Some(1))
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        let res = sqlx::query(concat!(
            "DELETE FROM pool_claims WHERE name = ?1 AND item_id = ?2 AND token = ?3 AND until > ",
            now_sql!()
        ))
        .bind(name)
        .bind(id)
        .bind(token)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("pool_release", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold_ms: u64,
    ) -> Result<Option<PoolClaim>> {
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "pool_claim_any", name).await?;
        // Live, unclaimed items, latest expiry first, never-expiring last; tags are compared in
        // Rust (JSON equality) on the rows of this one query: one round trip.
        let rows: Vec<ItemRow> = sqlx::query_as(concat!(
            "SELECT i.item_id, COALESCE(i.payload, X''), i.tags, CAST(i.expires_at AS REAL), NULL ",
            "FROM pool_items i LEFT JOIN pool_claims c ON c.name = i.name AND c.item_id = i.item_id ",
            "AND c.until > ",
            now_sql!(),
            " WHERE i.name = ?1 AND c.item_id IS NULL AND (i.expires_at IS NULL OR i.expires_at > ",
            now_sql!(),
            ") ORDER BY i.expires_at IS NULL, i.expires_at DESC, i.item_id"
        ))
        .bind(name)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("pool_claim_any", name, e))?;
        let mut chosen = None;
        for row in rows {
            match item_from_row(name, row) {
                Ok(item) if tags_match(&item.tags, where_) => {
                    chosen = Some(item);
                    break;
                }
                Ok(_) => {}
                // An item whose tags do not decode cannot be matched; it must not block the pool.
                Err(e) => tracing::warn!(pool = name, error = %e, "skipping a corrupt pool item"),
            }
        }
        let Some(mut item) = chosen else {
            tx.commit()
                .await
                .map_err(|e| db("pool_claim_any", name, e))?;
            return Ok(None);
        };
        let token = random_token();
        let until: f64 = sqlx::query_scalar(concat!(
            "INSERT OR REPLACE INTO pool_claims (name, item_id, until, token) VALUES (?1, ?2, ",
            now_sql!(),
            " + ?3, ?4) RETURNING until"
        ))
        .bind(name)
        .bind(&item.id)
        .bind(secs(hold_ms))
        .bind(&token)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db("pool_claim_any", name, e))?;
        tx.commit()
            .await
            .map_err(|e| db("pool_claim_any", name, e))?;
        item.in_use_until = Some(until);
        Ok(Some(PoolClaim { item, token }))
    }
}
