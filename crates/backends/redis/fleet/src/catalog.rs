//! The catalog of [`RedisFleetBackend`]: [`Catalog`] (guarantees `catalog.documents` and
//! `queue.names`), on the seed's keys.

use super::*;

#[async_trait]
impl CatalogOps for RedisFleetBackend {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        let k = self.inner.keys.catalog();
        self.command(
            "catalog_set",
            &k,
            self.client()
                .hset::<(), _, _>(&k, (automation_type, bin(doc))),
        )
        .await
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .command("catalog_get", &k, self.client().hget(&k, automation_type))
            .await?;
        Ok(to_bytes(r))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .command("catalog_all", &k, self.client().hgetall(&k))
            .await?;
        let mut out = BTreeMap::new();
        let mut it = flatten_pairs(r).into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            if let (Some(f), Some(v)) = (to_string(f), to_bytes(v)) {
                out.insert(f, v);
            }
        }
        Ok(out)
    }

    async fn queue_names(&self) -> Result<Vec<String>> {
        // Queues are implicit and the seed keeps no index of them (nor can one be kept in the
        // queue scripts: on a cluster they touch one queue's slot only), so the keys are scanned.
        let stem = self.inner.keys.queue_stem();
        let pattern = switchyard_redis_support::scan::pattern_for_stem(&stem);
        let options = fred::prelude::Options::default();
        let scan = switchyard_redis_support::scan::scan_keys(self.client(), &options, &pattern);
        let keys = self.command("queue_names", &stem, scan).await?;
        let names: std::collections::BTreeSet<String> = keys
            .iter()
            .filter_map(|k| self.inner.keys.queue_of_key(k))
            .collect();
        Ok(names.into_iter().collect())
    }
}
