//! The checkpoint cache, observed. Its calls degrade to misses instead of failing, so every
//! call is reported as `ok`; the cache's own [`CacheStats`] count its errors.

use std::collections::HashMap;
use std::time::Instant;

use async_trait::async_trait;

use super::{Observed, PortKind};
use crate::cache::{CacheStats, CheckpointCache, TypedPayload};

const PORT: PortKind = PortKind::CheckpointCache;

#[async_trait]
impl<C: CheckpointCache + ?Sized> CheckpointCache for Observed<C> {
    async fn get_many(&self, keys: &[String]) -> HashMap<String, TypedPayload> {
        let started = Instant::now();
        let out = self.inner.get_many(keys).await;
        self.report(PORT, "get_many", started.elapsed(), true);
        out
    }

    async fn set_many(&self, entries: Vec<(String, TypedPayload)>) {
        let started = Instant::now();
        self.inner.set_many(entries).await;
        self.report(PORT, "set_many", started.elapsed(), true);
    }

    async fn delete_thread(&self, key_prefix: &str, thread_id: &str) {
        let started = Instant::now();
        self.inner.delete_thread(key_prefix, thread_id).await;
        self.report(PORT, "delete_thread", started.elapsed(), true);
    }

    fn stats(&self) -> CacheStats {
        self.inner.stats()
    }

    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
