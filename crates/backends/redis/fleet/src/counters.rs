//! Counters of [`RedisFleetBackend`]: [`Counters`] (guarantee `counter.atomic`), on the seed's
//! keys.

use super::*;

#[async_trait]
impl CounterOps for RedisFleetBackend {
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        let k = self.inner.keys.counter(name);
        self.command("counter_incr", &k, self.client().incr_by(&k, by))
            .await
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        let k = self.inner.keys.counter(name);
        let r: RValue = self
            .command("counter_get", &k, self.client().get(&k))
            .await?;
        if r.is_null() {
            return Ok(0);
        }
        to_i64(&r).ok_or_else(|| Error::corrupt(&k, "not an integer"))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        let k = self.inner.keys.counter(name);
        self.command(
            "counter_set",
            &k,
            self.client().set::<(), _, _>(&k, value, None, None, false),
        )
        .await
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        let k = self.inner.keys.counter(name);
        let n: i64 = self
            .command("counter_del", &k, self.client().del(&k))
            .await?;
        Ok(n > 0)
    }
}
