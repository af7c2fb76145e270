//! Opening each port by URL, as `Arc<dyn Port>`.

use std::sync::Arc;

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::{DEFAULT_QUEUE_MAXSIZE, StreamBridge};
use switchyard_core::{
    Error, MemoryCheckpointCache, MemoryEventStore, MemoryFleetBackend, MemoryStreamBridge, Result,
};

use crate::config::{Config, Port};
use crate::url::BackendUrl;

/// Entries a `memory://` checkpoint cache holds before evicting (the seed's default).
pub const DEFAULT_MEMORY_CACHE_ENTRIES: usize = 10_000;

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

/// Opens a checkpoint cache: `memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`.
pub async fn open_checkpoint_cache(url: &str) -> Result<Arc<dyn CheckpointCache>> {
    checkpoint_cache(
        &BackendUrl::parse("checkpoint_cache", url)?,
        "checkpoint_cache",
    )
    .await
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
    /// The checkpoint cache.
    pub checkpoint_cache: Arc<dyn CheckpointCache>,
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
            checkpoint_cache: checkpoint_cache(
                &config.url_for(Port::CheckpointCache)?,
                setting(Port::CheckpointCache),
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
async fn checkpoint_cache(url: &BackendUrl, key: &str) -> Result<Arc<dyn CheckpointCache>> {
    match url {
        BackendUrl::Memory => Ok(Arc::new(MemoryCheckpointCache::with_capacity(
            DEFAULT_MEMORY_CACHE_ENTRIES,
        ))),
        BackendUrl::Sqlite { .. } => Err(Error::config(
            key,
            "the checkpoint cache has no SQLite adapter: use memory:// or redis://",
        )),
        // Not yet (ADR 0225): the cache port is being reshaped; a Postgres cache would follow.
        BackendUrl::Postgres { .. } => Err(Error::config(
            key,
            "the checkpoint cache has no PostgreSQL adapter: use memory:// (per process) or redis://",
        )),
        #[cfg(feature = "redis")]
        BackendUrl::Redis { url: redis, .. } => Ok(Arc::new(
            switchyard_checkpoint_cache_redis::RedisCheckpointCache::connect(
                redis,
                Default::default(),
            )
            .await?,
        )),
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
        BackendUrl::Postgres { url: postgres } => {
            use switchyard_postgres_support::{DEFAULT_SCHEMA, PoolOptions, PostgresUrl, Schema};
            // The schema the URL names (`?schema=`), as the store and the bridge read it.
            let schema = PostgresUrl::parse(postgres, key)?
                .schema()
                .map_or_else(|| DEFAULT_SCHEMA.to_owned(), str::to_owned);
            let options = switchyard_fleet_postgres::PostgresFleetOptions {
                pool: PoolOptions::default().schema(Schema::new(schema)?),
                ..Default::default()
            };
            Ok(Arc::new(
                switchyard_fleet_postgres::PostgresFleetBackend::open_with(postgres, options)
                    .await?,
            ))
        }
        #[allow(unreachable_patterns)]
        other => Err(crate::url::feature_missing(key, other.kind(), other)),
    }
}
