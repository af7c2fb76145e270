//! Batches of [`MemoryFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one step under the state lock, so no reader sees part of it.

use super::*;

#[async_trait]
impl QueueBatches for MemoryFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<()> {
        check_name("queue", name)?;
        check_batch("bodies", bodies.len())?;
        if bodies.is_empty() {
            return Ok(());
        }
        {
            let mut st = self.state();
            let t = &mut st.queues.entry(name.to_string()).or_default().tiers[tier(priority)];
            t.extend(bodies.iter().map(|body| Entry {
                body: body.clone(),
                attempts: 0,
                priority,
            }));
        }
        self.shared.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_reserve_many(
        &self,
        name: &str,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Delivery>> {
        check_name("queue", name)?;
        if max == 0 {
            return Err(Error::invalid("max", "must be at least 1"));
        }
        check_batch("max", max)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        Ok(self
            .reserve_waiting(name, max, timeout, visibility_ms)
            .await)
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        check_name("queue", name)?;
        check_batch("receipts", receipts.len())?;
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(vec![false; receipts.len()]);
        };
        // A receipt given twice is removed by its first mention, so the second answers `false`.
        Ok(receipts
            .iter()
            .map(|r| q.processing.remove(r.as_str()).is_some())
            .collect())
    }
}
