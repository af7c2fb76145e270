//! Dead letters of [`SqliteFleetBackend`]: [`DeadLetters`] (guarantees `dlq.fifo_atomic` and
//! `dlq.requeue_chosen`), on the seed's tables.

use super::*;

#[async_trait]
impl DeadLetterOps for SqliteFleetBackend {
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT COALESCE(body, X'') FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("dlq_peek", name, e))
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let op = "dlq_pop";
        let (rows, ended) = {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            let mut rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
                "DELETE FROM queue_dead WHERE id IN \
                 (SELECT id FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2) \
                 RETURNING id, COALESCE(body, X'')",
            )
            .bind(name)
            .bind(to_i64(n))
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
            rows.sort_by_key(|r| r.0);
            // A popped letter's record ends `failed` (ADR 0380).
            let ended = if !rows.is_empty() && tasks::has_dead(&mut tx, op, name).await? {
                let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                tasks::letters_gone(&mut tx, op, name, &ids).await?
            } else {
                0
            };
            tx.commit().await.map_err(|e| db(op, name, e))?;
            (rows, ended)
        };
        if ended > 0 {
            self.ended();
        }
        Ok(rows.into_iter().map(|r| r.1).collect())
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM queue_dead WHERE name = ?1")
            .bind(name)
            .fetch_one(self.r())
            .await
            .map_err(|e| db("dlq_length", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        let op = "dlq_clear";
        let (cleared, ended) = {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            // Cleared letters' records end `failed` first (ADR 0380).
            let ended = match tasks::has_dead(&mut tx, op, name).await? {
                true => {
                    let ids: Vec<i64> =
                        sqlx::query_scalar("SELECT id FROM queue_dead WHERE name = ?1")
                            .bind(name)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(|e| db(op, name, e))?;
                    tasks::letters_gone(&mut tx, op, name, &ids).await?
                }
                false => 0,
            };
            let res = sqlx::query("DELETE FROM queue_dead WHERE name = ?1")
                .bind(name)
                .execute(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
            tx.commit().await.map_err(|e| db(op, name, e))?;
            (res.rows_affected(), ended)
        };
        if ended > 0 {
            self.ended();
        }
        Ok(cleared)
    }

    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        let op = "dlq_requeue_chosen";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, name).await?;
        let recorded = tasks::has_dead(&mut tx, op, name).await?;
        let mut moved = Vec::with_capacity(bodies.len());
        for body in bodies {
            // The oldest letter with these bytes; the seed may have left a NULL body, which
            // reads (and is chosen) as empty bytes.
            let sql = if body.is_empty() {
                "DELETE FROM queue_dead WHERE id = (SELECT id FROM queue_dead WHERE name = ?1 \
                 AND (body = ?2 OR body IS NULL) ORDER BY id LIMIT 1) RETURNING id"
            } else {
                "DELETE FROM queue_dead WHERE id = (SELECT id FROM queue_dead WHERE name = ?1 \
                 AND body = ?2 ORDER BY id LIMIT 1) RETURNING id"
            };
            let found: Option<i64> = sqlx::query_scalar(sql)
                .bind(name)
                .bind(body.as_slice())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
            if let Some(letter) = found {
                let tier = tier_name(priority);
                if recorded {
                    // The letter's record waits again (ADR 0380).
                    let row = insert_task_row(&mut tx, op, name, tier, body, 0).await?;
                    tasks::revived(&mut tx, op, name, letter, row, tier).await?;
                } else {
                    insert_task(&mut tx, op, name, tier, body, 0).await?;
                }
            }
            moved.push(found.is_some());
        }
        tx.commit().await.map_err(|e| db(op, name, e))?;
        if moved.contains(&true) {
            self.inner.pushed.notify_waiters();
        }
        Ok(moved)
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        if n == 0 {
            return Ok(0);
        }
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "dlq_requeue", name).await?;
        let mut rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM queue_dead WHERE id IN \
             (SELECT id FROM queue_dead WHERE name = ?1 ORDER BY id LIMIT ?2) \
             RETURNING id, COALESCE(body, X'')",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("dlq_requeue", name, e))?;
        rows.sort_by_key(|r| r.0);
        let recorded = !rows.is_empty() && tasks::has_dead(&mut tx, "dlq_requeue", name).await?;
        let tier = tier_name(priority);
        for (letter, body) in &rows {
            if recorded {
                // The letter's record waits again (ADR 0380).
                let row = insert_task_row(&mut tx, "dlq_requeue", name, tier, body, 0).await?;
                tasks::revived(&mut tx, "dlq_requeue", name, *letter, row, tier).await?;
            } else {
                insert_task(&mut tx, "dlq_requeue", name, tier, body, 0).await?;
            }
        }
        tx.commit().await.map_err(|e| db("dlq_requeue", name, e))?;
        if !rows.is_empty() {
            self.inner.pushed.notify_waiters();
        }
        Ok(rows.len() as u64)
    }
}
