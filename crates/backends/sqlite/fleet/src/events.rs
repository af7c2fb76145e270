//! Pub/sub events of [`SqliteFleetBackend`]: [`Events`] (guarantee `events.pubsub`), on the seed's
//! tables.

use super::*;

#[async_trait]
impl Events for SqliteFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        self.publish(topic, body.to_vec());
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        Ok(self.inner.topics.subscribe(topic))
    }
}
