//! The job queue of [`MemoryFleetBackend`]: [`JobQueue`] (guarantees `queue.priority_fifo`,
//! `queue.reserve_atomic`, `queue.receipts`, `queue.attempts`, `queue.nack`, `queue.fail_atomic`,
//! `queue.sweep`, `queue.bad_bodies`, `queue.submit_once`, `queue.stats`, `queue.delayed` and
//! `queue.promote_due`).

use super::*;

#[async_trait]
impl QueueOps for MemoryFleetBackend {
    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome> {
        let now = self.now();
        let delay = delay_ms(submit.run_at, now)?;
        {
            let mut st = self.state();
            if let Some(idem) = &submit.idem
                && let Some(existing) = live_kv(&mut st, idem.ns, idem.key, now)
            {
                return Ok(SubmitOutcome::Duplicate(existing));
            }
            // A taken id writes nothing, not even the idempotency key (guarantee
            // `task.unique_id`).
            if let Some(id) = &head.id
                && st.queues.get(name).is_some_and(|q| q.tasks.taken(id))
            {
                return Err(Error::AlreadyExists {
                    what: "task",
                    id: id.clone(),
                });
            }
            if let Some(idem) = &submit.idem {
                let exp = ttl_ms(idem.ttl).map(|ms| now + secs(ms));
                st.kv.insert(
                    (idem.ns.to_string(), idem.key.to_string()),
                    (idem.value.to_vec(), exp),
                );
            }
            let q = st.queues.entry(name.to_string()).or_default();
            q.tasks.submitted(head, submit.priority, now);
            let entry = Entry::new(body.to_vec(), submit.priority, head.id.clone());
            // A delayed task joins the scheduled set of delayed nacks (ADR 0280).
            enqueue(q, entry, delay, now);
        }
        // Waiting reserves re-arm their timers against the new earliest due time too.
        self.shared.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or(0, |q| q.tiers.iter().map(|t| t.len() as u64).sum()))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        let now = self.now();
        let st = self.state();
        let mut stats = QueueStats::default();
        let Some(q) = st.queues.get(name) else {
            return Ok(stats);
        };
        let [high, normal, low] = &q.tiers;
        stats.high = high.len() as u64;
        stats.normal = normal.len() as u64;
        stats.low = low.len() as u64;
        stats.in_flight = q.processing.len() as u64;
        // Same cut-offs as sweep (`deadline <= now`) and drain (`at <= now`).
        stats.overdue = q.processing.values().filter(|h| h.deadline <= now).count() as u64;
        stats.scheduled = q.scheduled.len() as u64;
        stats.due = q.scheduled.iter().filter(|(at, _, _)| *at <= now).count() as u64;
        stats.dead = q.dead.len() as u64;
        stats.paused = q.paused;
        tasks::end_counts(q, &mut stats);
        if let Some(b) = q.bucket {
            let b = b.at(now);
            stats.rate_limit = Some(b.limit);
            // Rounded up, so 0 means a token is there now; the cast saturates on absurd waits.
            stats.throttled_ms = (b.wait() * 1000.0).ceil() as u64;
        }
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let st = self.state();
        Ok(st.queues.get(name).map_or_else(Vec::new, |q| {
            q.tiers
                .iter()
                .flatten()
                .take(n)
                .map(|e| e.body.clone())
                .collect()
        }))
    }

    async fn queue_try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
        _again: bool,
    ) -> Result<Attempt> {
        Ok(match self.try_reserve(name, max, visibility_ms) {
            Ok(got) => Attempt::got(got),
            // A millisecond late rather than early, so the next try finds the task or token.
            Err(wait) => Attempt::nothing(wait.map(|w| {
                Duration::try_from_secs_f64(w)
                    .unwrap_or(Duration::MAX)
                    .saturating_add(Duration::from_millis(1))
            })),
        })
    }

    /// Pushes, requeues and resumes wake waiting reserves; the front also looks every 50 ms,
    /// since an injected clock moves without telling anyone (ADR 0281).
    fn queue_wake(&self, _name: &str) -> Option<Arc<Notify>> {
        Some(self.shared.pushed.clone())
    }

    async fn queue_ack(
        &self,
        name: &str,
        receipt: &Receipt,
        result: Option<&[u8]>,
    ) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(false);
        };
        if let Some(e) = self.end_if_cancelled(q, receipt, now) {
            return Err(e);
        }
        let Some(held) = q.processing.remove(receipt.as_str()) else {
            return Ok(false);
        };
        if held.entry.id.is_some() {
            q.tasks.delivery_ended(&held.entry, held.progress);
            q.tasks.end_entry(
                &held.entry,
                TaskState::Completed,
                result.map(<[u8]>::to_vec),
                now,
            );
            drop(st);
            self.announce_ends();
        }
        Ok(true)
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
        delay: Duration,
    ) -> Result<bool> {
        let now = self.now();
        let delay_ms = ttl_ms(Some(delay));
        {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(false);
            };
            if let Some(e) = self.end_if_cancelled(q, receipt, now) {
                return Err(e);
            }
            let Some(Held {
                mut entry,
                progress,
                ..
            }) = q.processing.remove(receipt.as_str())
            else {
                return Ok(false);
            };
            q.tasks.given(&entry, head);
            q.tasks.delivery_ended(&entry, progress);
            entry.body = body.to_vec();
            enqueue(q, entry, delay_ms, now);
        }
        self.shared.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility_ms: u64,
    ) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        if let Some(q) = st.queues.get(name) {
            Self::refuse_if_cancelled(q, receipt)?;
        }
        match st
            .queues
            .get_mut(name)
            .and_then(|q| q.processing.get_mut(receipt.as_str()))
        {
            Some(held) => {
                held.deadline = now + secs(visibility_ms);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn queue_fail(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool> {
        let now = self.now();
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(false);
        };
        if let Some(e) = self.end_if_cancelled(q, receipt, now) {
            return Err(e);
        }
        let Some(held) = q.processing.remove(receipt.as_str()) else {
            return Ok(false);
        };
        q.dead.push_back(body.to_vec());
        if held.entry.id.is_some() {
            q.tasks.given(&held.entry, head);
            q.tasks.delivery_ended(&held.entry, held.progress);
            q.tasks.end_entry(&held.entry, TaskState::Dead, None, now);
            drop(st);
            self.announce_ends();
        }
        Ok(true)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        let now = self.now();
        let mut ended = false;
        let moved = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(0);
            };
            let mut lapsed: Vec<(String, f64)> = q
                .processing
                .iter()
                .filter(|(_, held)| held.deadline <= now)
                .map(|(r, held)| (r.clone(), held.deadline))
                .collect();
            lapsed.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut moved = 0u64;
            for (receipt, _) in &lapsed {
                let Some(held) = q.processing.remove(receipt) else {
                    continue;
                };
                q.tasks.delivery_ended(&held.entry, held.progress);
                // A cancelled task's lapsed delivery ends it: it is never requeued.
                if q.tasks.cancel_requested(&held.entry) {
                    q.tasks
                        .end_entry(&held.entry, TaskState::Cancelled, None, now);
                    ended = true;
                    continue;
                }
                q.tasks.moved(&held.entry, TaskState::Waiting);
                q.tiers[tier(held.entry.priority)].push_back(held.entry);
                moved += 1;
            }
            moved
        };
        if ended {
            self.announce_ends();
        }
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved)
    }

    async fn queue_promote_due(&self, name: &str) -> Result<u64> {
        let now = self.now();
        let moved = {
            let mut st = self.state();
            // An unknown queue is not created: promoting stores nothing.
            match st.queues.get_mut(name) {
                // A paused queue moves nothing, as its reserve (guarantee `queue.promote_due`, ADR
                // 0353).
                Some(q) if !q.paused => drain_scheduled(q, now),
                _ => 0,
            }
        };
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved as u64)
    }

    async fn queue_dead(&self, name: &str, body: &[u8], head: &TaskHead) -> Result<()> {
        let now = self.now();
        {
            let mut st = self.state();
            let q = st.queues.entry(name.to_string()).or_default();
            q.dead.push_back(body.to_vec());
            q.tasks.dead_lettered(head, now);
        }
        if head.id.is_some() {
            self.announce_ends();
        }
        Ok(())
    }
}
