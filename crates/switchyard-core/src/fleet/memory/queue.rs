//! The job queue of [`MemoryFleetBackend`]: [`JobQueue`] (guarantees 7–15 and 23).

use super::*;

#[async_trait]
impl JobQueue for MemoryFleetBackend {
    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        self.state()
            .queues
            .entry(name.to_string())
            .or_default()
            .tiers[tier(priority)]
        .push_back(Entry {
            body: body.to_vec(),
            attempts: 0,
            priority,
        });
        self.shared.pushed.notify_waiters();
        Ok(())
    }

    // TEMPORARY scaffold (session 6): replaced by this adapter's real delayed submit.
    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        submit: &crate::fleet::Submit<'_>,
    ) -> Result<SubmitOutcome> {
        if submit.run_at != crate::fleet::RunAt::Now {
            return Err(crate::Error::invalid("scaffold", "not built yet"));
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
        let now = self.now();
        {
            let mut st = self.state();
            if let Some(existing) = live_kv(&mut st, idem.ns, idem.key, now) {
                return Ok(SubmitOutcome::Duplicate(existing));
            }
            let exp = ttl_ms(idem.ttl).map(|ms| now + secs(ms));
            st.kv.insert(
                (idem.ns.to_string(), idem.key.to_string()),
                (idem.value.to_vec(), exp),
            );
            st.queues.entry(name.to_string()).or_default().tiers[tier(priority)].push_back(Entry {
                body: body.to_vec(),
                attempts: 0,
                priority,
            });
        }
        self.shared.pushed.notify_waiters();
        Ok(SubmitOutcome::Enqueued)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or(0, |q| q.tiers.iter().map(|t| t.len() as u64).sum()))
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
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
        stats.overdue = q.processing.values().filter(|(_, d)| *d <= now).count() as u64;
        stats.scheduled = q.scheduled.len() as u64;
        stats.due = q.scheduled.iter().filter(|(at, _, _)| *at <= now).count() as u64;
        stats.dead = q.dead.len() as u64;
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
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

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.pushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Always try once, so `timeout = 0` takes a ready task.
            if let Some(d) = self.try_reserve(name, visibility_ms) {
                return Ok(Some(d));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // Scheduled tasks fall due without a push: re-check at least every 50 ms.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(50)), notified).await;
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        let mut st = self.state();
        Ok(st
            .queues
            .get_mut(name)
            .and_then(|q| q.processing.remove(receipt.as_str()))
            .is_some())
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let now = self.now();
        let delay_ms = ttl_ms(Some(delay));
        {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(false);
            };
            let Some((mut entry, _)) = q.processing.remove(receipt.as_str()) else {
                return Ok(false);
            };
            entry.body = body.to_vec();
            match delay_ms {
                Some(ms) => {
                    q.next_seq += 1;
                    let seq = q.next_seq;
                    q.scheduled.push((now + secs(ms), seq, entry));
                }
                None => q.tiers[tier(entry.priority)].push_back(entry),
            }
        }
        self.shared.pushed.notify_waiters();
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
        let now = self.now();
        let mut st = self.state();
        match st
            .queues
            .get_mut(name)
            .and_then(|q| q.processing.get_mut(receipt.as_str()))
        {
            Some((_, deadline)) => {
                *deadline = now + secs(visibility_ms);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(false);
        };
        if q.processing.remove(receipt.as_str()).is_none() {
            return Ok(false);
        }
        q.dead.push_back(body.to_vec());
        Ok(true)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let now = self.now();
        let moved = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(0);
            };
            let mut lapsed: Vec<(String, f64)> = q
                .processing
                .iter()
                .filter(|(_, (_, deadline))| *deadline <= now)
                .map(|(r, (_, d))| (r.clone(), *d))
                .collect();
            lapsed.sort_by(|a, b| a.1.total_cmp(&b.1));
            for (receipt, _) in &lapsed {
                if let Some((entry, _)) = q.processing.remove(receipt) {
                    q.tiers[tier(entry.priority)].push_back(entry);
                }
            }
            lapsed.len() as u64
        };
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved)
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        self.state()
            .queues
            .entry(name.to_string())
            .or_default()
            .dead
            .push_back(body.to_vec());
        Ok(())
    }
}
