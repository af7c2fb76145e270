//! Pub/sub events of [`MemoryFleetBackend`]: [`Events`] (guarantee `events.pubsub`).

use super::*;

#[async_trait]
impl EventOps for MemoryFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        self.publish(topic, body.to_vec());
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        Ok(self.shared.topics.subscribe(topic))
    }
}
