//! Pub/sub events of [`RedisFleetBackend`]: [`Events`] (guarantee `events.pubsub`), on the seed's
//! keys.

use super::*;

#[async_trait]
impl EventOps for RedisFleetBackend {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        let ch = self.inner.keys.channel(topic);
        self.command(
            "event_publish",
            &ch,
            self.client().publish::<(), _, _>(&ch, bin(body)),
        )
        .await
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        let ch = self.inner.keys.channel(topic);
        // A subscriber is a connection of its own, made now: not while Redis is known to be down.
        self.inner.circuit.check("event_subscribe", &ch)?;
        // The backend's own URL and connection policy: a subscriber reconnects (and
        // resubscribes) like the command connections do.
        let sub = self
            .inner
            .policy
            .builder(&self.inner.url)
            .build_subscriber_client()
            .map_err(|e| build_error("url", &self.inner.url, &e))?;
        sub.init()
            .await
            .map_err(|e| classify("event_subscribe", &ch, e))?;
        // Resubscribes after a reconnect.
        let _task = sub.manage_subscriptions();
        let rx = sub.message_rx();
        sub.subscribe(ch.clone())
            .await
            .map_err(|e| classify("event_subscribe", &ch, e))?;
        // A PING on the same connection is answered after the server has run the SUBSCRIBE
        // (one connection's commands run in order), so a publish made once this returns is
        // delivered: without it a loaded machine let the first publish slip past.
        sub.ping::<()>(None)
            .await
            .map_err(|e| classify("event_subscribe", &ch, e))?;
        let guard = SubscriberGuard(sub);
        Ok(Box::pin(futures::stream::unfold(
            (rx, guard, ch),
            |(mut rx, guard, ch)| async move {
                loop {
                    match rx.recv().await {
                        Ok(msg) if *msg.channel == *ch => {
                            let body = to_bytes(msg.value).unwrap_or_default();
                            return Some((body, (rx, guard, ch)));
                        }
                        Ok(_) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        )))
    }
}
