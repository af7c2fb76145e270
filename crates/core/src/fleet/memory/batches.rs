//! Batches of [`MemoryFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one step under the state lock, so no reader sees part of it.

use super::*;

#[async_trait]
impl QueueBatchOps for MemoryFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        _heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
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

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
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
