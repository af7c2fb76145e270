//! Batched acks (ADR 0376): successful outcomes gathered and sent with `queue_ack_many`.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::{Receipt, TaskState};
use tokio::sync::{Notify, mpsc};

use super::stats::{Counters, bump};
use crate::queue::Queue;

/// A successful outcome waiting to be acked in a batch, and which count it bumps once acked.
pub(super) struct Ack {
    pub(super) receipt: Receipt,
    pub(super) expired: bool,
    /// The task's id, to tell a cancelled task from a lost delivery when the batch answers
    /// `false` for it.
    pub(super) id: String,
}

/// Sends successful acks in batches: takes the first waiting ack, then whatever else arrives
/// within `window` (or until `batch` are gathered), and acks them in one `queue_ack_many` call.
/// Ends, after sending what is left, when every slot has ended.
pub(super) async fn acker<T: Serialize + DeserializeOwned + Send + 'static>(
    queue: Queue<T>,
    mut rx: mpsc::Receiver<Ack>,
    batch: usize,
    window: Duration,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    // Two batches may be on their way at once, so gathering the next batch does not wait for a
    // commit; the order of concurrent acks of different tasks is not observable.
    let mut flights = tokio::task::JoinSet::new();
    while let Some(first) = rx.recv().await {
        let mut pending: Vec<Ack> = Vec::with_capacity(batch);
        pending.push(first);
        let deadline = tokio::time::Instant::now() + window;
        while pending.len() < batch {
            match rx.try_recv() {
                Ok(ack) => pending.push(ack),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(ack)) => pending.push(ack),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
        while flights.len() >= 2 {
            let _ = flights.join_next().await;
        }
        flights.spawn(flush(
            queue.clone(),
            pending,
            counters.clone(),
            settled.clone(),
        ));
    }
    while flights.join_next().await.is_some() {}
}

/// Acks one batch in one `queue_ack_many` call and counts each answer.
async fn flush<T: Serialize + DeserializeOwned>(
    queue: Queue<T>,
    pending: Vec<Ack>,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    let receipts: Vec<Receipt> = pending.iter().map(|a| a.receipt.clone()).collect();
    match queue
        .backend()
        .queue_ack_many(queue.name(), &receipts)
        .await
    {
        Ok(answers) => {
            for (ack, current) in pending.iter().zip(answers) {
                match (current, ack.expired) {
                    (true, false) => bump(&counters.acked),
                    (true, true) => bump(&counters.expired),
                    // A batch answers `false` for a cancelled task too (and ends it so); its
                    // record tells which (ADR 0380, section 4). Rare, so one read each.
                    (false, _) => {
                        let cancelled = matches!(
                            queue.get(&ack.id).await,
                            Ok(Some(info)) if info.state == TaskState::Cancelled
                        );
                        if cancelled {
                            bump(&counters.cancelled);
                        } else {
                            bump(&counters.lost);
                        }
                    }
                }
            }
        }
        Err(e) => {
            bump(&counters.errors);
            tracing::warn!(
                queue = queue.name(),
                error = %e,
                tasks = pending.len(),
                "batched ack failed; these tasks come back after their visibility"
            );
        }
    }
    settled.notify_waiters();
}
