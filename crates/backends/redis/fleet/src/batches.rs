//! Batches of [`RedisFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one call of the queue's own push, reserve or ack script (ADR 0287): the scripts already take
//! many items for the natural batching of concurrent calls (ADR 0141), so a batch is atomic and
//! re-sent safely under its op token (ADR 0140) like any of them.

use switchyard_core::fleet::{QueueBatches, check_batch};

use super::*;

#[async_trait]
impl QueueBatches for RedisFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<()> {
        check_name("queue", name)?;
        check_batch("bodies", bodies.len())?;
        if bodies.is_empty() {
            return Ok(());
        }
        let qk = self.inner.keys.queue(name);
        let reqs: Vec<PushReq> = bodies
            .iter()
            .map(|b| PushReq {
                code: priority.code(),
                body: Bytes::copy_from_slice(b),
            })
            .collect();
        self.push_script(&qk, &reqs, &self.op_token()).await
    }

    async fn queue_reserve_many(
        &self,
        name: &str,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Delivery>> {
        check_name("queue", name)?;
        if max == 0 {
            return Err(Error::invalid("max", "must be at least 1"));
        }
        check_batch("max", max)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let qk = self.inner.keys.queue(name);
        loop {
            let reqs: Vec<ReserveReq> = (0..max)
                .map(|i| ReserveReq {
                    receipt: match &self.fixed_op {
                        Some(op) => format!("{op}:r{i}"),
                        None => random_token(),
                    },
                    visibility_ms,
                })
                .collect();
            // Always try once before looking at the clock.
            let mut wait_ms = None;
            let mut got = Vec::new();
            for outcome in self.reserve_script(&qk, &reqs, &self.op_token()).await? {
                match outcome {
                    Ok(d) => got.push(d),
                    Err(ms) => wait_ms = ms,
                }
            }
            if !got.is_empty() {
                return Ok(got);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(got);
            }
            let mut wait = left.min(MAX_BLOCK);
            if let Some(ms) = wait_ms {
                wait = wait.min(Duration::from_millis(ms.max(1)));
            }
            self.wait_for_push(&qk, wait).await?;
        }
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        check_name("queue", name)?;
        check_batch("receipts", receipts.len())?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        let receipts: Vec<String> = receipts.iter().map(|r| r.as_str().to_owned()).collect();
        self.ack_script(&qk, &receipts, &self.op_token()).await
    }
}
