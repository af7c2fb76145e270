//! The job queue of [`PostgresFleetBackend`]: [`JobQueue`] (guarantees `queue.priority_fifo`,
//! `queue.reserve_atomic`, `queue.receipts`, `queue.attempts`, `queue.nack`, `queue.fail_atomic`,
//! `queue.sweep`, `queue.bad_bodies`, `queue.submit_once`, `queue.stats` and `queue.promote_due`),
//! one row per task in `fleet_tasks` (ADR 0231), blocking reserves woken by `LISTEN/NOTIFY` (ADR
//! 0232).

use super::*;

/// Appends a task to its tier; parameters name, tier, body, the queue's digest, this backend's
/// waiter name. Returns whether another backend holds a waiter lease on the queue, to be
/// notified once this commits (ADR 0235, 0347).
pub(crate) const PUSH: &str = "WITH pushed AS (INSERT INTO fleet_tasks (name, tier, body) VALUES ($1, $2, $3)) \
     SELECT EXISTS (SELECT 1 FROM fleet_waiters \
       WHERE queue_key = $4 AND until > fleet_now() AND waiter <> $5)";

/// [`PUSH`] of a body with an id, writing its record (ADR 0380); parameters as `PUSH`, then
/// the task id, `max_attempts`, last error. The unique index refuses a known id.
pub(crate) const PUSH_RECORD: &str = "WITH pushed AS (INSERT INTO fleet_tasks \
       (name, tier, body, task_id, max_attempts, last_error, submitted_at) \
       VALUES ($1, $2, $3, $6, $7, $8, fleet_now())) \
     SELECT EXISTS (SELECT 1 FROM fleet_waiters \
       WHERE queue_key = $4 AND until > fleet_now() AND waiter <> $5)";

#[async_trait]
impl QueueOps for PostgresFleetBackend {
    async fn queue_push(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
    ) -> Result<()> {
        if body.len() <= batch::MAX_BATCHED_BODY {
            // The batch wakes the reservers its tasks can serve.
            let (reply, rx) = tokio::sync::oneshot::channel();
            let job = batch::Job::Push {
                name: name.to_string(),
                tier: tier_code(priority),
                body: body.to_vec(),
                digest: digest(name),
                record: head.id.as_ref().map(|id| batch::Record {
                    id: id.clone(),
                    max_attempts: max_of(head),
                    last_error: head.last_error.clone(),
                }),
                reply,
            };
            return self.inner.batch.run(job, rx).await;
        }
        let op = "queue_push";
        let others = match self
            .push_row(self.pool(), op, name, body, head, priority)
            .await
        {
            Err(Error::AlreadyExists { .. }) if self.free_id(op, name, head).await? => {
                self.push_row(self.pool(), op, name, body, head, priority)
                    .await?
            }
            pushed => pushed?,
        };
        self.wake_pushed(name, 1, others).await;
        Ok(())
    }

    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome> {
        // When the task becomes reservable: `after` seconds from the server's now, or at the
        // instant `at` of the server's clock (in the past: at once, decided in the statement).
        let (after, at) = match submit.run_at {
            RunAt::Now => (None, None),
            RunAt::After(_) => (delay_ms(submit.run_at, 0.0)?.map(secs), None),
            // The local clock only bounds how far away the instant may be; the server's clock
            // decides whether it has passed.
            RunAt::At(t) => {
                delay_ms(submit.run_at, local_now())?;
                (None, Some(t))
            }
        };
        if after.is_none() && at.is_none() && submit.idem.is_none() {
            return self
                .queue_push(name, body, head, submit.priority)
                .await
                .map(|()| SubmitOutcome::Enqueued);
        }
        let op = "queue_submit";
        match self.submit_row(name, body, head, submit, after, at).await {
            Err(Error::AlreadyExists { .. }) if self.free_id(op, name, head).await? => {
                self.submit_row(name, body, head, submit, after, at).await
            }
            submitted => submitted,
        }
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM fleet_tasks WHERE name = $1 AND state = 'ready'",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_size", name, e))?;
        Ok(count(n))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        // One statement, one snapshot: every count sees the same rows, and `fleet_now()` is the
        // statement's one instant. Cut-offs are those of sweep and reserve (`<= now`). The flow
        // row (pause, rate limit) is read in the same snapshot.
        type Counts = (i64, i64, i64, i64, i64, i64, i64, i64);
        type Row = (
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            Option<bool>,
            Option<i64>,
            Option<i64>,
            Option<f64>,
            Option<(i64, i64, i64, i64)>,
        );
        // The ends of recorded tasks are counted in the flow row (ADR 0380); the finished
        // records kept in the table are counted by none of the filters.
        let r: Row = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE state = 'ready' AND tier = 0), \
             count(*) FILTER (WHERE state = 'ready' AND tier = 1), \
             count(*) FILTER (WHERE state = 'ready' AND tier = 2), \
             count(*) FILTER (WHERE state = 'reserved'), \
             count(*) FILTER (WHERE state = 'reserved' AND due <= fleet_now()), \
             count(*) FILTER (WHERE state = 'scheduled'), \
             count(*) FILTER (WHERE state = 'scheduled' AND due <= fleet_now()), \
             count(*) FILTER (WHERE state = 'dead'), \
             (SELECT f.paused FROM fleet_queue_flow f WHERE f.name = $1), \
             (SELECT f.rate_max FROM fleet_queue_flow f WHERE f.name = $1), \
             (SELECT f.rate_per_ms FROM fleet_queue_flow f WHERE f.name = $1), \
             (SELECT fleet_tokens(f.tokens, f.refilled_at, f.rate_max, f.rate_per_ms, fleet_now()) \
                FROM fleet_queue_flow f WHERE f.name = $1), \
             (SELECT (f.completed, f.failed, f.dead, f.cancelled) \
                FROM fleet_queue_flow f WHERE f.name = $1) \
             FROM fleet_tasks WHERE name = $1",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_stats", name, e))?;
        let row: Counts = (r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7);
        let flow = (r.8, r.9, r.10, r.11);
        let mut stats = QueueStats::default();
        stats.high = count(row.0);
        stats.normal = count(row.1);
        stats.low = count(row.2);
        stats.in_flight = count(row.3);
        stats.overdue = count(row.4);
        stats.scheduled = count(row.5);
        stats.due = count(row.6);
        stats.dead = count(row.7);
        if let Some((completed, failed, dead, cancelled)) = r.12 {
            stats.completed = count(completed);
            stats.failed = count(failed);
            stats.dead_lettered = count(dead);
            stats.cancelled = count(cancelled);
        }
        let (paused, max, per_ms, tokens) = flow;
        stats.paused = paused == Some(true);
        if let (Some(max), Some(per_ms)) = (max, per_ms) {
            let limit = u32::try_from(max)
                .ok()
                .zip(u64::try_from(per_ms).ok())
                .and_then(|(max, per_ms)| RateLimit::new(max, Duration::from_millis(per_ms)).ok())
                .ok_or_else(|| {
                    Error::corrupt(
                        format!("fleet_queue_flow {name:?}"),
                        format!("rate limit {max} per {per_ms} ms is out of range"),
                    )
                })?;
            stats.rate_limit = Some(limit);
            stats.throttled_ms = throttled_ms(limit, tokens.unwrap_or(0.0));
        }
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT body FROM fleet_tasks WHERE name = $1 AND state = 'ready' \
             ORDER BY tier, pos LIMIT $2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("queue_peek", name, e))
    }

    async fn queue_try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
        _again: bool,
    ) -> Result<Attempt> {
        Ok(Attempt::got(
            self.try_reserve(name, max, visibility_ms).await?,
        ))
    }

    /// Pushers notify only queues with a live waiter lease (ADR 0235): take one, then look
    /// again before sleeping, for a push that committed in between. Then the sleep lasts until a
    /// NOTIFY for this queue (a push, a resume, a new limit, or a lost listener connection), the
    /// next retry or delayed task falling due, the next rate-limit token, or the bounded
    /// fallback re-check (ADR 0232, 0295).
    async fn queue_before_wait(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
    ) -> Result<Attempt> {
        let key = digest(name);
        let mut nap = None;
        if !self.inner.wakes.leased(&key) {
            self.renew_lease(name, &key).await?;
            // A push whose statement began before the lease committed did not see it; its
            // commit is at most a moment away.
            nap = Some(JUST_LEASED);
            let got = self.try_reserve(name, max, visibility_ms).await?;
            if !got.is_empty() {
                return Ok(Attempt::got(got));
            }
        }
        let next = self.next_wake_in(name).await?;
        Ok(Attempt::nothing([nap, next].into_iter().flatten().min()))
    }

    fn queue_wake(&self, name: &str) -> Option<Arc<Notify>> {
        Some(self.inner.wakes.waiter(&digest(name)))
    }

    fn queue_poll(&self) -> (Duration, Duration) {
        (self.inner.fallback, self.inner.fallback)
    }

    async fn queue_ack(
        &self,
        name: &str,
        receipt: &Receipt,
        result: Option<&[u8]>,
    ) -> Result<bool> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job = batch::Job::Ack {
            name: name.to_string(),
            receipt: raw(receipt).to_string(),
            recorded: marked(receipt),
            result: result.map(<[u8]>::to_vec),
            reply,
        };
        self.inner.batch.run(job, rx).await
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
        delay: Duration,
    ) -> Result<bool> {
        self.requeue_delivery("queue_nack", name, receipt, Some((body, head)), delay)
            .await
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility_ms: u64,
    ) -> Result<bool> {
        // A delivery whose task's cancel was requested is extended no more (ADR 0380).
        let res = sqlx::query(
            "UPDATE fleet_tasks SET due = fleet_now() + $3 \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1 AND NOT cancel_requested",
        )
        .bind(name)
        .bind(raw(receipt))
        .bind(secs(visibility_ms))
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_extend", name, e))?;
        if res.rows_affected() == 1 {
            return Ok(true);
        }
        self.refuse_cancelled("queue_extend", name, receipt).await
    }

    async fn queue_fail(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool> {
        // One statement: the reservation becomes the dead-letter queue's newest entry, so no
        // sweep can see it lapse in between; its attempts are forgotten. Only a task without an
        // id: a recorded one ends in `fleet_end_delivery` below.
        let res = sqlx::query(
            "UPDATE fleet_tasks SET state = 'dead', body = $3, receipt = NULL, due = NULL, \
             attempts = 0, progress = NULL, pos = nextval('fleet_task_pos') \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1 AND task_id IS NULL",
        )
        .bind(name)
        .bind(raw(receipt))
        .bind(body)
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_fail", name, e))?;
        if res.rows_affected() == 1 {
            return Ok(true);
        }
        // A recorded task ends `dead` with its event, or `cancelled` when its cancel was
        // requested (ADR 0380), in one function call.
        match self
            .end_delivery("queue_fail", name, receipt, Some((body, head)))
            .await?
        {
            Some((state, _)) if state == "dead" => Ok(true),
            Some((_, id)) => Err(cancelled(id)),
            None => Ok(false),
        }
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT fleet_sweep($1, $2, $3)")
            .bind(name)
            .bind(self.channel())
            .bind(wake_all_payload(name))
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("queue_sweep_expired", name, e))?;
        Ok(count(n))
    }

    async fn queue_promote_due(&self, name: &str) -> Result<u64> {
        // One statement: `fleet_promote_due` moves through the reserve's own `fleet_move_due`,
        // whose row locks let each due task move once however many promote or reserve at once
        // (guarantee `queue.promote_due`).
        let n: i64 = sqlx::query_scalar("SELECT fleet_promote_due($1, $2, $3)")
            .bind(name)
            .bind(self.channel())
            .bind(wake_all_payload(name))
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("queue_promote_due", name, e))?;
        Ok(count(n))
    }

    async fn queue_dead(&self, name: &str, body: &[u8], head: &TaskHead) -> Result<()> {
        if let Some(id) = &head.id {
            // The letter becomes the record of its id, ended `dead` (ADR 0380); with the id
            // taken it is appended without one, as a body without an id.
            let recorded: bool =
                sqlx::query_scalar("SELECT fleet_dead_task($1, $2, $3, $4, $5, $6)")
                    .bind(name)
                    .bind(body)
                    .bind(id)
                    .bind(max_of(head))
                    .bind(head.last_error.as_deref())
                    .bind(self.channel())
                    .fetch_one(self.pool())
                    .await
                    .map_err(|e| db("queue_dead", name, e))?;
            if recorded {
                return Ok(());
            }
        }
        sqlx::query("INSERT INTO fleet_tasks (name, state, tier, body) VALUES ($1, 'dead', 1, $2)")
            .bind(name)
            .bind(body)
            .execute(self.pool())
            .await
            .map_err(|e| db("queue_dead", name, e))?;
        Ok(())
    }
}

/// The first sleep after taking a waiter lease: long enough for a push already committing.
const JUST_LEASED: Duration = Duration::from_millis(50);

impl PostgresFleetBackend {
    /// A submit with an idempotency key or a delay, in one transaction (see
    /// [`queue_submit`](QueueOps::queue_submit)).
    async fn submit_row(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
        after: Option<f64>,
        at: Option<f64>,
    ) -> Result<SubmitOutcome> {
        if after.is_none()
            && at.is_none()
            && let Some(idem) = &submit.idem
        {
            return self
                .submit_once_now(name, body, head, submit.priority, idem)
                .await;
        }
        let op = "queue_submit";
        let mut tx = self.pool().begin().await.map_err(|e| db(op, name, e))?;
        if let Some(idem) = &submit.idem
            && let Some(stored) = claim_idem(&mut tx, op, name, idem).await?
        {
            tx.rollback().await.map_err(|e| db(op, name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored));
        }
        // A task still ahead of its time waits as a scheduled row, moved to its tier's end by
        // the first reserve after it falls due (as a delayed nack); waiting reservers are all
        // woken to shorten their sleep to its due time (guarantee `queue.delayed`).
        // With an id the row is also the task's record (ADR 0380); the unique index refuses a
        // known id, and the rollback takes the idempotency key back with it.
        sqlx::query(
            "WITH pushed AS (INSERT INTO fleet_tasks (name, tier, body, state, due, \
                 task_id, max_attempts, last_error, submitted_at) \
               SELECT $1, $2, $3, \
                 CASE WHEN x.d > fleet_now() THEN 'scheduled' ELSE 'ready' END, \
                 CASE WHEN x.d > fleet_now() THEN x.d END, \
                 $9, $10, $11, CASE WHEN $9::text IS NOT NULL THEN fleet_now() END \
               FROM (SELECT coalesce($4::float8, fleet_now() + $5::float8) AS d) x \
               RETURNING state) \
             SELECT fleet_wake($6, CASE WHEN state = 'ready' THEN $7 ELSE $8 END) FROM pushed",
        )
        .bind(name)
        .bind(tier_code(submit.priority))
        .bind(body)
        .bind(at)
        .bind(after)
        .bind(self.channel())
        .bind(wake_payload(name))
        .bind(wake_all_payload(name))
        .bind(head.id.as_deref())
        .bind(max_of(head))
        .bind(head.last_error.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(|e| taken_or(op, name, head, e))?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        Ok(SubmitOutcome::Enqueued)
    }

    /// Sets the idempotency key and pushes at once, in one transaction; a duplicate pushes
    /// nothing and returns the stored value (guarantee `queue.submit_once`).
    async fn submit_once_now(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
        idem: &IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        let op = "queue_submit";
        let mut tx = self.pool().begin().await.map_err(|e| db(op, name, e))?;
        if let Some(stored) = claim_idem(&mut tx, op, name, idem).await? {
            tx.rollback().await.map_err(|e| db(op, name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored));
        }
        let others = self
            .push_row(&mut *tx, op, name, body, head, priority)
            .await?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        self.wake_pushed(name, 1, others).await;
        Ok(SubmitOutcome::Enqueued)
    }

    /// Appends one task with [`PUSH`] on `conn` (the pool, or a transaction the caller commits),
    /// or [`PUSH_RECORD`] for a body with an id; whether another backend holds a waiter lease
    /// on the queue.
    async fn push_row<'e>(
        &self,
        conn: impl sqlx::PgExecutor<'e>,
        op: &'static str,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
    ) -> Result<bool> {
        let Some(id) = &head.id else {
            return sqlx::query_scalar(PUSH)
                .bind(name)
                .bind(tier_code(priority))
                .bind(body)
                .bind(digest(name))
                .bind(&self.inner.waiter)
                .fetch_one(conn)
                .await
                .map_err(|e| db(op, name, e));
        };
        sqlx::query_scalar(PUSH_RECORD)
            .bind(name)
            .bind(tier_code(priority))
            .bind(body)
            .bind(digest(name))
            .bind(&self.inner.waiter)
            .bind(id)
            .bind(max_of(head))
            .bind(head.last_error.as_deref())
            .fetch_one(conn)
            .await
            .map_err(|e| taken_or(op, name, head, e))
    }

    /// After a write refused `head`'s id: removes the finished record holding it (guarantee
    /// `task.unique_id`); whether it did, so the write may run again.
    async fn free_id(&self, op: &'static str, name: &str, head: &TaskHead) -> Result<bool> {
        let Some(id) = head.id.as_deref() else {
            return Ok(false);
        };
        Ok(free_task_ids(self.pool(), op, &[name], &[Some(id)]).await? > 0)
    }

    /// After a write on delivery `receipt` changed nothing: [`Error::Cancelled`] when the
    /// delivery is current but its task's cancel was requested (extend and progress then write
    /// nothing, ADR 0380), else `false` (the receipt is not current).
    pub(crate) async fn refuse_cancelled(
        &self,
        op: &'static str,
        name: &str,
        receipt: &Receipt,
    ) -> Result<bool> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT task_id FROM fleet_tasks WHERE receipt = $2 AND state = 'reserved' \
             AND name = $1 AND cancel_requested AND task_id IS NOT NULL",
        )
        .bind(name)
        .bind(raw(receipt))
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db(op, name, e))?;
        match id {
            Some(id) => Err(cancelled(id)),
            None => Ok(false),
        }
    }

    /// Ends the current delivery `receipt` of a recorded task in one function call
    /// (`fleet_end_delivery`): `dead` with the new body (`fail`, a fail), or, whatever `fail`,
    /// `cancelled` when its cancel was requested. The end state and task id, or `None` when
    /// the receipt is not a current delivery of a recorded task (or, without `fail`, its
    /// cancel was not requested).
    pub(crate) async fn end_delivery(
        &self,
        op: &'static str,
        name: &str,
        receipt: &Receipt,
        fail: Option<(&[u8], &TaskHead)>,
    ) -> Result<Option<(String, String)>> {
        let head = fail.map(|(_, h)| h);
        sqlx::query_as("SELECT * FROM fleet_end_delivery($1, $2, $3, $4, $5, $6, $7)")
            .bind(name)
            .bind(raw(receipt))
            .bind(fail.map(|_| "dead"))
            .bind(fail.map(|(b, _)| b))
            .bind(head.and_then(max_of))
            .bind(head.and_then(|h| h.last_error.as_deref()))
            .bind(self.channel())
            .fetch_optional(self.pool())
            .await
            .map_err(|e| db(op, name, e))
    }

    /// After `count` tasks pushed to queue `name` committed: wakes the reservers of this
    /// backend they can serve (one for one task, all for more) without a round trip, and, when
    /// `others` (another backend holds a waiter lease on the queue), notifies the other
    /// backends (ADR 0235, 0347).
    pub(crate) async fn wake_pushed(&self, name: &str, count: usize, others: bool) {
        let pushed = [(digest(name), count, others)];
        self.inner
            .batch
            .wake()
            .after_push(self.pool(), &pushed)
            .await;
    }

    /// Tells pushers of queue `name` that this backend has reservers waiting on it, until a
    /// while after the next renewal is due (expired leases of others are cleared on the way).
    async fn renew_lease(&self, name: &str, key: &str) -> Result<()> {
        self.renew_lease_of(&self.inner.wakes, "queue_reserve", name, key)
            .await
    }

    /// [`renew_lease`](Self::renew_lease) for the waiters of `wakes` (reservers, or readers of a
    /// queue's end events under its events key).
    pub(crate) async fn renew_lease_of(
        &self,
        wakes: &Wakes,
        op: &'static str,
        name: &str,
        key: &str,
    ) -> Result<()> {
        let renew_after = self.inner.fallback;
        sqlx::query(
            "WITH stale AS (DELETE FROM fleet_waiters WHERE until < fleet_now() - 60 \
               AND NOT (queue_key = $1 AND waiter = $2)) \
             INSERT INTO fleet_waiters (queue_key, waiter, until) VALUES ($1, $2, fleet_now() + $3) \
             ON CONFLICT (queue_key, waiter) DO UPDATE SET until = excluded.until",
        )
        .bind(key)
        .bind(&self.inner.waiter)
        .bind(renew_after.as_secs_f64() * 3.0 + 1.0)
        .execute(self.pool())
        .await
        .map_err(|e| db(op, name, e))?;
        wakes.lease_renewed(key, renew_after);
        Ok(())
    }

    /// One attempt: unless paused, due retries back to their tiers, then up to `n` heads of the
    /// best tiers within the rate limit's tokens, each reserved under a fresh receipt
    /// (`fleet_reserve_many`, one round trip).
    async fn try_reserve(&self, name: &str, n: usize, visibility_ms: u64) -> Result<Vec<Delivery>> {
        if n == 1 {
            // One task: through the group commit, with the reserves of other callers (ADR 0296).
            let receipt = random_token();
            let (reply, rx) = tokio::sync::oneshot::channel();
            let job = batch::Job::Reserve {
                name: name.to_string(),
                visibility_ms,
                receipt: receipt.clone(),
                reply,
            };
            let row = self.inner.batch.run(job, rx).await?;
            return Ok(row
                .map(|(tier, body, attempts, due)| delivery(receipt, tier, body, attempts, due))
                .into_iter()
                .collect());
        }
        let receipts: Vec<String> = (0..n).map(|_| random_token()).collect();
        let rows: Vec<batch::ReserveRow> =
            sqlx::query_as("SELECT * FROM fleet_reserve_many($1, $2, $3)")
                .bind(name)
                .bind(&receipts)
                .bind(secs(visibility_ms))
                .fetch_all(self.pool())
                .await
                .map_err(|e| db("queue_reserve", name, e))?;
        Ok(rows
            .into_iter()
            .map(|(receipt, tier, body, attempts, due)| {
                delivery(receipt, tier, body, attempts, due)
            })
            .collect())
    }

    /// How long a reserver that found nothing may sleep before something changes that no
    /// NOTIFY announces: the queue's next retry or delayed task falling due, or its rate
    /// limit's next token. Nothing while the queue is paused (its resume notifies).
    async fn next_wake_in(&self, name: &str) -> Result<Option<Duration>> {
        let (due, paused, token): (Option<f64>, Option<bool>, Option<f64>) = sqlx::query_as(
            "SELECT (SELECT min(t.due) FROM fleet_tasks t \
                     WHERE t.name = $1 AND t.state = 'scheduled') - fleet_now(), \
               f.paused, \
               (1 - fleet_tokens(f.tokens, f.refilled_at, f.rate_max, f.rate_per_ms, fleet_now())) \
                 * f.rate_per_ms / 1000.0 / f.rate_max \
             FROM (SELECT 1) one LEFT JOIN fleet_queue_flow f ON f.name = $1",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_reserve", name, e))?;
        if paused == Some(true) {
            return Ok(None);
        }
        // A token still to come, or a task due: a few ms past it, so it is there when the
        // attempt runs.
        let token = token.filter(|s| *s > 0.0);
        Ok([due, token].into_iter().flatten().map(wait_of).min())
    }

    /// Ends the delivery of `receipt` and requeues its task into its tier, at the end or after
    /// `delay`, attempts kept, with `body` (a nack) or the body as delivered (`None`: a
    /// release); `false` and nothing changed when the receipt is not current.
    pub(crate) async fn requeue_delivery(
        &self,
        op: &'static str,
        name: &str,
        receipt: &Receipt,
        body: Option<(&[u8], &TaskHead)>,
        delay: Duration,
    ) -> Result<bool> {
        // One statement: the reservation becomes a waiting task at its tier's end, or a retry
        // due after `delay`, with its attempts kept; a recorded task's record moves with it and
        // takes the new body's `max_attempts` and last error. A delivery whose task's cancel was
        // requested is not requeued (ADR 0380): it ends `cancelled` below.
        let delay = ttl_secs(Some(delay));
        let head = body.map(|(_, h)| h);
        let moved: i64 = sqlx::query_scalar(
            "WITH moved AS (UPDATE fleet_tasks SET body = coalesce($3, body), receipt = NULL, \
               progress = NULL, pos = nextval('fleet_task_pos'), \
               state = CASE WHEN $4::float8 IS NULL THEN 'ready' ELSE 'scheduled' END, \
               due = fleet_now() + $4::float8, \
               max_attempts = coalesce($7, max_attempts), last_error = coalesce($8, last_error) \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1 AND NOT cancel_requested \
             RETURNING state) \
             SELECT count(*) FROM moved \
             WHERE CASE WHEN state = 'ready' THEN fleet_wake($5, $6) ELSE true END",
        )
        .bind(name)
        .bind(raw(receipt))
        .bind(body.map(|(b, _)| b))
        .bind(delay)
        .bind(self.channel())
        .bind(wake_payload(name))
        .bind(head.and_then(max_of))
        .bind(head.and_then(|h| h.last_error.as_deref()))
        .fetch_one(self.pool())
        .await
        .map_err(|e| db(op, name, e))?;
        if moved == 1 {
            return Ok(true);
        }
        match self.end_delivery(op, name, receipt, None).await? {
            Some((_, id)) => Err(cancelled(id)),
            None => Ok(false),
        }
    }
}

/// A sqlx error of a write of `head`'s record: [`Error::AlreadyExists`] when its id is taken.
fn taken_or(op: &'static str, name: &str, head: &TaskHead, e: sqlx::Error) -> Error {
    match &head.id {
        Some(id) if id_taken(&e) => already_exists(id),
        _ => db(op, name, e),
    }
}

/// A delivery from its row.
pub(crate) fn delivery(
    receipt: String,
    tier: i16,
    body: Vec<u8>,
    attempts: i32,
    due: f64,
) -> Delivery {
    let task_id = task_id_of(&body);
    let receipt = match task_id {
        Some(_) => format!("{receipt}{RECORDED_MARK}"),
        None => receipt,
    };
    Delivery {
        receipt: Receipt::new(receipt),
        task_id,
        body,
        attempt: u32::try_from(attempts.max(0)).unwrap_or(0),
        priority: tier_of(tier),
        visible_until: due,
    }
}

/// A sleep of `secs` seconds from the server, plus a few ms; clamped (and NaN-proof) before it
/// becomes a Duration, which would panic on a negative or NaN.
fn wait_of(secs: f64) -> Duration {
    let s = if secs.is_finite() {
        secs.clamp(0.0, 3600.0)
    } else {
        0.0
    };
    Duration::from_secs_f64(s) + Duration::from_millis(5)
}

/// Sets the idempotency key of a submit in `tx`; the value already stored when the key is
/// taken (a duplicate: submit nothing), `None` when this submit set it.
async fn claim_idem(
    tx: &mut PgConnection,
    op: &'static str,
    name: &str,
    idem: &IdempotencyKey<'_>,
) -> Result<Option<Vec<u8>>> {
    let set = sqlx::query(KV_SET_NX)
        .bind(idem.ns)
        .bind(idem.key)
        .bind(idem.value)
        .bind(ttl_secs(idem.ttl))
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, name, e))?
        .rows_affected()
        == 1;
    if set {
        return Ok(None);
    }
    // The key's row is locked by our upsert attempt's conflict check only while it ran; read
    // what is stored now (a concurrent first submit has committed it).
    let stored: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT value FROM fleet_kv WHERE ns = $1 AND key = $2")
            .bind(idem.ns)
            .bind(idem.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
    Ok(Some(stored.unwrap_or_default()))
}

/// Milliseconds until the bucket holding `tokens` has a whole one; 0 when it has.
fn throttled_ms(limit: RateLimit, tokens: f64) -> u64 {
    let missing = 1.0 - tokens;
    if !missing.is_finite() || missing <= 1e-9 {
        return 0;
    }
    let ms = (missing * limit.per_ms() as f64 / f64::from(limit.max)).ceil();
    // Never more than one refill interval (at most a day): a saturating cast is exact enough.
    ms.clamp(0.0, 86_400_000.0) as u64
}

/// Unix seconds on this machine's clock.
fn local_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
