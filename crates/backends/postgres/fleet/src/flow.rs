//! Flow control and what workers report, for [`PostgresFleetBackend`]: [`QueueFlow`]
//! (guarantees `queue.pause`, `queue.rate_limit`, `queue.progress` and `queue.release`). Pause and
//! the rate limit live in `fleet_queue_flow`, read by `fleet_reserve_many` in the reserve's own
//! transaction (ADR 0295); progress is a column of the reservation's row.

use super::*;

/// SQL: the flow row holds nothing of task control (ADR 0380): no retention set and no end ever
/// recorded (so no counts, kept records or events), so it may go when pause and limit do.
macro_rules! flow_row_bare {
    () => {
        "(event_seq = 0 AND ok_n IS NULL AND ok_ms IS NULL AND bad_n IS NULL AND bad_ms IS NULL \
          AND ev_n IS NULL AND ev_ms IS NULL)"
    };
}

#[async_trait]
impl QueueFlowOps for PostgresFleetBackend {
    async fn queue_pause(&self, name: &str) -> Result<bool> {
        // The row lock this takes waits for reserves that are spending the rate limit's tokens;
        // every reserve that starts later sees the pause.
        let res = sqlx::query(
            "INSERT INTO fleet_queue_flow (name, paused) VALUES ($1, true) \
             ON CONFLICT (name) DO UPDATE SET paused = true WHERE NOT fleet_queue_flow.paused",
        )
        .bind(name)
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_pause", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn queue_resume(&self, name: &str) -> Result<bool> {
        // A queue with no rate limit loses its flow row, so its reserves go back to taking no
        // lock on it (ADR 0295), unless the row keeps the queue's task control (ADR 0380).
        // Every waiting reserver is woken.
        let resumed: i64 = sqlx::query_scalar(concat!(
            "WITH gone AS (DELETE FROM fleet_queue_flow \
               WHERE name = $1 AND paused AND rate_max IS NULL AND ",
            flow_row_bare!(),
            " RETURNING 1), \
             kept AS (UPDATE fleet_queue_flow SET paused = false \
               WHERE name = $1 AND paused AND NOT (rate_max IS NULL AND ",
            flow_row_bare!(),
            ") \
               RETURNING 1), \
             resumed AS (SELECT 1 FROM gone UNION ALL SELECT 1 FROM kept) \
             SELECT count(*) FROM resumed WHERE fleet_wake($2, $3)"
        ))
        .bind(name)
        .bind(self.channel())
        .bind(wake_all_payload(name))
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_resume", name, e))?;
        Ok(resumed > 0)
    }

    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()> {
        let op = "queue_set_rate_limit";
        // Either way waiting reservers are woken: a full bucket or no limit may let them take
        // tasks they were waiting tokens for.
        let query = match limit {
            Some(limit) => sqlx::query(
                "WITH put AS (INSERT INTO fleet_queue_flow \
                       (name, rate_max, rate_per_ms, tokens, refilled_at) \
                       VALUES ($1, $2, $3, $2, fleet_now()) \
                       ON CONFLICT (name) DO UPDATE SET rate_max = excluded.rate_max, \
                         rate_per_ms = excluded.rate_per_ms, tokens = excluded.tokens, \
                         refilled_at = excluded.refilled_at RETURNING 1) \
                     SELECT fleet_wake($4, $5) FROM put",
            )
            .bind(name)
            .bind(i64::from(limit.max))
            .bind(i64::try_from(limit.per_ms()).unwrap_or(i64::MAX)),
            None => sqlx::query(concat!(
                "WITH gone AS (DELETE FROM fleet_queue_flow WHERE name = $1 AND NOT paused \
                   AND ",
                flow_row_bare!(),
                "), \
                 kept AS (UPDATE fleet_queue_flow SET rate_max = NULL, rate_per_ms = NULL, \
                   tokens = NULL, refilled_at = NULL \
                   WHERE name = $1 AND (paused OR NOT ",
                flow_row_bare!(),
                ")) \
                 SELECT fleet_wake($2, $3)"
            ))
            .bind(name),
        };
        query
            .bind(self.channel())
            .bind(wake_all_payload(name))
            .execute(self.pool())
            .await
            .map_err(|e| db(op, name, e))?;
        Ok(())
    }

    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool> {
        // A delivery whose task's cancel was requested reports no more (ADR 0380).
        let res = sqlx::query(
            "UPDATE fleet_tasks SET progress = $3 \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1 AND NOT cancel_requested",
        )
        .bind(name)
        .bind(raw(receipt))
        .bind(progress)
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_progress", name, e))?;
        if res.rows_affected() == 1 {
            return Ok(true);
        }
        self.refuse_cancelled("queue_progress", name, receipt).await
    }

    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<(i16, Vec<u8>, i32, f64, Option<Vec<u8>>)> = sqlx::query_as(
            "SELECT tier, body, attempts, due, progress FROM fleet_tasks \
             WHERE name = $1 AND state = 'reserved' ORDER BY due, id LIMIT $2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("queue_in_flight", name, e))?;
        Ok(rows
            .into_iter()
            .map(|(tier, body, attempts, due, progress)| {
                InFlight::new(
                    task_id_of(&body),
                    body,
                    u32::try_from(attempts.max(0)).unwrap_or(0),
                    tier_of(tier),
                    due,
                    progress,
                )
            })
            .collect())
    }

    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool> {
        self.requeue_delivery("queue_release", name, receipt, None, delay)
            .await
    }

    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>> {
        let row: Option<(i16, Vec<u8>, i32, f64)> = sqlx::query_as(
            "SELECT tier, body, attempts, due FROM fleet_tasks \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1",
        )
        .bind(name)
        .bind(raw(receipt))
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("queue_delivered", name, e))?;
        Ok(row.map(|(tier, body, attempts, due)| {
            queue::delivery(raw(receipt).to_string(), tier, body, attempts, due)
        }))
    }
}
