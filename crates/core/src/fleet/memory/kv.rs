//! KV entries of [`MemoryFleetBackend`]: [`Kv`] (guarantee `kv.entries`).

use super::*;

#[async_trait]
impl KvOps for MemoryFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        let exp = ttl_ms(ttl).map(|ms| self.now() + secs(ms));
        self.state()
            .kv
            .insert((ns.into(), key.into()), (value.to_vec(), exp));
        Ok(())
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        if live_kv(&mut st, ns, key, now).is_some() {
            return Ok(false);
        }
        let exp = ttl_ms(ttl).map(|ms| now + secs(ms));
        st.kv.insert((ns.into(), key.into()), (value.to_vec(), exp));
        Ok(true)
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        let now = self.now();
        Ok(live_kv(&mut self.state(), ns, key, now))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        let existed = live_kv(&mut st, ns, key, now).is_some();
        st.kv.remove(&(ns.to_string(), key.to_string()));
        Ok(existed)
    }
}
