//! Leased pools of [`RedisFleetBackend`]: [`Pools`] (guarantees `pool.claim_order`,
//! `pool.claim_exclusive` and `pool.expiry`), on the seed's keys.

use super::*;

#[async_trait]
impl PoolOps for RedisFleetBackend {
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let k = self.inner.keys.pool(name);
        // The script appends the expiry it computes from the server clock, then the closing brace.
        let head = format!(
            "{{\"p\": \"{}\", \"t\": {}, \"x\": ",
            B64.encode(payload),
            py_json(&Value::Object(tags.clone()))
        );
        self.eval(
            "pool_put",
            &k,
            &self.inner.scripts.pool_put,
            vec![k.clone(), self.inner.keys.pool_expiry(name)],
            vec![text(id), text(head), ms_arg(ttl_ms(ttl).unwrap_or(0))],
        )
        .await?;
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        let k = self.inner.keys.pool(name);
        let (claim_keys, claim_args) = self.declared_claims("pool_list", name).await?;
        let mut keys = vec![k.clone()];
        keys.extend(claim_keys);
        let mut args = vec![text(self.inner.keys.pool_claim_prefix(name))];
        args.extend(claim_args);
        let reply = self
            .eval("pool_list", &k, &self.inner.scripts.pool_list, keys, args)
            .await?;
        let mut parts = array(reply).into_iter();
        let now = parts.next().as_ref().and_then(to_f64).unwrap_or(0.0);
        let mut out = Vec::new();
        while let (Some(id), Some(raw), Some(pttl)) = (parts.next(), parts.next(), parts.next()) {
            let id = to_string(id).unwrap_or_default();
            let raw = to_bytes(raw).unwrap_or_default();
            // One undecodable item must not hide the others.
            let Ok(mut item) = self.decode_item(name, id, &raw) else {
                continue;
            };
            if item.expires_at.is_some_and(|x| x <= now) {
                continue;
            }
            let pttl = to_i64(&pttl).unwrap_or(-2);
            item.in_use_until = (pttl > 0).then(|| now + pttl as f64 / 1000.0);
            out.push(item);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        let k = self.inner.keys.pool(name);
        let n = self
            .eval_i64(
                "pool_size",
                &k,
                &self.inner.scripts.pool_size,
                vec![k.clone(), self.inner.keys.pool_expiry(name)],
                vec![],
            )
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        let k = self.inner.keys.pool(name);
        let n = self
            .eval_i64(
                "pool_remove",
                &k,
                &self.inner.scripts.pool_remove,
                vec![
                    k.clone(),
                    self.inner.keys.pool_expiry(name),
                    self.inner.keys.pool_claim(name, id),
                ],
                vec![text(id)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        let k = self.inner.keys.pool_claim(name, id);
        let n = self
            .eval_i64(
                "pool_release",
                &k,
                &self.inner.scripts.pool_release,
                vec![k.clone()],
                vec![text(token)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold_ms: u64,
    ) -> Result<Option<PoolClaim>> {
        let k = self.inner.keys.pool(name);
        let token = random_token();
        let (claim_keys, claim_args) = self.declared_claims("pool_claim_any", name).await?;
        let mut keys = vec![k.clone(), self.inner.keys.pool_expiry(name)];
        keys.extend(claim_keys);
        let mut args = vec![
            text(self.inner.keys.pool_claim_prefix(name)),
            text(serde_json::to_string(where_).unwrap_or_else(|_| "{}".into())),
            ms_arg(hold_ms),
            text(token.clone()),
        ];
        args.extend(claim_args);
        let reply = self
            .eval(
                "pool_claim_any",
                &k,
                &self.inner.scripts.pool_claim,
                keys,
                args,
            )
            .await?;
        let parts = array(reply);
        if parts.len() != 3 {
            return Ok(None);
        }
        let mut parts = parts.into_iter();
        let id = parts.next().and_then(to_string).unwrap_or_default();
        let raw = parts.next().and_then(to_bytes).unwrap_or_default();
        let now = parts.next().as_ref().and_then(to_f64).unwrap_or(0.0);
        let mut item = self.decode_item(name, id, &raw)?;
        item.in_use_until = Some(now + hold_ms as f64 / 1000.0);
        Ok(Some(PoolClaim { item, token }))
    }
}
