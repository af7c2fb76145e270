//! Flow control and what workers report on [`SqliteFleetBackend`]: [`QueueFlow`] (guarantees
//! 27, 28, 29 and 31). Pause and the token bucket live in `switchyard_queue_flow` and are judged
//! by the statement that reserves (ADR 0290); progress lives on the delivery's own row.

use super::*;

#[async_trait]
impl QueueFlowOps for SqliteFleetBackend {
    async fn queue_pause(&self, name: &str) -> Result<bool> {
        // RETURNING, not rows_affected: a batch reports rows per statement, not changes. A
        // conflict whose update is filtered out by its WHERE returns no row.
        let rows = self
            .inner
            .batch
            .write(
                "queue_pause",
                name,
                "INSERT INTO switchyard_queue_flow (name, paused) VALUES (?1, 1) \
                 ON CONFLICT (name) DO UPDATE SET paused = 1 WHERE paused = 0 RETURNING 1",
                vec![Arg::Text(name.to_string())],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_resume(&self, name: &str) -> Result<bool> {
        let rows = self
            .inner
            .batch
            .write(
                "queue_resume",
                name,
                "UPDATE switchyard_queue_flow SET paused = 0 WHERE name = ?1 AND paused <> 0 \
                 RETURNING 1",
                vec![Arg::Text(name.to_string())],
            )
            .await?;
        // This process's waiting reservers look again at once; other processes' poll.
        self.inner.pushed.notify_waiters();
        Ok(rows.len() == 1)
    }

    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()> {
        let op = "queue_set_rate_limit";
        match limit {
            // A new limit starts with a full bucket.
            Some(l) => {
                let per_ms = i64::try_from(l.per_ms())
                    .map_err(|_| Error::invalid("rate_limit.per", "is too long"))?;
                self.inner
                    .batch
                    .write(
                        op,
                        name,
                        concat!(
                            "INSERT INTO switchyard_queue_flow (name, rate_max, rate_per_ms, tokens, refilled_at) ",
                            "VALUES (?1, ?2, ?3, ?2, ",
                            now_sql!(),
                            ") ON CONFLICT (name) DO UPDATE SET rate_max = excluded.rate_max, ",
                            "rate_per_ms = excluded.rate_per_ms, tokens = excluded.tokens, ",
                            "refilled_at = excluded.refilled_at"
                        ),
                        vec![
                            Arg::Text(name.to_string()),
                            Arg::Int(i64::from(l.max)),
                            Arg::Int(per_ms),
                        ],
                    )
                    .await?;
            }
            None => {
                self.inner
                    .batch
                    .write(
                        op,
                        name,
                        "UPDATE switchyard_queue_flow SET rate_max = NULL, rate_per_ms = NULL, \
                         tokens = NULL, refilled_at = NULL WHERE name = ?1",
                        vec![Arg::Text(name.to_string())],
                    )
                    .await?;
            }
        }
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool> {
        if is_recorded(receipt.as_str()) {
            // A cancelled delivery's progress is not written; its task's id says why (ADR
            // 0380).
            let rows = self
                .inner
                .batch
                .write(
                    "queue_progress",
                    name,
                    "UPDATE queue_processing SET progress = CASE WHEN EXISTS (SELECT 1 FROM \
                     switchyard_tasks t WHERE t.name = ?1 AND t.state = 'running' AND \
                     t.receipt = ?2 AND t.cancel_requested <> 0) THEN progress ELSE ?3 END \
                     WHERE name = ?1 AND task_id = ?2 RETURNING (SELECT t.task_id FROM \
                     switchyard_tasks t WHERE t.name = ?1 AND t.state = 'running' AND \
                     t.receipt = ?2 AND t.cancel_requested <> 0)",
                    vec![
                        Arg::Text(name.to_string()),
                        Arg::Text(receipt.as_str().to_string()),
                        Arg::Blob(progress.to_vec()),
                    ],
                )
                .await?;
            return tasks::unless_cancelled("queue_progress", name, &rows);
        }
        let rows = self
            .inner
            .batch
            .write(
                "queue_progress",
                name,
                "UPDATE queue_processing SET progress = ?3 WHERE name = ?1 AND task_id = ?2 \
                 RETURNING 1",
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.as_str().to_string()),
                    Arg::Blob(progress.to_vec()),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        type Row = (Vec<u8>, i64, String, f64, Option<Vec<u8>>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT COALESCE(body, X''), attempts, tier, CAST(COALESCE(deadline, 0) AS REAL), \
             progress FROM queue_processing WHERE name = ?1 ORDER BY deadline, rowid LIMIT ?2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("queue_in_flight", name, e))?;
        Ok(rows
            .into_iter()
            .map(|(body, attempts, tier, deadline, progress)| {
                InFlight::new(
                    task_id_of(&body),
                    body,
                    attempts_u32(attempts),
                    tier_of(&tier),
                    deadline,
                    progress,
                )
            })
            .collect())
    }

    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool> {
        let op = "queue_release";
        if is_recorded(receipt.as_str()) {
            return self.requeue_recorded(op, name, receipt, None, delay).await;
        }
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, name).await?;
        let held: Option<(String, i64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 \
             RETURNING tier, attempts, COALESCE(body, X'')",
        )
        .bind(name)
        .bind(receipt.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db(op, name, e))?;
        let Some((tier, attempts, body)) = held else {
            tx.rollback().await.map_err(|e| db(op, name, e))?;
            return Ok(false);
        };
        requeue(&mut tx, op, name, &tier, &body, attempts, delay).await?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>> {
        let row: Option<(String, Vec<u8>, i64, f64)> = sqlx::query_as(
            "SELECT tier, COALESCE(body, X''), attempts, CAST(COALESCE(deadline, 0) AS REAL) \
             FROM queue_processing WHERE name = ?1 AND task_id = ?2",
        )
        .bind(name)
        .bind(receipt.as_str())
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("queue_delivered", name, e))?;
        Ok(row.map(|(tier, body, attempts, deadline)| Delivery {
            receipt: receipt.clone(),
            task_id: task_id_of(&body),
            body,
            attempt: attempts_u32(attempts),
            priority: tier_of(&tier),
            visible_until: deadline,
        }))
    }
}
