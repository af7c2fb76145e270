//! Counters of [`MemoryFleetBackend`]: [`Counters`] (guarantee `counter.atomic`).

use super::*;

#[async_trait]
impl CounterOps for MemoryFleetBackend {
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        let mut st = self.state();
        let v = st.counters.entry(name.to_string()).or_default();
        *v = v
            .checked_add(by)
            .ok_or_else(|| Error::invalid("by", "overflows the counter"))?;
        Ok(*v)
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        Ok(self.state().counters.get(name).copied().unwrap_or(0))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        self.state().counters.insert(name.to_string(), value);
        Ok(())
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        Ok(self.state().counters.remove(name).is_some())
    }
}
