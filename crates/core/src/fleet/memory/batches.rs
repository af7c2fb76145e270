//! Batches of [`MemoryFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one step under the state lock, so no reader sees part of it.

use super::*;

#[async_trait]
impl QueueBatchOps for MemoryFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        let now = self.now();
        {
            let mut st = self.state();
            let q = st.queues.entry(name.to_string()).or_default();
            // One taken id refuses the whole batch (guarantee `task.unique_id`).
            if let Some(id) = heads
                .iter()
                .filter_map(|h| h.id.as_ref())
                .find(|id| q.tasks.taken(id))
            {
                return Err(Error::AlreadyExists {
                    what: "task",
                    id: id.clone(),
                });
            }
            for (body, head) in bodies.iter().zip(heads) {
                q.tasks.submitted(head, priority, now);
                q.tiers[tier(priority)].push_back(Entry::new(
                    body.clone(),
                    priority,
                    head.id.clone(),
                ));
            }
        }
        self.shared.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        let now = self.now();
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(vec![false; receipts.len()]);
        };
        let mut ended = false;
        // A receipt given twice is removed by its first mention, so the second answers `false`.
        // A cancelled task's delivery ends `cancelled` and answers `false` (guarantee
        // `task.cancel_running`).
        let acked = receipts
            .iter()
            .map(|r| {
                if self.end_if_cancelled(q, r, now).is_some() {
                    return false;
                }
                let Some(held) = q.processing.remove(r.as_str()) else {
                    return false;
                };
                if held.entry.id.is_some() {
                    q.tasks.delivery_ended(&held.entry, held.progress);
                    q.tasks
                        .end_entry(&held.entry, TaskState::Completed, None, now);
                    ended = true;
                }
                true
            })
            .collect();
        drop(st);
        if ended {
            self.announce_ends();
        }
        Ok(acked)
    }
}
