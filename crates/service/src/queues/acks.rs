//! Many acks in one request (`POST /v1/queues/{queue}/reservations/ack`): a worker that finishes
//! tasks in bursts (a prefetching worker, a batch handler) ends them with one request instead of
//! one each. Each ack is exactly what the ack route does for its receipt, and each is answered on
//! its own: one lost reservation does not fail the others.

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::Receipt;
use utoipa::ToSchema;

use super::Queues;
use crate::{Error, Result};

/// The most acks one request carries.
pub const MAX_ACKS: usize = 1000;

/// Acks of one queue's reservations, sent together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckManyBody {
    /// 1 to 1,000 acks, answered in this order. The results together are at most the ack
    /// route's body limit (the backend's `max_result_bytes` and 64 KiB).
    pub acks: Vec<AckItem>,
}

/// One ack of an [`AckManyBody`]: a receipt, and the task's result if it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckItem {
    /// The reservation's receipt, as `reserve` gave it.
    pub receipt: String,
    /// As the ack route's `result`: any JSON, stored with the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// What became of one ack of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AckOutcome {
    /// The receipt, as sent.
    pub receipt: String,
    /// True when the task ended `completed`.
    pub ok: bool,
    /// When not: the HTTP status the ack route would have answered (409 for
    /// `receipt_not_current` and `cancelled`, 413 for `result_too_large`, 503 for a backend that
    /// did not answer, whose ack may or may not have landed: send it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// When not: the error code, as the ack route's `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When not: what to do, as the ack route's `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The answer of a batch of acks: one outcome per ack, in the order sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AckedMany {
    /// One per ack sent, in order.
    pub results: Vec<AckOutcome>,
}

/// Acks of one batch in flight at once: the adapters merge concurrent acks into few backend
/// calls (the Redis lanes, the SQL group commits), so this many share them.
const ACKS_IN_FLIGHT: usize = 64;

impl Queues {
    /// Acks each of `acks` of `queue` as [`ack_with`](Self::ack_with) does, concurrently, and
    /// answers each one's outcome in order. More than [`MAX_ACKS`], or none, is `invalid_input`
    /// on `acks` and acks nothing.
    pub async fn ack_many(
        &self,
        queue: &str,
        acks: Vec<AckItem>,
    ) -> Result<Vec<(String, Result<()>)>> {
        if acks.is_empty() || acks.len() > MAX_ACKS {
            return Err(Error::invalid(
                "acks",
                format!(
                    "send 1 to {MAX_ACKS} acks in one request, not {}; split a larger batch",
                    acks.len()
                ),
            ));
        }
        Ok(futures::stream::iter(acks)
            .map(|item| async move {
                let receipt = Receipt::new(item.receipt.clone());
                let out = self.ack_with(queue, &receipt, item.result.as_ref()).await;
                (item.receipt, out)
            })
            .buffered(ACKS_IN_FLIGHT)
            .collect()
            .await)
    }
}
