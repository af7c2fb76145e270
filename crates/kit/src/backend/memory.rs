//! `memory://`: every port in process memory; nothing survives the process.

use std::sync::Arc;

use switchyard_core::cache::{CheckpointCache, MemoryCheckpointCache};
use switchyard_core::fleet::{DEFAULT_MAX_RESULT_BYTES, FleetBackend};
use switchyard_core::store::EventStore;
use switchyard_core::stream::{DEFAULT_QUEUE_MAXSIZE, StreamBridge};
use switchyard_core::{Error, MemoryEventStore, MemoryFleetBackend, MemoryStreamBridge, Result};

use super::{Backend, async_trait};
use crate::cache::{CacheSettings, DEFAULT_MEMORY_CACHE_ENTRIES};
use crate::options::OpenOptions;
use crate::url::BackendUrl;

/// The in-process adapters of `switchyard-core`.
#[derive(Debug)]
pub(super) struct Memory;

#[async_trait]
impl Backend for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["memory"]
    }

    fn parse(&self, _key: &str, _url: &str, _rest: &str) -> Result<BackendUrl> {
        Ok(BackendUrl::memory())
    }

    async fn event_store(
        &self,
        _url: &BackendUrl,
        _key: &str,
        _opts: &OpenOptions,
    ) -> Result<Arc<dyn EventStore>> {
        Ok(Arc::new(MemoryEventStore::new()))
    }

    async fn stream_bridge(
        &self,
        _url: &BackendUrl,
        _key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn StreamBridge>> {
        let retention = opts.retention.unwrap_or(DEFAULT_QUEUE_MAXSIZE);
        Ok(Arc::new(MemoryStreamBridge::new(retention)?))
    }

    async fn fleet(
        &self,
        _url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn FleetBackend>> {
        // The memory fleet has no option for it: another limit would be silently ignored.
        if let Some(n) = opts.max_result_bytes
            && n != DEFAULT_MAX_RESULT_BYTES
        {
            return Err(Error::config(
                key,
                format!(
                    "the memory fleet stores results of at most {DEFAULT_MAX_RESULT_BYTES} bytes \
                     and cannot be set to {n}: leave `max_result_bytes` (the configuration's \
                     `queues.max_result_bytes`) out, or use a SQLite, Redis or PostgreSQL fleet"
                ),
            ));
        }
        Ok(Arc::new(MemoryFleetBackend::new()))
    }

    async fn checkpoint_cache(
        &self,
        _url: &BackendUrl,
        _key: &str,
        _settings: &CacheSettings,
    ) -> Result<Arc<dyn CheckpointCache>> {
        Ok(Arc::new(MemoryCheckpointCache::with_capacity(
            DEFAULT_MEMORY_CACHE_ENTRIES,
        )))
    }
}
