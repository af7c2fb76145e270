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
        _heads: &[TaskHead],
        priority: Priority,
    ) -> Result<()> {
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

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        let receipts: Vec<String> = receipts.iter().map(|r| r.as_str().to_owned()).collect();
        self.ack_script(&qk, &receipts, &self.op_token()).await
    }
}
