//! Pub/sub events of [`PostgresFleetBackend`]: [`Events`] (guarantee 18), over `NOTIFY` on the
//! backend's channel, so every process on the database hears them (ADR 0233).

use super::*;

#[async_trait]
impl Events for PostgresFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        let payload = event_payload(topic, body)?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(self.channel())
            .bind(payload)
            .execute(self.pool())
            .await
            .map_err(|e| db("event_publish", topic, e))?;
        Ok(())
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        // The backend's listener has been LISTENing since open, so everything published after
        // this returns reaches the subscription.
        Ok(self.inner.topics.subscribe(&topic_key(topic)))
    }
}
