//! Flow control of [`RedisFleetBackend`]: [`QueueFlow`] (guarantees `queue.pause`,
//! `queue.rate_limit`, `queue.progress` and `queue.release`). Pause and the token bucket live in
//! the queue's own keys and are checked by the reserve script, so they hold for every process (ADR
//! 0285); progress sits beside the reservation and goes with it.

use switchyard_core::fleet::{InFlight, RateLimit};

use super::*;

#[async_trait]
impl QueueFlowOps for RedisFleetBackend {
    async fn queue_pause(&self, name: &str) -> Result<bool> {
        self.pause_script(name, "queue_pause", "p").await
    }

    async fn queue_resume(&self, name: &str) -> Result<bool> {
        self.pause_script(name, "queue_resume", "r").await
    }

    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()> {
        let (max, per_ms) = match limit {
            Some(l) => (l.max.to_string(), l.per_ms()),
            None => (String::new(), 0),
        };
        let qk = self.inner.keys.queue(name);
        self.eval(
            "queue_set_rate_limit",
            &qk.rate,
            &self.inner.scripts.rate_limit,
            qk.with_op(&self.op_token()),
            vec![self.op_ttl(), text(max), ms_arg(per_ms)],
        )
        .await?;
        Ok(())
    }

    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool> {
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "queue_progress",
                &qk.progress,
                &self.inner.scripts.progress,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), text(receipt.as_str()), bin(progress)],
            )
            .await?;
        flag_or_cancel(&qk.progress, "queue_progress", reply)
    }

    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "queue_in_flight",
                &qk.processing,
                &self.inner.scripts.in_flight,
                qk.all(),
                vec![int(n)],
            )
            .await?;
        let parts = array(reply);
        if !parts.len().is_multiple_of(5) {
            return Err(Error::corrupt(
                &qk.processing,
                "in_flight: unexpected reply",
            ));
        }
        let mut out = Vec::with_capacity(parts.len() / 5);
        let mut it = parts.into_iter();
        while let (Some(body), Some(tier), Some(attempt), Some(deadline), Some(progress)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        {
            let body = to_bytes(body).unwrap_or_default();
            out.push(InFlight::new(
                task_id(&body),
                body,
                attempt_of(&attempt),
                tier_of(tier),
                to_f64(&deadline).unwrap_or(0.0),
                to_bytes(progress),
            ));
        }
        Ok(out)
    }

    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool> {
        // The nack script in its release mode: the body requeued is the one it delivered.
        self.nack_script("queue_release", name, receipt, text(""), None, delay)
            .await
    }

    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>> {
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "queue_delivered",
                &qk.processing,
                &self.inner.scripts.delivered,
                qk.all(),
                vec![text(receipt.as_str())],
            )
            .await?;
        let mut parts = array(reply).into_iter();
        let (Some(body), Some(tier), Some(attempt), Some(deadline)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Ok(None);
        };
        let body = to_bytes(body).unwrap_or_default();
        Ok(Some(Delivery {
            receipt: receipt.clone(),
            task_id: task_id(&body),
            body,
            attempt: attempt_of(&attempt),
            priority: tier_of(tier),
            visible_until: to_f64(&deadline).unwrap_or(0.0),
        }))
    }
}

/// An attempt number from a script reply (at least 1).
fn attempt_of(v: &RValue) -> u32 {
    u32::try_from(to_i64(v).unwrap_or(1).max(1)).unwrap_or(u32::MAX)
}

/// A tier from its code in a script reply; the normal tier for anything else.
fn tier_of(v: RValue) -> Priority {
    to_string(v)
        .and_then(|code| Priority::from_code(&code))
        .unwrap_or(Priority::Normal)
}

impl RedisFleetBackend {
    /// Pauses (`p`) or resumes (`r`) reservations on queue `name`; whether the state changed.
    async fn pause_script(&self, name: &str, op: &'static str, mode: &'static str) -> Result<bool> {
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                op,
                &qk.paused,
                &self.inner.scripts.pause,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), text(mode)],
            )
            .await?;
        Ok(n == 1)
    }
}
