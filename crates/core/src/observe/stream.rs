//! The stream bridge, observed.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use super::{Observed, PortKind};
use crate::Result;
use crate::stream::{Capabilities, ItemStream, StreamBridge};

const PORT: PortKind = PortKind::StreamBridge;

#[async_trait]
impl<B: StreamBridge + ?Sized> StreamBridge for Observed<B> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn publish(&self, run_id: &str, event: &str, data: &Value) -> Result<String> {
        self.call(PORT, "publish", self.inner.publish(run_id, event, data))
            .await
    }

    async fn publish_end(&self, run_id: &str) -> Result<()> {
        self.call(PORT, "publish_end", self.inner.publish_end(run_id))
            .await
    }

    /// Reports opening the subscription; what it then delivers is the stream's, not a call's.
    fn subscribe(
        &self,
        run_id: &str,
        last_event_id: Option<&str>,
        heartbeat: Duration,
    ) -> ItemStream {
        let started = Instant::now();
        let stream = self.inner.subscribe(run_id, last_event_id, heartbeat);
        self.report(PORT, "subscribe", started.elapsed(), true);
        stream
    }

    async fn cleanup(&self, run_id: &str, delay: Duration) -> Result<()> {
        self.call(PORT, "cleanup", self.inner.cleanup(run_id, delay))
            .await
    }

    async fn stream_exists(&self, run_id: &str) -> Result<bool> {
        self.call(PORT, "stream_exists", self.inner.stream_exists(run_id))
            .await
    }

    async fn close(&self) -> Result<()> {
        self.call(PORT, "close", self.inner.close()).await
    }
}
