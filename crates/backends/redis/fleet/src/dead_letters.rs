//! Dead letters of [`RedisFleetBackend`]: [`DeadLetters`] (guarantees `dlq.fifo_atomic` and
//! `dlq.requeue_chosen`), on the seed's keys.

use super::*;

#[async_trait]
impl DeadLetterOps for RedisFleetBackend {
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.queue(name).dead;
        let items: Vec<RValue> = self
            .command("dlq_peek", &k, self.client().lrange(&k, 0, n as i64 - 1))
            .await?;
        Ok(items.into_iter().filter_map(to_bytes).collect())
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        // One LPOP with a count inside a script: atomic (the seed's one LPOP per item lost items on
        // a crash), one round trip, and a re-send returns the bodies the first send popped instead
        // of popping more (ADR 0140).
        let r = self
            .eval(
                "dlq_pop",
                &qk.dead,
                &self.inner.scripts.dlq_pop,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), int(n as u64)],
            )
            .await?;
        Ok(array(r).into_iter().filter_map(to_bytes).collect())
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        let k = self.inner.keys.queue(name).dead;
        let n: i64 = self
            .command("dlq_length", &k, self.client().llen(&k))
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "dlq_clear",
                &qk.dead,
                &self.inner.scripts.dlq_clear,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl()],
            )
            .await?;
        Ok(n.max(0) as u64)
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
        let qk = self.inner.keys.queue(name);
        let mut args = Vec::with_capacity(2 + bodies.len());
        args.push(self.op_ttl());
        args.push(Self::tier_code(priority));
        args.extend(bodies.iter().map(|b| bin(b)));
        let reply = self
            .eval(
                "dlq_requeue_chosen",
                &qk.dead,
                &self.inner.scripts.dlq_requeue_chosen,
                qk.with_op(&self.op_token()),
                args,
            )
            .await?;
        let flags = to_bytes(reply).unwrap_or_default();
        if flags.len() != bodies.len() {
            return Err(Error::corrupt(
                &qk.dead,
                "dlq_requeue_chosen: unexpected reply",
            ));
        }
        Ok(flags.into_iter().map(|f| f == b'1').collect())
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        if n == 0 {
            return Ok(0);
        }
        let qk = self.inner.keys.queue(name);
        let moved = self
            .eval_i64(
                "dlq_requeue",
                &qk.dead,
                &self.inner.scripts.dlq_requeue,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), int(n as u64), Self::tier_code(priority)],
            )
            .await?;
        Ok(moved.max(0) as u64)
    }
}
