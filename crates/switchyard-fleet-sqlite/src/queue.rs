//! The job queue of [`SqliteFleetBackend`]: [`JobQueue`] (guarantees 7–15 and 23), on the seed's tables.

use super::*;

#[async_trait]
impl JobQueue for SqliteFleetBackend {
    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        self.inner
            .batch
            .write(
                "queue_push",
                name,
                INSERT_TASK,
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(tier_name(priority).to_string()),
                    Arg::Blob(body.to_vec()),
                    Arg::Int(0),
                ],
            )
            .await?;
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    // TEMPORARY scaffold (session 6): replaced by this adapter's real delayed submit.
    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        submit: &switchyard_core::fleet::Submit<'_>,
    ) -> Result<SubmitOutcome> {
        if submit.run_at != switchyard_core::fleet::RunAt::Now {
            return Err(switchyard_core::Error::invalid("scaffold", "not built yet"));
        }
        match &submit.idem {
            Some(idem) => {
                self.queue_submit_once(name, body, submit.priority, idem.clone())
                    .await
            }
            None => self
                .queue_push(name, body, submit.priority)
                .await
                .map(|()| SubmitOutcome::Enqueued),
        }
    }

    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        check_name("queue", name)?;
        check_name("idem.ns", idem.ns)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_submit_once", name).await?;
        let set = Self::kv_set_nx_on(&mut tx, idem.ns, idem.key, idem.value, idem.ttl)
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
        if !set {
            let stored: Option<Vec<u8>> = sqlx::query_scalar(
                "SELECT COALESCE(value, X'') FROM kv WHERE ns = ?1 AND key = ?2",
            )
            .bind(idem.ns)
            .bind(idem.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
            tx.rollback()
                .await
                .map_err(|e| db("queue_submit_once", name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored.unwrap_or_default()));
        }
        insert_task(
            &mut tx,
            "queue_submit_once",
            name,
            tier_name(priority),
            body,
            0,
        )
        .await?;
        tx.commit()
            .await
            .map_err(|e| db("queue_submit_once", name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier IN ('high', 'normal', 'low')",
        )
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("queue_size", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
        // One statement is one read transaction: every count comes from the same snapshot, and
        // `now` is evaluated once. Cut-offs are those of sweep and drain (`<= now`).
        type Row = (i64, i64, i64, i64, i64, i64, i64, i64);
        let row: Row = sqlx::query_as(concat!(
            "SELECT (SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'high'), ",
            "(SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'normal'), ",
            "(SELECT COUNT(*) FROM queues WHERE name = ?1 AND tier = 'low'), ",
            "(SELECT COUNT(*) FROM queue_processing WHERE name = ?1), ",
            "(SELECT COUNT(*) FROM queue_processing WHERE name = ?1 AND deadline <= ",
            now_sql!(),
            "), (SELECT COUNT(*) FROM queue_scheduled WHERE name = ?1), ",
            "(SELECT COUNT(*) FROM queue_scheduled WHERE name = ?1 AND available_at <= ",
            now_sql!(),
            "), (SELECT COUNT(*) FROM queue_dead WHERE name = ?1)"
        ))
        .bind(name)
        .fetch_one(self.r())
        .await
        .map_err(|e| db("queue_stats", name, e))?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let mut stats = QueueStats::default();
        stats.high = n(row.0);
        stats.normal = n(row.1);
        stats.low = n(row.2);
        stats.in_flight = n(row.3);
        stats.overdue = n(row.4);
        stats.scheduled = n(row.5);
        stats.due = n(row.6);
        stats.dead = n(row.7);
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let mut out = Vec::new();
        // One read transaction, so the three tiers are one snapshot (rolled back if dropped).
        let mut conn = self
            .r()
            .begin()
            .await
            .map_err(|e| db("queue_peek", name, e))?;
        for p in Priority::ORDER {
            if out.len() >= n {
                break;
            }
            let bodies: Vec<Vec<u8>> = sqlx::query_scalar(
                "SELECT COALESCE(body, X'') FROM queues WHERE name = ?1 AND tier = ?2 ORDER BY id LIMIT ?3",
            )
            .bind(name)
            .bind(tier_name(p))
            .bind(to_i64(n - out.len()))
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| db("queue_peek", name, e))?;
            out.extend(bodies);
        }
        conn.commit().await.map_err(|e| db("queue_peek", name, e))?;
        Ok(out)
    }

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut poll = Duration::from_millis(5);
        let mut first = true;
        loop {
            let notified = self.inner.pushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Always try once, so `timeout = 0` takes a ready task. Later polls look on
            // the read pool first, so idle reservers do not take the file's write lock.
            if (first || self.has_ready(name).await?)
                && let Some(d) = self.try_reserve(name, visibility_ms).await?
            {
                return Ok(Some(d));
            }
            first = false;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // A push of this process wakes us; other processes' pushes and due scheduled tasks
            // are found by polling with backoff.
            let _ = tokio::time::timeout(left.min(poll), notified).await;
            poll = (poll * 2).min(self.inner.max_poll);
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        // RETURNING, not rows_affected: a batch reports rows per statement, not changes.
        let rows = self
            .inner
            .batch
            .write(
                "queue_ack",
                name,
                "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 RETURNING 1",
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.as_str().to_string()),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_nack", name).await?;
        let held: Option<(String, i64)> = sqlx::query_as(
            "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 RETURNING tier, attempts",
        )
        .bind(name)
        .bind(receipt.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("queue_nack", name, e))?;
        let Some((tier, attempts)) = held else {
            tx.rollback().await.map_err(|e| db("queue_nack", name, e))?;
            return Ok(false);
        };
        match ttl_ms(Some(delay)) {
            // A row of its own per retry: identical bodies never collapse.
            Some(ms) => {
                sqlx::query(concat!(
                    "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ",
                    now_sql!(),
                    " + ?2, ?3, ?4, ?5)"
                ))
                .bind(name)
                .bind(secs(ms))
                .bind(body)
                .bind(&tier)
                .bind(attempts)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("queue_nack", name, e))?;
            }
            None => insert_task(&mut tx, "queue_nack", name, &tier, body, attempts).await?,
        }
        tx.commit().await.map_err(|e| db("queue_nack", name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let rows = self
            .inner
            .batch
            .write(
                "queue_extend",
                name,
                concat!(
                    "UPDATE queue_processing SET deadline = ",
                    now_sql!(),
                    " + ?3 WHERE name = ?1 AND task_id = ?2 RETURNING 1"
                ),
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Text(receipt.as_str().to_string()),
                    Arg::Real(secs(visibility_ms)),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_fail", name).await?;
        let res = sqlx::query("DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2")
            .bind(name)
            .bind(receipt.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("queue_fail", name, e))?;
        if res.rows_affected() != 1 {
            tx.rollback().await.map_err(|e| db("queue_fail", name, e))?;
            return Ok(false);
        }
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES (?1, ?2)")
            .bind(name)
            .bind(body)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("queue_fail", name, e))?;
        tx.commit().await.map_err(|e| db("queue_fail", name, e))?;
        Ok(true)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "queue_sweep_expired", name).await?;
        // The DELETE decides: a reservation acked or swept by someone else is simply not there
        //.
        let mut lapsed: Vec<(f64, String, Vec<u8>, i64)> = sqlx::query_as(concat!(
            "DELETE FROM queue_processing WHERE name = ?1 AND deadline <= ",
            now_sql!(),
            " RETURNING CAST(deadline AS REAL), tier, COALESCE(body, X''), attempts"
        ))
        .bind(name)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db("queue_sweep_expired", name, e))?;
        lapsed.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, tier, body, attempts) in &lapsed {
            insert_task(&mut tx, "queue_sweep_expired", name, tier, body, *attempts).await?;
        }
        tx.commit()
            .await
            .map_err(|e| db("queue_sweep_expired", name, e))?;
        if !lapsed.is_empty() {
            self.inner.pushed.notify_waiters();
        }
        Ok(lapsed.len() as u64)
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES (?1, ?2)")
            .bind(name)
            .bind(body)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("queue_dead", name, e))?;
        Ok(())
    }
}
