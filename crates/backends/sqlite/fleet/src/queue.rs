//! The job queue of [`SqliteFleetBackend`]: [`JobQueue`] (guarantees `queue.priority_fifo`,
//! `queue.reserve_atomic`, `queue.receipts`, `queue.attempts`, `queue.nack`, `queue.fail_atomic`,
//! `queue.sweep`, `queue.bad_bodies`, `queue.submit_once`, `queue.stats` and `queue.promote_due`),
//! on the seed's tables.

use super::*;

#[async_trait]
impl QueueOps for SqliteFleetBackend {
    async fn queue_push(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
    ) -> Result<()> {
        if head.id.is_some() {
            return self
                .submit_recorded("queue_push", name, body, head, tier_name(priority), None)
                .await;
        }
        self.inner
            .batch
            .push(name, tier_name(priority), vec![body.to_vec()])
            .await?;
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome> {
        let later = Later::of(submit.run_at)?;
        let tier = tier_name(submit.priority);
        if let Some(idem) = &submit.idem {
            return self
                .submit_idem("queue_submit", name, body, head, tier, idem, later)
                .await;
        }
        let Some(later) = later else {
            self.queue_push(name, body, head, submit.priority).await?;
            return Ok(SubmitOutcome::Enqueued);
        };
        if head.id.is_some() {
            self.submit_recorded("queue_submit", name, body, head, tier, Some(later))
                .await?;
            return Ok(SubmitOutcome::Enqueued);
        }
        let (sql, at) = later.sql();
        self.inner
            .batch
            .write(
                "queue_submit",
                name,
                sql,
                vec![
                    Arg::Text(name.to_string()),
                    Arg::Real(at),
                    Arg::Blob(body.to_vec()),
                    Arg::Text(tier.to_string()),
                ],
            )
            .await?;
        // A waiting reserve learns when the task is due.
        self.inner.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
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
        // One statement is one read transaction: every count comes from the same snapshot, and
        // `now` is evaluated once. Cut-offs are those of sweep and drain (`<= now`).
        type Row = (
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            Option<i64>,
            Option<i64>,
            Option<f64>,
            i64,
            i64,
            i64,
            i64,
        );
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
            "), (SELECT COUNT(*) FROM queue_dead WHERE name = ?1), ",
            "COALESCE((SELECT paused FROM switchyard_queue_flow WHERE name = ?1), 0), ",
            "(SELECT rate_max FROM switchyard_queue_flow WHERE name = ?1), ",
            "(SELECT rate_per_ms FROM switchyard_queue_flow WHERE name = ?1), ",
            "(SELECT (1.0 - ",
            tokens_sql!(),
            ") * f.rate_per_ms / f.rate_max FROM switchyard_queue_flow f ",
            "WHERE f.name = ?1 AND f.rate_max IS NOT NULL), ",
            // End counts of recorded tasks (ADR 0380), written by the ending steps.
            "COALESCE(e.completed, 0), COALESCE(e.failed, 0), COALESCE(e.dead, 0), ",
            "COALESCE(e.cancelled, 0) FROM (SELECT 1) LEFT JOIN switchyard_queue_tasks e ON e.name = ?1"
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
        stats.paused = row.8 != 0;
        stats.completed = n(row.12);
        stats.failed = n(row.13);
        stats.dead_lettered = n(row.14);
        stats.cancelled = n(row.15);
        stats.rate_limit = match (row.9, row.10) {
            (Some(max), Some(per_ms)) => Some(stored_limit(name, max, per_ms)?),
            _ => None,
        };
        // Fractions of a millisecond round up: 0 means a token is there now.
        stats.throttled_ms = row.11.map_or(0, |ms| ms.max(0.0).ceil() as u64);
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
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

    async fn queue_try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
        again: bool,
    ) -> Result<Attempt> {
        let op = if max == 1 {
            "queue_reserve"
        } else {
            "queue_reserve_many"
        };
        // Later tries look on the read pool first, so idle reservers do not take the file's
        // write lock; the look also says when to look again.
        if again && let Ready::After(hint) = self.readiness(op, name).await? {
            return Ok(Attempt::nothing(hint));
        }
        let got = self.try_reserve(op, name, max, visibility_ms).await?;
        Ok(Attempt::got(got))
    }

    /// This process's pushes, resumes and limit changes wake a waiting reserve; other
    /// processes' writes are polled for, with a backoff from 5 ms to the configured maximum.
    fn queue_wake(&self, _name: &str) -> Option<Arc<Notify>> {
        Some(self.inner.pushed.clone())
    }

    fn queue_poll(&self) -> (Duration, Duration) {
        (Duration::from_millis(5), self.inner.max_poll)
    }

    async fn queue_ack(
        &self,
        name: &str,
        receipt: &Receipt,
        result: Option<&[u8]>,
    ) -> Result<bool> {
        let receipt = receipt.as_str();
        if !is_recorded(receipt) {
            // Rows, not rows_affected: a batch reports rows per statement, not changes.
            let rows = self
                .inner
                .batch
                .ack(name, vec![receipt.to_string()], None)
                .await?;
            return Ok(rows.len() == 1);
        }
        let rows = self
            .inner
            .batch
            .ack(name, vec![receipt.to_string()], result.map(<[u8]>::to_vec))
            .await?;
        match tasks::acked(&rows, receipt) {
            tasks::Acked::Stale => Ok(false),
            tasks::Acked::Done => {
                self.ended();
                Ok(true)
            }
            tasks::Acked::Cancelled(id) => {
                self.ended();
                Err(tasks::cancelled(id))
            }
        }
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
        delay: Duration,
    ) -> Result<bool> {
        if is_recorded(receipt.as_str()) {
            return self
                .requeue_recorded("queue_nack", name, receipt, Some((body, head)), delay)
                .await;
        }
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
        requeue(&mut tx, "queue_nack", name, &tier, body, attempts, delay).await?;
        tx.commit().await.map_err(|e| db("queue_nack", name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility_ms: u64,
    ) -> Result<bool> {
        if is_recorded(receipt.as_str()) {
            // A cancelled delivery is not extended: the deadline is written back as it was,
            // and the task's id comes back to say why (ADR 0380).
            let rows = self
                .inner
                .batch
                .write(
                    "queue_extend",
                    name,
                    concat!(
                        "UPDATE queue_processing SET deadline = CASE WHEN EXISTS (",
                        "SELECT 1 FROM switchyard_tasks t WHERE t.name = ?1 AND t.state = 'running' ",
                        "AND t.receipt = ?2 AND t.cancel_requested <> 0) THEN deadline ELSE ",
                        now_sql!(),
                        " + ?3 END WHERE name = ?1 AND task_id = ?2 RETURNING (SELECT t.task_id ",
                        "FROM switchyard_tasks t WHERE t.name = ?1 AND t.state = 'running' ",
                        "AND t.receipt = ?2 AND t.cancel_requested <> 0)"
                    ),
                    vec![
                        Arg::Text(name.to_string()),
                        Arg::Text(receipt.as_str().to_string()),
                        Arg::Real(secs(visibility_ms)),
                    ],
                )
                .await?;
            return tasks::unless_cancelled("queue_extend", name, &rows);
        }
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

    async fn queue_fail(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool> {
        if is_recorded(receipt.as_str()) {
            return self.fail_recorded(name, receipt, body, head).await;
        }
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
        let op = "queue_sweep_expired";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, name).await?;
        // The DELETE decides: a reservation acked or swept by someone else is simply not there.
        type Lapsed = (f64, String, Vec<u8>, i64, String, Option<Vec<u8>>);
        let mut lapsed: Vec<Lapsed> = sqlx::query_as(concat!(
            "DELETE FROM queue_processing WHERE name = ?1 AND deadline <= ",
            now_sql!(),
            " RETURNING CAST(deadline AS REAL), tier, COALESCE(body, X''), attempts, task_id, progress"
        ))
        .bind(name)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db(op, name, e))?;
        lapsed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut returned, mut ended) = (0u64, false);
        for (_, tier, body, attempts, receipt, progress) in &lapsed {
            // A recorded delivery: back to waiting, or, when a cancel reached it, ended
            // `cancelled` instead of returned (ADR 0380).
            let record = match is_recorded(receipt) {
                true => tasks::running_record(&mut tx, op, name, receipt).await?,
                false => None,
            };
            match record {
                None => insert_task(&mut tx, op, name, tier, body, *attempts).await?,
                Some((id, true)) => {
                    tasks::end_delivery_cancelled(&mut tx, op, name, &id, progress.as_deref())
                        .await?;
                    ended = true;
                    continue;
                }
                Some((id, false)) => {
                    let row = insert_task_row(&mut tx, op, name, tier, body, *attempts).await?;
                    tasks::requeued(
                        &mut tx,
                        op,
                        name,
                        &id,
                        "waiting",
                        row,
                        progress.as_deref(),
                        None,
                    )
                    .await?;
                }
            }
            returned += 1;
        }
        tx.commit().await.map_err(|e| db(op, name, e))?;
        drop(w);
        if returned > 0 {
            self.inner.pushed.notify_waiters();
        }
        if ended {
            self.ended();
        }
        Ok(returned)
    }

    async fn queue_promote_due(&self, name: &str) -> Result<u64> {
        let mut w = self.writer().await?;
        // The reserve's own move, in a write transaction of its own: its `DELETE … RETURNING`
        // decides which rows move (a row another promoter or a reserve moved is not there), and
        // it skips a paused queue (guarantee `queue.promote_due`).
        let mut tx = begin(&mut w, "queue_promote_due", name).await?;
        let moved = drain_scheduled(&mut tx, "queue_promote_due", name).await?;
        tx.commit()
            .await
            .map_err(|e| db("queue_promote_due", name, e))?;
        if moved > 0 {
            self.inner.pushed.notify_waiters();
        }
        Ok(moved as u64)
    }

    async fn queue_dead(&self, name: &str, body: &[u8], head: &TaskHead) -> Result<()> {
        if let Some(id) = &head.id {
            // The letter and its record's end in one transaction (ADR 0380).
            let op = "queue_dead";
            let ended = {
                let mut w = self.writer().await?;
                let mut tx = begin(&mut w, op, name).await?;
                let row: i64 = sqlx::query_scalar(
                    "INSERT INTO queue_dead (name, body) VALUES (?1, ?2) RETURNING id",
                )
                .bind(name)
                .bind(body)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
                let ended = tasks::letter_added(&mut tx, op, name, id, row, head).await?;
                tx.commit().await.map_err(|e| db(op, name, e))?;
                ended
            };
            if ended {
                self.ended();
            }
            return Ok(());
        }
        sqlx::query("INSERT INTO queue_dead (name, body) VALUES (?1, ?2)")
            .bind(name)
            .bind(body)
            .execute(&mut *self.writer().await?)
            .await
            .map_err(|e| db("queue_dead", name, e))?;
        Ok(())
    }
}

/// When a submitted task that does not run at once becomes due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Later {
    /// This many seconds after the statement that schedules it runs (SQLite's clock).
    After(f64),
    /// At this instant, unix seconds.
    At(f64),
}

impl Later {
    /// `None` for a task that runs at once: [`RunAt::Now`], a zero delay, or an instant that
    /// has passed. Whether an instant has passed is judged on this machine's clock, which is
    /// the one SQLite reads for `'now'`; an instant that passes between this judgement and the
    /// insert makes a task that is due at once, which the next reserve moves to its tier.
    fn of(run_at: RunAt) -> Result<Option<Later>> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let Some(ms) = delay_ms(run_at, now)? else {
            return Ok(None);
        };
        Ok(Some(match run_at {
            RunAt::At(at) => Later::At(at),
            _ => Later::After(secs(ms)),
        }))
    }

    /// The `(at, delay)` columns of `switchyard_task_submit` for this instant.
    pub(crate) fn columns(self) -> (Arg, Arg) {
        match self {
            Later::After(s) => (Arg::Null, Arg::Real(s)),
            Later::At(at) => (Arg::Real(at), Arg::Null),
        }
    }

    /// The insert into `queue_scheduled` (parameters name, `at`, body, tier) and its `at`.
    fn sql(self) -> (&'static str, f64) {
        match self {
            Later::After(s) => (
                concat!(
                    "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ",
                    now_sql!(),
                    " + ?2, ?3, ?4, 0)"
                ),
                s,
            ),
            Later::At(at) => (
                "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ?2, ?3, ?4, 0)",
                at,
            ),
        }
    }
}

/// A stored rate limit, as [`RateLimit`]; a row no limit could have written is corrupt.
pub(crate) fn stored_limit(name: &str, max: i64, per_ms: i64) -> Result<RateLimit> {
    let max = u32::try_from(max)
        .map_err(|e| Error::corrupt(format!("switchyard_queue_flow[{name:?}].rate_max"), e))?;
    let per = u64::try_from(per_ms)
        .map_err(|e| Error::corrupt(format!("switchyard_queue_flow[{name:?}].rate_per_ms"), e))?;
    RateLimit::new(max, Duration::from_millis(per))
        .map_err(|e| Error::corrupt(format!("switchyard_queue_flow[{name:?}]"), e))
}

/// Puts a body that left a delivery back into its tier, at the end or after `delay`, keeping
/// its attempt count (nack and release). A row of its own per retry: identical bodies never
/// collapse.
pub(crate) async fn requeue(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    tier: &str,
    body: &[u8],
    attempts: i64,
    delay: Duration,
) -> Result<()> {
    match ttl_ms(Some(delay)) {
        Some(ms) => {
            sqlx::query(concat!(
                "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ",
                now_sql!(),
                " + ?2, ?3, ?4, ?5)"
            ))
            .bind(name)
            .bind(secs(ms))
            .bind(body)
            .bind(tier)
            .bind(attempts)
            .execute(&mut *conn)
            .await
            .map_err(|e| db(op, name, e))?;
            Ok(())
        }
        None => insert_task(conn, op, name, tier, body, attempts).await,
    }
}

impl SqliteFleetBackend {
    /// Sets the idempotency key and submits (now or `later`) in one write transaction; a
    /// duplicate submits nothing and returns the stored value (guarantees `queue.submit_once` and
    /// `queue.delayed`).
    #[allow(clippy::too_many_arguments)]
    async fn submit_idem(
        &self,
        op: &'static str,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        tier: &str,
        idem: &IdempotencyKey<'_>,
        later: Option<Later>,
    ) -> Result<SubmitOutcome> {
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, name).await?;
        let set = Self::kv_set_nx_on(&mut tx, idem.ns, idem.key, idem.value, idem.ttl)
            .await
            .map_err(|e| db(op, name, e))?;
        if !set {
            let stored: Option<Vec<u8>> = sqlx::query_scalar(
                "SELECT COALESCE(value, X'') FROM kv WHERE ns = ?1 AND key = ?2",
            )
            .bind(idem.ns)
            .bind(idem.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
            tx.rollback().await.map_err(|e| db(op, name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored.unwrap_or_default()));
        }
        if let Some(id) = &head.id {
            // A taken id undoes the statement; the key is rolled back with it.
            let (at, delay) = later.map_or((Arg::Null, Arg::Null), Later::columns);
            let mut q = sqlx::query(SUBMIT_ONE);
            for a in submit_args(name, tier, body, head, at, delay) {
                q = a.bind_to(q);
            }
            if let Err(e) = q.execute(&mut *tx).await {
                let e = match db(op, name, e) {
                    Error::AlreadyExists { what, .. } => Error::AlreadyExists {
                        what,
                        id: id.clone(),
                    },
                    e => e,
                };
                tx.rollback().await.map_err(|e| db(op, name, e))?;
                return Err(e);
            }
        } else {
            match later {
                None => insert_task(&mut tx, op, name, tier, body, 0).await?,
                Some(later) => {
                    let (sql, at) = later.sql();
                    sqlx::query(sql)
                        .bind(name)
                        .bind(at)
                        .bind(body)
                        .bind(tier)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| db(op, name, e))?;
                }
            }
        }
        tx.commit().await.map_err(|e| db(op, name, e))?;
        self.inner.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    /// Submits a body with an id (now, or `later`) and creates its record, in one statement of
    /// the group commit; a taken id is `AlreadyExists` and writes nothing.
    async fn submit_recorded(
        &self,
        op: &'static str,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        tier: &str,
        later: Option<Later>,
    ) -> Result<()> {
        let (at, delay) = later.map_or((Arg::Null, Arg::Null), Later::columns);
        let args = submit_args(name, tier, body, head, at, delay);
        if let Err(e) = self.inner.batch.submit(op, name, Vec::from(args)).await {
            let ids = head.id.as_deref();
            return Err(taken(self.r(), name, ids, e).await);
        }
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    /// Ends a recorded delivery by putting it back (nack with the new body, or release with
    /// its own), in one write transaction; a cancelled delivery ends `cancelled` instead and
    /// answers `Error::Cancelled` (ADR 0380).
    pub(crate) async fn requeue_recorded(
        &self,
        op: &'static str,
        name: &str,
        receipt: &Receipt,
        new_body: Option<(&[u8], &TaskHead)>,
        delay: Duration,
    ) -> Result<bool> {
        let outcome = {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            type Held = (String, i64, Vec<u8>, Option<Vec<u8>>);
            let held: Option<Held> = sqlx::query_as(
                "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 \
                 RETURNING tier, attempts, COALESCE(body, X''), progress",
            )
            .bind(name)
            .bind(receipt.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
            let Some((tier, attempts, own, progress)) = held else {
                tx.rollback().await.map_err(|e| db(op, name, e))?;
                return Ok(false);
            };
            let body = new_body.map_or(own.as_slice(), |b| b.0);
            let record = tasks::running_record(&mut tx, op, name, receipt.as_str()).await?;
            let outcome = match record {
                None => {
                    requeue(&mut tx, op, name, &tier, body, attempts, delay).await?;
                    Ok(true)
                }
                Some((id, true)) => {
                    tasks::end_delivery_cancelled(&mut tx, op, name, &id, progress.as_deref())
                        .await?;
                    Err(tasks::cancelled(id))
                }
                Some((id, false)) => {
                    let (state, row) =
                        requeue_row(&mut tx, op, name, &tier, body, attempts, delay).await?;
                    let head = new_body.map(|b| b.1);
                    tasks::requeued(
                        &mut tx,
                        op,
                        name,
                        &id,
                        state,
                        row,
                        progress.as_deref(),
                        head,
                    )
                    .await?;
                    Ok(true)
                }
            };
            tx.commit().await.map_err(|e| db(op, name, e))?;
            outcome
        };
        match &outcome {
            Ok(_) => self.inner.pushed.notify_waiters(),
            Err(_) => self.ended(),
        }
        outcome
    }

    /// Dead-letters a recorded delivery and ends its record `dead`, in one write transaction;
    /// a cancelled delivery ends `cancelled` instead, with no letter (ADR 0380).
    async fn fail_recorded(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool> {
        let op = "queue_fail";
        let outcome = {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            let held: Option<(Option<Vec<u8>>,)> = sqlx::query_as(
                "DELETE FROM queue_processing WHERE name = ?1 AND task_id = ?2 RETURNING progress",
            )
            .bind(name)
            .bind(receipt.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
            let Some((progress,)) = held else {
                tx.rollback().await.map_err(|e| db(op, name, e))?;
                return Ok(false);
            };
            let record = tasks::running_record(&mut tx, op, name, receipt.as_str()).await?;
            let outcome = match record {
                Some((id, true)) => {
                    tasks::end_delivery_cancelled(&mut tx, op, name, &id, progress.as_deref())
                        .await?;
                    Err(tasks::cancelled(id))
                }
                record => {
                    let row: i64 = sqlx::query_scalar(
                        "INSERT INTO queue_dead (name, body) VALUES (?1, ?2) RETURNING id",
                    )
                    .bind(name)
                    .bind(body)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(|e| db(op, name, e))?;
                    if let Some((id, _)) = record {
                        tasks::delivery_dead(
                            &mut tx,
                            op,
                            name,
                            &id,
                            row,
                            head,
                            progress.as_deref(),
                        )
                        .await?;
                    }
                    Ok(true)
                }
            };
            tx.commit().await.map_err(|e| db(op, name, e))?;
            outcome
        };
        self.ended();
        outcome
    }
}

/// Submits one body through `switchyard_task_submit` (see [`submit_args`]).
pub(crate) const SUBMIT_ONE: &str = "INSERT INTO switchyard_task_submit \
     (name, tier, body, task_id, max_attempts, last_error, at, delay) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// The eight values of one row of `switchyard_task_submit`: name, tier, body, the head's id,
/// `max_attempts` and last error, and when it runs (`at`, or `delay` seconds from now; both
/// NULL: now).
pub(crate) fn submit_args(
    name: &str,
    tier: &str,
    body: &[u8],
    head: &TaskHead,
    at: Arg,
    delay: Arg,
) -> [Arg; 8] {
    let opt_text = |v: Option<&str>| v.map_or(Arg::Null, |v| Arg::Text(v.to_owned()));
    [
        Arg::Text(name.to_owned()),
        Arg::Text(tier.to_owned()),
        Arg::Blob(body.to_vec()),
        opt_text(head.id.as_deref()),
        head.max_attempts
            .map_or(Arg::Null, |m| Arg::Int(i64::from(m))),
        opt_text(head.last_error.as_deref()),
        at,
        delay,
    ]
}

/// [`requeue`], answering where the body went: `("scheduled", queue_scheduled.id)` after a
/// delay, else `("waiting", queues.id)`.
pub(crate) async fn requeue_row(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    tier: &str,
    body: &[u8],
    attempts: i64,
    delay: Duration,
) -> Result<(&'static str, i64)> {
    match ttl_ms(Some(delay)) {
        Some(ms) => {
            let row: i64 = sqlx::query_scalar(concat!(
                "INSERT INTO queue_scheduled (name, available_at, body, tier, attempts) VALUES (?1, ",
                now_sql!(),
                " + ?2, ?3, ?4, ?5) RETURNING id"
            ))
            .bind(name)
            .bind(secs(ms))
            .bind(body)
            .bind(tier)
            .bind(attempts)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| db(op, name, e))?;
            Ok(("scheduled", row))
        }
        None => Ok((
            "waiting",
            insert_task_row(conn, op, name, tier, body, attempts).await?,
        )),
    }
}
