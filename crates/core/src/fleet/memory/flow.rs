//! Flow control of [`MemoryFleetBackend`]: [`QueueFlow`] (guarantees `queue.pause`,
//! `queue.rate_limit`, `queue.progress` and `queue.release`); how the pause flag, the token bucket
//! and progress are kept is ADR 0281.

use super::*;

#[async_trait]
impl QueueFlowOps for MemoryFleetBackend {
    async fn queue_pause(&self, name: &str) -> Result<bool> {
        let mut st = self.state();
        let q = st.queues.entry(name.to_string()).or_default();
        Ok(!std::mem::replace(&mut q.paused, true))
    }

    async fn queue_resume(&self, name: &str) -> Result<bool> {
        let was = {
            let mut st = self.state();
            st.queues
                .get_mut(name)
                .is_some_and(|q| std::mem::replace(&mut q.paused, false))
        };
        if was {
            self.shared.pushed.notify_waiters();
        }
        Ok(was)
    }

    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()> {
        let now = self.now();
        {
            let mut st = self.state();
            let q = st.queues.entry(name.to_string()).or_default();
            q.bucket = limit.map(|l| Bucket::full(l, now));
        }
        // A new or removed limit may let a waiting reserve through.
        self.shared.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool> {
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
                held.progress = Some(progress.to_vec());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>> {
        let st = self.state();
        let Some(q) = st.queues.get(name) else {
            return Ok(Vec::new());
        };
        let mut held: Vec<(&String, &Held)> = q.processing.iter().collect();
        // Receipts break ties, so equal deadlines list in a stable order.
        held.sort_by(|a, b| a.1.deadline.total_cmp(&b.1.deadline).then(a.0.cmp(b.0)));
        Ok(held
            .into_iter()
            .take(n)
            .map(|(_, h)| {
                InFlight::new(
                    task_id_of(&h.entry.body),
                    h.entry.body.clone(),
                    h.entry.attempts,
                    h.entry.priority,
                    h.deadline,
                    h.progress.clone(),
                )
            })
            .collect())
    }

    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool> {
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
                entry, progress, ..
            }) = q.processing.remove(receipt.as_str())
            else {
                return Ok(false);
            };
            q.tasks.delivery_ended(&entry, progress);
            // As a nack with the delivered body: same tier, attempt count kept.
            enqueue(q, entry, delay_ms, now);
        }
        self.shared.pushed.notify_waiters();
        Ok(true)
    }

    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>> {
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .and_then(|q| q.processing.get(receipt.as_str()))
            .map(|h| delivery(receipt.as_str(), &h.entry, h.deadline)))
    }
}
