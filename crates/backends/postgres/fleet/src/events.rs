//! Pub/sub events of [`PostgresFleetBackend`]: [`Events`] (guarantee `events.pubsub`), over
//! `NOTIFY` on the backend's channel, so every process on the database hears them (ADR 0233).

use super::*;

/// How long a subscription waits for its fence to come back through the listener.
const FENCE_WAIT: Duration = Duration::from_secs(10);

#[async_trait]
impl EventOps for PostgresFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
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
        // Start at a fence of our own on the channel: after everything published before this
        // call, before everything published after it returns.
        let token = random_token();
        let started = self.inner.topics.pending(&token, topic_key(topic));
        let fenced = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(self.channel())
            .bind(format!("f:{token}"))
            .execute(self.pool())
            .await;
        if let Err(e) = fenced {
            self.inner.topics.forget(&token);
            return Err(db("event_subscribe", topic, e));
        }
        match tokio::time::timeout(FENCE_WAIT, started).await {
            Ok(Ok(stream)) => Ok(stream),
            _ => {
                self.inner.topics.forget(&token);
                Err(Error::unavailable(
                    "event_subscribe",
                    topic.to_string(),
                    "the listening connection did not hear the subscription's own notification \
                     in time; the server or the connection is slow or down, try again",
                ))
            }
        }
    }
}
