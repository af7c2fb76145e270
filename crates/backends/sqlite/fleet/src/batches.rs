//! Batches of [`SqliteFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one SQL statement, group-committed and merged with the single-task writes of its kind (ADR 0150,
//! ADR 0291): one multi-row `INSERT`, one reserve of up to `max` rows, one `DELETE … IN (…)`.

use std::collections::HashSet;

use super::*;

#[async_trait]
impl QueueBatchOps for SqliteFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        _heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        // One multi-row INSERT (with the batch's other pushes): rows take ascending ids in the
        // order given, and the statement is atomic, so a reader sees all of the batch or none.
        self.inner
            .batch
            .push(name, tier_name(priority), bodies.to_vec())
            .await?;
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        let receipts_text = receipts.iter().map(|r| r.as_str().to_string()).collect();
        let rows = self.inner.batch.ack(name, receipts_text).await?;
        let mut acked = HashSet::with_capacity(rows.len());
        for row in &rows {
            let (receipt,): (String,) =
                sqlx::FromRow::from_row(row).map_err(|e| db("queue_ack_many", name, e))?;
            acked.insert(receipt);
        }
        // A receipt given twice was acked once: the first mention answers `true`.
        Ok(receipts.iter().map(|r| acked.remove(r.as_str())).collect())
    }
}
