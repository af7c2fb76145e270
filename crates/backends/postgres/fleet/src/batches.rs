//! Batches of [`PostgresFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`), each one
//! statement or one function call, so one transaction.

use super::*;

#[async_trait]
impl QueueBatchOps for PostgresFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        if heads.iter().any(|h| h.id.is_some()) {
            return self.push_many_records(name, bodies, heads, priority).await;
        }
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
        let given: Vec<&str> = receipts.iter().map(raw).collect();
        // One DELETE: a receipt given twice joins its row twice and deletes it once. Tasks
        // without an id only (unmarked receipts); recorded ones end below, with whatever this
        // did not find.
        let plain: Vec<&str> = receipts.iter().filter(|r| !marked(r)).map(raw).collect();
        let acked: Vec<String> = if plain.is_empty() {
            Vec::new()
        } else {
            sqlx::query_scalar(
                "DELETE FROM fleet_tasks t USING unnest($2::text[]) AS a(r) \
                 WHERE t.receipt = a.r AND t.state = 'reserved' AND t.name = $1 \
                   AND t.task_id IS NULL RETURNING t.receipt",
            )
            .bind(name)
            .bind(&plain)
            .fetch_all(self.pool())
            .await
            .map_err(|e| db("queue_ack_many", name, e))?
        };
        let mut acked: std::collections::HashSet<String> = acked.into_iter().collect();
        let left: Vec<&str> = given
            .iter()
            .copied()
            .filter(|r| !acked.contains(*r))
            .collect();
        if !left.is_empty() {
            // A recorded task ends `completed`, or `cancelled` when its cancel was requested:
            // that receipt answers `false` (ADR 0380; `task_get` tells why).
            let n = left.len();
            let ended = batch::ack_tasks(
                self.pool(),
                self.channel(),
                vec![name; n],
                left,
                vec![None; n],
            )
            .await
            .map_err(|e| db("queue_ack_many", name, e))?;
            acked.extend(
                ended
                    .into_iter()
                    .filter(|(_, (state, _))| state == "completed")
                    .map(|(r, _)| r),
            );
        }
        // Each acked receipt answers `true` once, at its first place in the list.
        Ok(given.iter().map(|r| acked.remove(*r)).collect())
    }
}

impl PostgresFleetBackend {
    /// [`queue_push_many`](QueueBatchOps::queue_push_many) of a batch with ids: one INSERT that
    /// also writes the records; a known id fails the statement, so nothing is pushed. When a
    /// known id is a finished task's, those records are removed (their ids are free, guarantee
    /// `task.unique_id`) and the INSERT runs once more; otherwise the answer names the first
    /// known id of the batch (ADR 0380).
    async fn push_many_records(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        let ids: Vec<Option<&str>> = heads.iter().map(|h| h.id.as_deref()).collect();
        let maxes: Vec<Option<i32>> = heads.iter().map(max_of).collect();
        let errors: Vec<Option<&str>> = heads.iter().map(|h| h.last_error.as_deref()).collect();
        let mut freed = false;
        let others = loop {
            let pushed = sqlx::query_scalar(
                "WITH pushed AS (INSERT INTO fleet_tasks \
                   (name, tier, body, task_id, max_attempts, last_error, submitted_at) \
                   SELECT $1, $2, x.b, x.i, x.m, x.e, fleet_now() \
                   FROM unnest($3::bytea[], $6::text[], $7::int4[], $8::text[]) \
                     WITH ORDINALITY AS x(b, i, m, e, o) \
                   ORDER BY x.o) \
                 SELECT EXISTS (SELECT 1 FROM fleet_waiters \
                   WHERE queue_key = $4 AND until > fleet_now() AND waiter <> $5)",
            )
            .bind(name)
            .bind(tier_code(priority))
            .bind(bodies)
            .bind(digest(name))
            .bind(&self.inner.waiter)
            .bind(&ids)
            .bind(&maxes)
            .bind(&errors)
            .fetch_one(self.pool())
            .await;
            match pushed {
                Ok(others) => break others,
                Err(e) if id_taken(&e) => {
                    if !freed {
                        freed = true;
                        let names = vec![name; ids.len()];
                        let op = "queue_push_many";
                        if free_task_ids(self.pool(), op, &names, &ids).await? > 0 {
                            continue;
                        }
                    }
                    return Err(self.first_taken(name, &ids).await?);
                }
                Err(e) => return Err(db("queue_push_many", name, e)),
            }
        };
        self.wake_pushed(name, bodies.len(), others).await;
        Ok(())
    }

    /// [`Error::AlreadyExists`] naming the first of `ids` that queue `name` holds.
    async fn first_taken(&self, name: &str, ids: &[Option<&str>]) -> Result<Error> {
        let taken: Option<String> = sqlx::query_scalar(
            "SELECT x.i FROM unnest($2::text[]) WITH ORDINALITY AS x(i, o) \
             JOIN fleet_tasks t ON t.name = $1 AND t.task_id = x.i \
             ORDER BY x.o LIMIT 1",
        )
        .bind(name)
        .bind(ids)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("queue_push_many", name, e))?;
        let id = taken
            .or_else(|| ids.iter().flatten().next().map(|s| s.to_string()))
            .unwrap_or_default();
        Ok(already_exists(&id))
    }
}
