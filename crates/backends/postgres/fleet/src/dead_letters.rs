//! Dead letters of [`PostgresFleetBackend`]: [`DeadLetters`] (guarantees `dlq.fifo_atomic` and
//! `dlq.requeue_chosen`), the rows of `fleet_tasks` in state `dead`, oldest `pos` first.

use super::*;

#[async_trait]
impl DeadLetterOps for PostgresFleetBackend {
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT body FROM fleet_tasks WHERE name = $1 AND state = 'dead' ORDER BY pos LIMIT $2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("dlq_peek", name, e))
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        // Rows a concurrent pop holds are skipped: no body is popped twice. A recorded letter's
        // task ends `failed` (ADR 0380), in the same function call.
        let mut rows: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT * FROM fleet_dlq_pop($1, $2, $3)")
                .bind(name)
                .bind(to_i64(n))
                .bind(self.channel())
                .fetch_all(self.pool())
                .await
                .map_err(|e| db("dlq_pop", name, e))?;
        rows.sort_by_key(|r| r.0);
        Ok(rows.into_iter().map(|r| r.1).collect())
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM fleet_tasks WHERE name = $1 AND state = 'dead'",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("dlq_length", name, e))?;
        Ok(count(n))
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        // Recorded letters' tasks end `failed` (ADR 0380), in the same function call.
        let n: i64 = sqlx::query_scalar("SELECT fleet_dlq_clear($1, $2)")
            .bind(name)
            .bind(self.channel())
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("dlq_clear", name, e))?;
        Ok(count(n))
    }

    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>> {
        let mut answers = vec![false; bodies.len()];
        if bodies.is_empty() {
            return Ok(answers);
        }
        // One function call, one transaction (guarantee `dlq.requeue_chosen`): the ordinals of the
        // entries whose letter moved.
        let moved: Vec<i64> =
            sqlx::query_scalar("SELECT * FROM fleet_requeue_chosen($1, $2, $3, $4, $5)")
                .bind(name)
                .bind(bodies)
                .bind(tier_code(priority))
                .bind(self.channel())
                .bind(wake_all_payload(name))
                .fetch_all(self.pool())
                .await
                .map_err(|e| db("dlq_requeue_chosen", name, e))?;
        for o in moved {
            if let Some(a) = usize::try_from(o)
                .ok()
                .and_then(|o| o.checked_sub(1))
                .and_then(|i| answers.get_mut(i))
            {
                *a = true;
            }
        }
        Ok(answers)
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        if n == 0 {
            return Ok(0);
        }
        let moved: i64 = sqlx::query_scalar("SELECT fleet_requeue($1, $2, $3, $4, $5)")
            .bind(name)
            .bind(to_i64(n))
            .bind(tier_code(priority))
            .bind(self.channel())
            .bind(wake_all_payload(name))
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("dlq_requeue", name, e))?;
        Ok(count(moved))
    }
}
