//! `redis://`, `rediss://` (TLS), `redis-cluster://` and `rediss-cluster://`: every port on Redis
//! or a Redis Cluster (feature `redis`).

use std::sync::Arc;

use switchyard_core::Result;
use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;

use super::{Backend, async_trait};
use crate::cache::CacheSettings;
use crate::options::OpenOptions;
use crate::url::BackendUrl;

/// `switchyard-store-redis`, `-stream-bridge-redis`, `-checkpoint-cache-redis` and
/// `-fleet-redis`. The URL goes to them as given: fred reads the ACL user, the password, the
/// database index and a cluster's `node=` seeds from it.
#[derive(Debug)]
pub(super) struct Redis;

#[async_trait]
impl Backend for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["redis", "rediss", "redis-cluster", "rediss-cluster"]
    }

    fn reads_url_options(&self) -> bool {
        true
    }

    #[allow(unused_variables)]
    async fn event_store(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn EventStore>> {
        #[cfg(feature = "redis")]
        {
            let mut options = switchyard_store_redis::RedisStoreOptions::default();
            if let Some(p) = &opts.prefix {
                options = options.prefix(p);
            }
            if let Some(t) = opts.command_timeout() {
                options.command_timeout = t;
            }
            if let Some(t) = opts.connect_timeout() {
                options.connect_timeout = t;
            }
            if let Some(n) = opts.pool_size {
                options.pool_size = n;
            }
            Ok(Arc::new(
                switchyard_store_redis::RedisEventStore::connect_with(url.url(), options).await?,
            ))
        }
        #[cfg(not(feature = "redis"))]
        Err(super::feature_missing(key, self.name()))
    }

    #[allow(unused_variables)]
    async fn stream_bridge(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn StreamBridge>> {
        #[cfg(feature = "redis")]
        {
            let mut config =
                switchyard_stream_bridge_redis::RedisStreamBridgeConfig::new(url.url().to_owned());
            config.queue_maxsize = opts
                .retention
                .unwrap_or(switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE);
            if let Some(p) = &opts.prefix {
                config.key_prefix = p.clone();
            }
            if let Some(t) = opts.command_timeout() {
                config.command_timeout = t;
            }
            if let Some(t) = opts.connect_timeout() {
                config.connect_timeout = t;
            }
            Ok(Arc::new(
                switchyard_stream_bridge_redis::RedisStreamBridge::connect(config).await?,
            ))
        }
        #[cfg(not(feature = "redis"))]
        Err(super::feature_missing(key, self.name()))
    }

    #[allow(unused_variables)]
    async fn fleet(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn FleetBackend>> {
        #[cfg(feature = "redis")]
        {
            let mut config = switchyard_fleet_redis::RedisFleetConfig::new(url.url().to_owned())
                .with_prefix(opts.prefix.as_deref().unwrap_or_default());
            if let Some(t) = opts.command_timeout() {
                config.command_timeout = t;
            }
            if let Some(n) = opts.pool_size {
                config.pool_size = n;
            }
            if let Some(n) = opts.max_result_bytes {
                config = config.with_max_result_bytes(n);
            }
            Ok(Arc::new(
                switchyard_fleet_redis::RedisFleetBackend::with_config(config).await?,
            ))
        }
        #[cfg(not(feature = "redis"))]
        Err(super::feature_missing(key, self.name()))
    }

    #[allow(unused_variables)]
    async fn checkpoint_cache(
        &self,
        url: &BackendUrl,
        key: &str,
        settings: &CacheSettings,
    ) -> Result<Arc<dyn CheckpointCache>> {
        #[cfg(feature = "redis")]
        {
            let options = switchyard_checkpoint_cache_redis::RedisCheckpointCacheOptions {
                ttl_seconds: settings.ttl_seconds,
                call_timeout: std::time::Duration::from_millis(settings.call_timeout_ms),
                reconnect_interval: std::time::Duration::from_millis(
                    settings.reconnect_interval_ms,
                ),
                ..Default::default()
            };
            Ok(Arc::new(
                switchyard_checkpoint_cache_redis::RedisCheckpointCache::connect(
                    url.url(),
                    options,
                )
                .await?,
            ))
        }
        #[cfg(not(feature = "redis"))]
        Err(super::feature_missing(key, self.name()))
    }
}
