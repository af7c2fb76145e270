//! Batches of [`RedisFleetBackend`]: [`QueueBatches`] (guarantee `queue.batches`). Each batch is
//! one call of the queue's own push, reserve or ack script (ADR 0287): the scripts already take
//! many items for the natural batching of concurrent calls (ADR 0141), so a batch is atomic and
//! re-sent safely under its op token (ADR 0140) like any of them.

use super::*;

#[async_trait]
impl QueueBatchOps for RedisFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
        let qk = self.inner.keys.queue(name);
        let reqs: Vec<PushReq> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| PushReq {
                code: priority.code(),
                body: Bytes::copy_from_slice(b),
                task: heads.get(i).filter(|h| h.id.is_some()).map(head_args),
            })
            .collect();
        // One call: a batch with a taken id pushes none of it (ADR 0380).
        let pushed = self.push_script(&qk, &reqs, true, &self.op_token()).await?;
        match pushed
            .into_iter()
            .find_map(|p| p.err().filter(|id| !id.is_empty()))
        {
            Some(id) => Err(Error::AlreadyExists { what: "task", id }),
            None => Ok(()),
        }
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        let reqs: Vec<AckReq> = receipts
            .iter()
            .map(|r| AckReq {
                receipt: r.as_str().to_owned(),
                result: None,
            })
            .collect();
        // A delivery a cancel reached ends `cancelled` and answers `false` (ADR 0380).
        let acked = self.ack_script(&qk, &reqs, &self.op_token()).await?;
        Ok(acked.into_iter().map(|a| a == Acked::Done).collect())
    }
}
