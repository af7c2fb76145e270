//! In-process pub/sub for fleet adapters whose backend has none (memory, SQLite).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::broadcast;

use super::EventStream;

/// Messages a topic buffers for a slow subscriber before it starts losing the oldest.
const TOPIC_CAPACITY: usize = 1024;

/// Topics of one process: at-most-once delivery to the subscribers present when a message is
/// published, as Redis pub/sub gives.
#[derive(Debug, Default)]
pub struct LocalTopics {
    topics: Mutex<HashMap<String, broadcast::Sender<Vec<u8>>>>,
}

impl LocalTopics {
    /// Delivers `body` to the current subscribers of `topic`; no subscriber is not an error.
    pub fn publish(&self, topic: &str, body: Vec<u8>) {
        let topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = topics.get(topic) {
            let _ = tx.send(body);
        }
    }

    /// Every message published to `topic` from now on, in order.
    pub fn subscribe(&self, topic: &str) -> EventStream {
        let rx = {
            let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            topics
                .entry(topic.to_string())
                .or_insert_with(|| broadcast::channel(TOPIC_CAPACITY).0)
                .subscribe()
        };
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(msg) => return Some((msg, rx)),
                    // A slow subscriber loses messages, as on Redis pub/sub.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }))
    }
}
