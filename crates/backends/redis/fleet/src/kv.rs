//! KV entries of [`RedisFleetBackend`]: [`Kv`] (guarantee `kv.entries`), on the seed's keys.

use super::*;

#[async_trait]
impl KvOps for RedisFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        let k = self.inner.keys.kv(ns, key);
        let expire = ttl_ms(ttl).map(|ms| Expiration::PX(ms as i64));
        self.command(
            "kv_set",
            &k,
            self.client()
                .set::<(), _, _>(&k, bin(value), expire, None, false),
        )
        .await
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        let k = self.inner.keys.kv(ns, key);
        let expire = ttl_ms(ttl).map(|ms| Expiration::PX(ms as i64));
        let r: RValue = self
            .command(
                "kv_set_nx",
                &k,
                self.client()
                    .set(&k, bin(value), expire, Some(SetOptions::NX), false),
            )
            .await?;
        Ok(!r.is_null())
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        let k = self.inner.keys.kv(ns, key);
        let r: RValue = self.command("kv_get", &k, self.client().get(&k)).await?;
        Ok(to_bytes(r))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        let k = self.inner.keys.kv(ns, key);
        let n: i64 = self.command("kv_del", &k, self.client().del(&k)).await?;
        Ok(n > 0)
    }
}
