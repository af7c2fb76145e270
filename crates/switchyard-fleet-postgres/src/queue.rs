//! The job queue of [`PostgresFleetBackend`]: [`JobQueue`] (guarantees 7–15 and 23), one row per
//! task in `fleet_tasks` (ADR 0231), blocking reserves woken by `LISTEN/NOTIFY` (ADR 0232).

use super::*;

/// Appends a task to its tier; parameters name, tier, body, the queue's digest. Returns whether
/// a reserver holds a waiter lease on the queue, to be woken once this commits (ADR 0235).
const PUSH: &str = "WITH pushed AS (INSERT INTO fleet_tasks (name, tier, body) VALUES ($1, $2, $3)) \
     SELECT EXISTS (SELECT 1 FROM fleet_waiters WHERE queue_key = $4 AND until > fleet_now())";

#[async_trait]
impl JobQueue for PostgresFleetBackend {
    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        let waiting = if body.len() > batch::MAX_BATCHED_BODY {
            sqlx::query_scalar(PUSH)
                .bind(name)
                .bind(tier_code(priority))
                .bind(body)
                .bind(digest(name))
                .fetch_one(self.pool())
                .await
                .map_err(|e| db("queue_push", name, e))?
        } else {
            let (reply, rx) = tokio::sync::oneshot::channel();
            let job = batch::Job::Push {
                name: name.to_string(),
                tier: tier_code(priority),
                body: body.to_vec(),
                digest: digest(name),
                reply,
            };
            self.inner.batch.run(job, rx).await?
        };
        if waiting {
            self.wake_after_commit(name).await;
        }
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
        let op = "queue_submit_once";
        let mut tx = self.pool().begin().await.map_err(|e| db(op, name, e))?;
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
        if !set {
            // The key's row is locked by our upsert attempt's conflict check only while it
            // ran; read what is stored now (a concurrent first submit has committed it).
            let stored: Option<Vec<u8>> =
                sqlx::query_scalar("SELECT value FROM fleet_kv WHERE ns = $1 AND key = $2")
                    .bind(idem.ns)
                    .bind(idem.key)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| db(op, name, e))?;
            tx.rollback().await.map_err(|e| db(op, name, e))?;
            return Ok(SubmitOutcome::Duplicate(stored.unwrap_or_default()));
        }
        let waiting: bool = sqlx::query_scalar(PUSH)
            .bind(name)
            .bind(tier_code(priority))
            .bind(body)
            .bind(digest(name))
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        if waiting {
            self.wake_after_commit(name).await;
        }
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
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
        check_name("queue", name)?;
        // One statement, one snapshot: every count sees the same rows, and `fleet_now()` is the
        // statement's one instant. Cut-offs are those of sweep and reserve (`<= now`).
        type Row = (i64, i64, i64, i64, i64, i64, i64, i64);
        let row: Row = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE state = 'ready' AND tier = 0), \
             count(*) FILTER (WHERE state = 'ready' AND tier = 1), \
             count(*) FILTER (WHERE state = 'ready' AND tier = 2), \
             count(*) FILTER (WHERE state = 'reserved'), \
             count(*) FILTER (WHERE state = 'reserved' AND due <= fleet_now()), \
             count(*) FILTER (WHERE state = 'scheduled'), \
             count(*) FILTER (WHERE state = 'scheduled' AND due <= fleet_now()), \
             count(*) FILTER (WHERE state = 'dead') \
             FROM fleet_tasks WHERE name = $1",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_stats", name, e))?;
        let mut stats = QueueStats::default();
        stats.high = count(row.0);
        stats.normal = count(row.1);
        stats.low = count(row.2);
        stats.in_flight = count(row.3);
        stats.overdue = count(row.4);
        stats.scheduled = count(row.5);
        stats.due = count(row.6);
        stats.dead = count(row.7);
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
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

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let key = digest(name);
        let wake = self.inner.wakes.waiter(&key);
        loop {
            // Armed before the attempt: a push committed after the attempt's snapshot wakes us.
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Always try once, so `timeout = 0` takes a ready task.
            if let Some(d) = self.try_reserve(name, visibility_ms).await? {
                return Ok(Some(d));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // Pushers notify only queues with a live waiter lease (ADR 0235): take one, then
            // look again before sleeping, for a push that committed in between.
            let mut nap = left.min(self.inner.fallback);
            if !self.inner.wakes.leased(&key) {
                self.renew_lease(name, &key).await?;
                // A push whose statement began before the lease committed did not see it; its
                // commit is at most a moment away.
                nap = nap.min(JUST_LEASED);
                if let Some(d) = self.try_reserve(name, visibility_ms).await? {
                    return Ok(Some(d));
                }
            }
            // Sleep until a NOTIFY for this queue (or a lost listener connection), the next
            // retry falling due, or the bounded fallback re-check (ADR 0232).
            if let Some(due_in) = self.next_due_in(name).await? {
                nap = nap.min(due_in);
            }
            let _ = tokio::time::timeout(nap, notified).await;
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job = batch::Job::Ack {
            name: name.to_string(),
            receipt: receipt.as_str().to_string(),
            reply,
        };
        self.inner.batch.run(job, rx).await
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        // One statement: the reservation becomes a waiting task at its tier's end, or a retry
        // due after `delay`, with the caller's body and its attempts kept.
        let delay = ttl_secs(Some(delay));
        let moved: i64 = sqlx::query_scalar(
            "WITH moved AS (UPDATE fleet_tasks SET body = $3, receipt = NULL, \
               pos = nextval('fleet_task_pos'), \
               state = CASE WHEN $4::float8 IS NULL THEN 'ready' ELSE 'scheduled' END, \
               due = fleet_now() + $4::float8 \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1 RETURNING state) \
             SELECT count(*) FROM moved \
             WHERE CASE WHEN state = 'ready' THEN fleet_wake($5, $6) ELSE true END",
        )
        .bind(name)
        .bind(receipt.as_str())
        .bind(body)
        .bind(delay)
        .bind(self.channel())
        .bind(wake_payload(name))
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_nack", name, e))?;
        Ok(moved == 1)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let res = sqlx::query(
            "UPDATE fleet_tasks SET due = fleet_now() + $3 \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1",
        )
        .bind(name)
        .bind(receipt.as_str())
        .bind(secs(visibility_ms))
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_extend", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        // One statement: the reservation becomes the dead-letter queue's newest entry, so no
        // sweep can see it lapse in between; its attempts are forgotten.
        let res = sqlx::query(
            "UPDATE fleet_tasks SET state = 'dead', body = $3, receipt = NULL, due = NULL, \
             attempts = 0, pos = nextval('fleet_task_pos') \
             WHERE receipt = $2 AND state = 'reserved' AND name = $1",
        )
        .bind(name)
        .bind(receipt.as_str())
        .bind(body)
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_fail", name, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let n: i64 = sqlx::query_scalar("SELECT fleet_sweep($1, $2, $3)")
            .bind(name)
            .bind(self.channel())
            .bind(wake_all_payload(name))
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("queue_sweep_expired", name, e))?;
        Ok(count(n))
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
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
    /// Wakes one waiting reserver of queue `name`, in a transaction of its own after the push
    /// committed: PostgreSQL holds one lock from a notifying transaction's commit until it is
    /// durable, so a NOTIFY inside the push would serialise every push on the WAL flush, while
    /// this transaction writes no WAL and commits at once (ADR 0235). The push has happened
    /// whatever this does: a failure only leaves the reserver to its fallback re-check.
    async fn wake_after_commit(&self, name: &str) {
        if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(self.channel())
            .bind(wake_payload(name))
            .execute(self.pool())
            .await
        {
            tracing::debug!(queue = name, error = %e, "could not wake a waiting reserver");
        }
    }

    /// Tells pushers of queue `name` that this backend has reservers waiting on it, until a
    /// while after the next renewal is due (expired leases of others are cleared on the way).
    async fn renew_lease(&self, name: &str, key: &str) -> Result<()> {
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
        .map_err(|e| db("queue_reserve", name, e))?;
        self.inner.wakes.lease_renewed(key, renew_after);
        Ok(())
    }

    /// One attempt: due retries back to their tiers, then the head of the best tier, reserved
    /// under a fresh receipt (`fleet_reserve`, one round trip).
    async fn try_reserve(&self, name: &str, visibility_ms: u64) -> Result<Option<Delivery>> {
        let receipt = random_token();
        let row: Option<(i16, Vec<u8>, i32, f64)> =
            sqlx::query_as("SELECT * FROM fleet_reserve($1, $2, $3)")
                .bind(name)
                .bind(&receipt)
                .bind(secs(visibility_ms))
                .fetch_optional(self.pool())
                .await
                .map_err(|e| db("queue_reserve", name, e))?;
        Ok(row.map(|(tier, body, attempts, due)| Delivery {
            receipt: Receipt::new(receipt),
            task_id: task_id_of(&body),
            body,
            attempt: u32::try_from(attempts.max(0)).unwrap_or(0),
            priority: tier_of(tier),
            visible_until: due,
        }))
    }

    /// How long until the queue's next retry falls due (no NOTIFY says so), if it has one.
    async fn next_due_in(&self, name: &str) -> Result<Option<Duration>> {
        let secs: Option<f64> = sqlx::query_scalar(
            "SELECT min(due) - fleet_now() FROM fleet_tasks WHERE name = $1 AND state = 'scheduled'",
        )
        .bind(name)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("queue_reserve", name, e))?;
        // A few ms past the due time, so the retry is due when the attempt runs. Clamped (and
        // NaN-proof) before it becomes a Duration, which would panic on a negative or NaN.
        Ok(secs.map(|s| {
            let s = if s.is_finite() {
                s.clamp(0.0, 3600.0)
            } else {
                0.0
            };
            Duration::from_secs_f64(s) + Duration::from_millis(5)
        }))
    }
}
