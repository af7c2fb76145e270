//! Leased pools of [`MemoryFleetBackend`]: [`Pools`] (guarantees `pool.claim_order`,
//! `pool.claim_exclusive` and `pool.expiry`).

use super::*;

#[async_trait]
impl PoolOps for MemoryFleetBackend {
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let now = self.now();
        let expires_at = ttl_ms(ttl).map(|ms| now + secs(ms));
        let mut st = self.state();
        let pool = st.pools.entry(name.to_string()).or_default();
        pool.items.insert(
            id.to_string(),
            Item {
                payload: payload.to_vec(),
                tags: tags.clone(),
                expires_at,
            },
        );
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        let now = self.now();
        let st = self.state();
        let Some(pool) = st.pools.get(name) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<PoolItem> = pool
            .items
            .iter()
            .filter(|(_, item)| item_live(item, now))
            .map(|(id, item)| to_pool_item(id, item, claim_live(pool, id, now)))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        let now = self.now();
        let st = self.state();
        Ok(st.pools.get(name).map_or(0, |p| {
            p.items.values().filter(|i| item_live(i, now)).count() as u64
        }))
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(false);
        };
        pool.claims.remove(id);
        Ok(pool
            .items
            .remove(id)
            .is_some_and(|item| item_live(&item, now)))
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(false);
        };
        match pool.claims.get(id) {
            Some((t, until)) if t == token && *until > now => {
                pool.claims.remove(id);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold_ms: u64,
    ) -> Result<Option<PoolClaim>> {
        let now = self.now();
        let mut st = self.state();
        let Some(pool) = st.pools.get_mut(name) else {
            return Ok(None);
        };
        // Lazy prune of this pool only, bounded by its size (the seed pruned every pool on every
        // put).
        pool.items.retain(|_, item| item_live(item, now));
        pool.claims.retain(|_, (_, until)| *until > now);
        let best = pool
            .items
            .iter()
            .filter(|(id, item)| !pool.claims.contains_key(*id) && tags_match(&item.tags, where_))
            .max_by(|(ida, a), (idb, b)| {
                let ka = a.expires_at.unwrap_or(f64::NEG_INFINITY);
                let kb = b.expires_at.unwrap_or(f64::NEG_INFINITY);
                ka.total_cmp(&kb).then_with(|| idb.cmp(ida))
            })
            .map(|(id, item)| (id.clone(), item.clone()));
        let Some((id, item)) = best else {
            return Ok(None);
        };
        let until = now + secs(hold_ms);
        let token = random_token();
        pool.claims.insert(id.clone(), (token.clone(), until));
        Ok(Some(PoolClaim {
            item: to_pool_item(&id, &item, Some(until)),
            token,
        }))
    }
}
