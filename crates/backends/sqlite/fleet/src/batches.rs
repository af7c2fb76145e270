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
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        if heads.iter().any(|h| h.id.is_some()) {
            return self.push_recorded(name, bodies, heads, priority).await;
        }
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
        let rows = self.inner.batch.ack(name, receipts_text, None).await?;
        if receipts.iter().any(|r| is_recorded(r.as_str())) {
            // A cancelled delivery is ended `cancelled` by the same statements and answers
            // `false` (ADR 0380).
            self.ended();
            let mut first = HashSet::with_capacity(receipts.len());
            return Ok(receipts
                .iter()
                .map(|r| {
                    first.insert(r.as_str())
                        && tasks::acked(&rows, r.as_str()) == tasks::Acked::Done
                })
                .collect());
        }
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

impl SqliteFleetBackend {
    /// A batch with ids: one multi-row insert through `switchyard_task_submit` (merged with the
    /// group commit's other submits; a taken id undoes all of this batch, and no other
    /// caller's).
    async fn push_recorded(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        let tier = tier_name(priority);
        let mut rows = Vec::with_capacity(bodies.len() * 8);
        let none = TaskHead::default();
        for (i, body) in bodies.iter().enumerate() {
            let head = heads.get(i).unwrap_or(&none);
            rows.extend(queue::submit_args(
                name,
                tier,
                body,
                head,
                Arg::Null,
                Arg::Null,
            ));
        }
        if let Err(e) = self.inner.batch.submit("queue_push_many", name, rows).await {
            let ids: Vec<&str> = heads.iter().filter_map(|h| h.id.as_deref()).collect();
            return Err(taken(self.r(), name, ids, e).await);
        }
        self.inner.pushed.notify_waiters();
        Ok(())
    }
}
