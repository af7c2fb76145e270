//! Leased pools of [`PostgresFleetBackend`]: [`Pools`] (guarantees `pool.claim_order`,
//! `pool.claim_exclusive` and `pool.expiry`).

use super::*;

/// Columns of a pool item as [`item_from_row`] reads them.
const ITEM_COLUMNS: &str = "item_id, payload, tags::text, expires_at, \
     CASE WHEN claim_until > fleet_now() THEN claim_until END";

#[async_trait]
impl PoolOps for PostgresFleetBackend {
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let tags = json_text("tags", tags)?;
        // An upsert of one row: no whole-pool prune; a claim on the id stays.
        sqlx::query(
            "INSERT INTO fleet_pool_items (name, item_id, payload, tags, expires_at) \
             VALUES ($1, $2, $3, $4::jsonb, fleet_now() + $5) \
             ON CONFLICT (name, item_id) DO UPDATE SET payload = excluded.payload, \
             tags = excluded.tags, expires_at = excluded.expires_at",
        )
        .bind(name)
        .bind(id)
        .bind(payload)
        .bind(tags)
        .bind(ttl_secs(ttl))
        .execute(self.pool())
        .await
        .map_err(|e| db("pool_put", name, e))?;
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        let rows: Vec<ItemRow> = sqlx::query_as(&format!(
            "SELECT {ITEM_COLUMNS} FROM fleet_pool_items \
             WHERE name = $1 AND (expires_at IS NULL OR expires_at > fleet_now()) ORDER BY item_id"
        ))
        .bind(name)
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("pool_list", name, e))?;
        rows.into_iter().map(|r| item_from_row(name, r)).collect()
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM fleet_pool_items \
             WHERE name = $1 AND (expires_at IS NULL OR expires_at > fleet_now())",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("pool_size", name, e))?;
        Ok(count(n))
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        let live: Option<bool> = sqlx::query_scalar(
            "DELETE FROM fleet_pool_items WHERE name = $1 AND item_id = $2 \
             RETURNING (expires_at IS NULL OR expires_at > fleet_now())",
        )
        .bind(name)
        .bind(id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("pool_remove", name, e))?;
        Ok(live == Some(true))
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE fleet_pool_items SET claim_until = NULL, claim_token = NULL \
             WHERE name = $1 AND item_id = $2 AND claim_token = $3 AND claim_until > fleet_now()",
        )
        .bind(name)
        .bind(id)
        .bind(token)
        .execute(self.pool())
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
        let where_ = json_text("where", where_)?;
        let token = random_token();
        // One statement: the live, unclaimed item whose tags equal every `where` pair (JSON
        // equality per key, not containment), latest expiry first and never-expiring last,
        // skipping rows a concurrent claimer holds; then the claim on that row.
        let row: Option<ItemRow> = sqlx::query_as(&format!(
            "UPDATE fleet_pool_items SET claim_until = fleet_now() + $3, claim_token = $4 \
             WHERE (name, item_id) = (SELECT i.name, i.item_id FROM fleet_pool_items i \
               WHERE i.name = $1 AND (i.expires_at IS NULL OR i.expires_at > fleet_now()) \
               AND (i.claim_until IS NULL OR i.claim_until <= fleet_now()) \
               AND NOT EXISTS (SELECT 1 FROM jsonb_each($2::jsonb) w \
                               WHERE (i.tags -> w.key) IS DISTINCT FROM w.value) \
               ORDER BY i.expires_at DESC NULLS LAST, i.item_id LIMIT 1 \
               FOR UPDATE SKIP LOCKED) \
             RETURNING {ITEM_COLUMNS}"
        ))
        .bind(name)
        .bind(where_)
        .bind(secs(hold_ms))
        .bind(&token)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("pool_claim_any", name, e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(PoolClaim {
            item: item_from_row(name, row)?,
            token,
        }))
    }
}

type ItemRow = (String, Vec<u8>, String, Option<f64>, Option<f64>);

fn item_from_row(pool: &str, row: ItemRow) -> Result<PoolItem> {
    let (id, payload, tags, expires_at, in_use_until) = row;
    let location = || format!("fleet_pool_items[{pool:?}, {id:?}].tags");
    let tags = match serde_json::from_str(&tags).map_err(|e| Error::corrupt(location(), e))? {
        Value::Object(m) => m,
        _ => return Err(Error::corrupt(location(), "not a JSON object")),
    };
    Ok(PoolItem {
        id,
        payload,
        tags,
        expires_at,
        in_use_until,
    })
}
