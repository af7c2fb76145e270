//! Pub/sub events of [`SqliteFleetBackend`]: [`Events`] (guarantee `events.pubsub`), on the seed's
//! tables.

use super::*;

#[async_trait]
impl EventOps for SqliteFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        self.publish(topic, body.to_vec());
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        Ok(self.inner.topics.subscribe(topic))
    }
}
