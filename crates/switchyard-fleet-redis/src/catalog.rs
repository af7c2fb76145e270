//! The catalog of [`RedisFleetBackend`]: [`Catalog`] (guarantee 21), on the seed's keys.

use super::*;

#[async_trait]
impl Catalog for RedisFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
        let k = self.inner.keys.catalog();
        self.client()
            .hset::<(), _, _>(&k, (automation_type, bin(doc)))
            .await
            .map_err(|e| classify("catalog_set", &k, e))
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .client()
            .hget(&k, automation_type)
            .await
            .map_err(|e| classify("catalog_get", &k, e))?;
        Ok(to_bytes(r))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .client()
            .hgetall(&k)
            .await
            .map_err(|e| classify("catalog_all", &k, e))?;
        let mut out = BTreeMap::new();
        let mut it = flatten_pairs(r).into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            if let (Some(f), Some(v)) = (to_string(f), to_bytes(v)) {
                out.insert(f, v);
            }
        }
        Ok(out)
    }
}
