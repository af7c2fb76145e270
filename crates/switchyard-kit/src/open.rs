//! Opening each port by URL, as `Arc<dyn Port>`.

use std::sync::Arc;

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::{DEFAULT_QUEUE_MAXSIZE, StreamBridge};
use switchyard_core::{
    Error, HistoryCache, MemoryEventStore, MemoryFleetBackend, MemoryStreamBridge, Result,
};

use crate::cache::{CacheSettings, history_cache};
use crate::config::{Config, Port};
use crate::url::BackendUrl;

/// Opens an event store: `memory://`, `sqlite://PATH` (created if absent), `redis://…`,
/// `rediss://…`, `redis-cluster://…`, `postgres://…` / `postgresql://…` (`?schema=NAME`, default
/// `switchyard`).
pub async fn open_event_store(url: &str) -> Result<Arc<dyn EventStore>> {
    event_store(&BackendUrl::parse("event_store", url)?, "event_store", None).await
}

/// [`open_event_store`] with a Redis key prefix (`None`: `agentdeck:events`); other backends
/// ignore it (a Postgres store's namespace is its schema, `?schema=` in the URL).
pub async fn open_event_store_prefixed(
    url: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn EventStore>> {
    event_store(
        &BackendUrl::parse("event_store", url)?,
        "event_store",
        prefix,
    )
    .await
}

/// Opens a stream bridge: `memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`,
/// `postgres://…` / `postgresql://…`.
pub async fn open_stream_bridge(url: &str) -> Result<Arc<dyn StreamBridge>> {
    open_stream_bridge_prefixed(url, None, DEFAULT_QUEUE_MAXSIZE).await
}

/// [`open_stream_bridge`] with a Redis key prefix (`None`: `deerflow:stream_bridge`) and the
/// number of events kept per run for replay.
pub async fn open_stream_bridge_prefixed(
    url: &str,
    prefix: Option<&str>,
    retention: usize,
) -> Result<Arc<dyn StreamBridge>> {
    stream_bridge(
        &BackendUrl::parse("stream_bridge", url)?,
        "stream_bridge",
        prefix,
        retention,
    )
    .await
}

/// Opens the checkpoint cache port (entries as tag and payload bytes) with the default settings:
/// `memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`. For decoded entries and a chosen
/// serializer use [`open_history_cache`](crate::open_history_cache).
pub async fn open_checkpoint_cache(url: &str) -> Result<Arc<dyn CheckpointCache>> {
    Ok(
        crate::cache::open_history_cache(url, &CacheSettings::default())
            .await?
            .port()
            .clone(),
    )
}

/// Opens a fleet backend: `memory://`, `sqlite://PATH` (created if absent), `redis://…`,
/// `rediss://…`, `redis-cluster://…`, `postgres://…` / `postgresql://…`.
pub async fn open_fleet_backend(url: &str) -> Result<Arc<dyn FleetBackend>> {
    fleet_backend(&BackendUrl::parse("fleet", url)?, "fleet", None).await
}

/// [`open_fleet_backend`] with a Redis key prefix (`None`: none, the seed's `fleet:*` keys);
/// other backends ignore it.
pub async fn open_fleet_backend_prefixed(
    url: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn FleetBackend>> {
    fleet_backend(&BackendUrl::parse("fleet", url)?, "fleet", prefix).await
}

/// The four ports of one deployment, opened from a [`Config`].
#[derive(Debug, Clone)]
pub struct Switchyard {
    /// The run log.
    pub event_store: Arc<dyn EventStore>,
    /// Live run streams.
    pub stream_bridge: Arc<dyn StreamBridge>,
    /// The checkpoint cache, with the configured serializer (its port is `.port()`).
    pub checkpoint_cache: HistoryCache,
    /// The fleet backend.
    pub fleet: Arc<dyn FleetBackend>,
}

impl Switchyard {
    /// Opens every port as `config` says (see [`Config::url_for`] for the fallbacks), with its
    /// key prefix.
    pub async fn open(config: &Config) -> Result<Self> {
        let setting = |p: Port| p.setting();
        let prefix = |p: Port| config.prefixes.for_port(p);
        Ok(Self {
            event_store: event_store(
                &config.url_for(Port::EventStore)?,
                setting(Port::EventStore),
                prefix(Port::EventStore),
            )
            .await?,
            stream_bridge: stream_bridge(
                &config.url_for(Port::StreamBridge)?,
                setting(Port::StreamBridge),
                prefix(Port::StreamBridge),
                DEFAULT_QUEUE_MAXSIZE,
            )
            .await?,
            checkpoint_cache: history_cache(
                &config.url_for(Port::CheckpointCache)?,
                setting(Port::CheckpointCache),
                &config.checkpoint_cache,
            )
            .await?,
            fleet: fleet_backend(
                &config.url_for(Port::Fleet)?,
                setting(Port::Fleet),
                prefix(Port::Fleet),
            )
            .await?,
        })
    }

    /// The embedded default: one SQLite file at `sqlite_path` for the event store and the fleet,
    /// the memory bridge and cache.
    pub async fn embedded(sqlite_path: impl Into<std::path::PathBuf>) -> Result<Self> {
        let config = Config {
            sqlite_path: sqlite_path.into(),
            ..Config::default()
        };
        Self::open(&config).await
    }
}

#[allow(unused_variables)]
async fn event_store(
    url: &BackendUrl,
    key: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn EventStore>> {
    match url {
        BackendUrl::Memory => Ok(Arc::new(MemoryEventStore::new())),
        #[cfg(feature = "sqlite")]
        BackendUrl::Sqlite { path } => Ok(Arc::new(
            switchyard_store_sqlite::SqliteEventStore::open(path).await?,
        )),
        #[cfg(feature = "redis")]
        BackendUrl::Redis { url: redis, .. } => {
            let mut options = switchyard_store_redis::RedisStoreOptions::default();
            if let Some(p) = prefix {
                options = options.prefix(p);
            }
            Ok(Arc::new(
                switchyard_store_redis::RedisEventStore::connect_with(redis, options).await?,
            ))
        }
        #[cfg(feature = "postgres")]
        BackendUrl::Postgres { url: postgres } => Ok(Arc::new(
            switchyard_store_postgres::PostgresEventStore::open(postgres).await?,
        )),
        #[allow(unreachable_patterns)]
        other => Err(crate::url::feature_missing(key, other.kind(), other)),
    }
}

#[allow(unused_variables)]
async fn stream_bridge(
    url: &BackendUrl,
    key: &str,
    prefix: Option<&str>,
    retention: usize,
) -> Result<Arc<dyn StreamBridge>> {
    match url {
        BackendUrl::Memory => Ok(Arc::new(MemoryStreamBridge::new(retention)?)),
        BackendUrl::Sqlite { .. } => Err(Error::config(
            key,
            "the stream bridge has no SQLite adapter: use memory:// (one process) or redis:// (several)",
        )),
        #[cfg(feature = "redis")]
        BackendUrl::Redis { url: redis, .. } => {
            let mut config =
                switchyard_stream_bridge_redis::RedisStreamBridgeConfig::new(redis.clone());
            config.queue_maxsize = retention;
            if let Some(p) = prefix {
                config.key_prefix = p.to_string();
            }
            Ok(Arc::new(
                switchyard_stream_bridge_redis::RedisStreamBridge::connect(config).await?,
            ))
        }
        #[cfg(feature = "postgres")]
        BackendUrl::Postgres { url: postgres } => {
            let mut config = switchyard_stream_bridge_postgres::PostgresStreamBridgeConfig::new(
                postgres.clone(),
            );
            config.queue_maxsize = retention;
            Ok(Arc::new(
                switchyard_stream_bridge_postgres::PostgresStreamBridge::connect(config).await?,
            ))
        }
        #[allow(unreachable_patterns)]
        other => Err(crate::url::feature_missing(key, other.kind(), other)),
    }
}

#[allow(unused_variables)]
async fn fleet_backend(
    url: &BackendUrl,
    key: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn FleetBackend>> {
    match url {
        BackendUrl::Memory => Ok(Arc::new(MemoryFleetBackend::new())),
        #[cfg(feature = "sqlite")]
        BackendUrl::Sqlite { path } => Ok(Arc::new(
            switchyard_fleet_sqlite::SqliteFleetBackend::open(path).await?,
        )),
        #[cfg(feature = "redis")]
        BackendUrl::Redis { url: redis, .. } => {
            let config = switchyard_fleet_redis::RedisFleetConfig::new(redis.clone())
                .with_prefix(prefix.unwrap_or_default());
            Ok(Arc::new(
                switchyard_fleet_redis::RedisFleetBackend::with_config(config).await?,
            ))
        }
        #[cfg(feature = "postgres")]
        // `open` reads `?schema=` as the store and the bridge do, and keeps the fleet's own
        // defaults (no ping before each one-statement call, ADR 0235).
        BackendUrl::Postgres { url: postgres } => Ok(Arc::new(
            switchyard_fleet_postgres::PostgresFleetBackend::open(postgres).await?,
        )),
        #[allow(unreachable_patterns)]
        other => Err(crate::url::feature_missing(key, other.kind(), other)),
    }
}
