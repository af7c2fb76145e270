//! Batches of [`PostgresFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`), each one
//! statement or one function call, so one transaction.

use super::*;

#[async_trait]
impl QueueBatchOps for PostgresFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        _heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        // One INSERT: every row draws its place in line in the order given, and the statement
        // commits all of them or none. Like a push, it reads whether another backend's reserver
        // waits, and wakes the waiting reservers after the commit (ADR 0235, 0347); several
        // tasks wake every waiter.
        let others: bool = sqlx::query_scalar(
            "WITH pushed AS (INSERT INTO fleet_tasks (name, tier, body) \
               SELECT $1, $2, x.b FROM unnest($3::bytea[]) WITH ORDINALITY AS x(b, o) \
               ORDER BY x.o) \
             SELECT EXISTS (SELECT 1 FROM fleet_waiters \
               WHERE queue_key = $4 AND until > fleet_now() AND waiter <> $5)",
        )
        .bind(name)
        .bind(tier_code(priority))
        .bind(bodies)
        .bind(digest(name))
        .bind(&self.inner.waiter)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_push_many", name, e))?;
        self.wake_pushed(name, bodies.len(), others).await;
        Ok(())
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        let given: Vec<&str> = receipts.iter().map(Receipt::as_str).collect();
        // One DELETE: a receipt given twice joins its row twice and deletes it once.
        let acked: Vec<String> = sqlx::query_scalar(
            "DELETE FROM fleet_tasks t USING unnest($2::text[]) AS a(r) \
             WHERE t.receipt = a.r AND t.state = 'reserved' AND t.name = $1 RETURNING t.receipt",
        )
        .bind(name)
        .bind(&given)
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("queue_ack_many", name, e))?;
        // Each acked receipt answers `true` once, at its first place in the list.
        let mut acked: std::collections::HashSet<String> = acked.into_iter().collect();
        Ok(given.iter().map(|r| acked.remove(*r)).collect())
    }
}
