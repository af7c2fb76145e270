//! Recurring schedules of [`RedisFleetBackend`]: [`Schedules`] (guarantee `schedule.stored`). The
//! documents of every schedule are one hash, `fleet:schedules`, field = the schedule's name as
//! given (ADR 0287): one key, so a listing is one read and lands in one slot on a cluster.

use super::*;

#[async_trait]
impl ScheduleOps for RedisFleetBackend {
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()> {
        let k = self.inner.keys.schedules();
        self.command(
            "schedule_put",
            &k,
            self.client().hset::<(), _, _>(&k, (name, bin(doc))),
        )
        .await
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let k = self.inner.keys.schedules();
        let r: RValue = self
            .command("schedule_get", &k, self.client().hget(&k, name))
            .await?;
        Ok(to_bytes(r))
    }

    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let k = self.inner.keys.schedules();
        let r: RValue = self
            .command("schedule_list", &k, self.client().hgetall(&k))
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

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let k = self.inner.keys.schedules();
        let n: i64 = self
            .command("schedule_delete", &k, self.client().hdel(&k, name))
            .await?;
        Ok(n == 1)
    }
}
