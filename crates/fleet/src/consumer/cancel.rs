//! Telling running handlers their task was cancelled (ADR 0380, section 4): the tokens of the
//! tasks this consumer runs, by id, and the listener of `fleet.cancel.{queue}` that fires them.
//! The heartbeat's `Cancelled` answer is the guaranteed path; the notice is the fast one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::Receipt;
use switchyard_core::fleet::adapter::cancel_topic;
use tokio::sync::{Notify, watch};

use super::buffer::Local;
use super::stats::Counters;
use crate::cancel::{CancelReason, CancelToken};
use crate::queue::Queue;

/// The tokens of the tasks this consumer's slots run, by task id.
#[derive(Debug, Default)]
pub(super) struct Running {
    tokens: Mutex<HashMap<String, (Receipt, CancelToken)>>,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (Receipt, CancelToken)>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn insert(&self, id: &str, receipt: &Receipt, token: &CancelToken) {
        self.lock()
            .insert(id.to_string(), (receipt.clone(), token.clone()));
    }

    pub(super) fn remove(&self, id: &str, receipt: &Receipt) {
        let mut map = self.lock();
        if map.get(id).is_some_and(|(r, _)| r == receipt) {
            map.remove(id);
        }
    }

    /// Fires the token of task `id` if a slot runs it; whether one does.
    fn fire(&self, id: &str) -> bool {
        match self.lock().get(id) {
            Some((_, token)) => {
                token.fire(CancelReason::Cancelled);
                true
            }
            None => false,
        }
    }
}

/// Subscribes once to the queue's cancel topic and fires the token of each task named there
/// that a slot runs; a prefetched task named there is taken out of the buffer and ended (a
/// release the backend answers `Cancelled`). Ends when the consumer stops or the subscription
/// ends (the heartbeats still find every cancel).
pub(super) async fn listener<T: Serialize + DeserializeOwned + Send + 'static>(
    queue: Queue<T>,
    running: Arc<Running>,
    local: Option<Arc<Local<T>>>,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    settled: Arc<Notify>,
) {
    let topic = cancel_topic(queue.name());
    let mut stream = tokio::select! {
        _ = stop.wait_for(|s| *s) => return,
        sub = queue.backend().event_subscribe(&topic) => match sub {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(queue = queue.name(), error = %e, "cannot follow cancel notices; heartbeats will find cancels");
                return;
            }
        },
    };
    loop {
        let body = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            body = stream.next() => match body {
                Some(b) => b,
                None => return,
            },
        };
        let id = String::from_utf8_lossy(&body);
        if running.fire(&id) {
            continue;
        }
        let Some(local) = &local else { continue };
        let Some(reserved) = local.remove_id(&id) else {
            continue;
        };
        let res = queue.release(reserved.delivery(), Duration::ZERO).await;
        counters.note(
            queue.name(),
            "ending a cancelled task",
            res,
            &counters.released,
        );
        settled.notify_waiters();
    }
}
