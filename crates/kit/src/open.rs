//! Opening each port by URL, as `Arc<dyn Port>`.

use std::sync::Arc;

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_core::{HistoryCache, Result};

use crate::backend;
use crate::cache::{CacheSettings, history_cache};
use crate::config::{Config, Port};
use crate::options::OpenOptions;
use crate::url::BackendUrl;

/// Opens an event store: `memory://`, `sqlite://PATH` or `sqlite:PATH` (created if absent; a
/// relative path is resolved against the working directory and logged), `redis://…`,
/// `rediss://…`, `redis-cluster://…`,
/// `postgres://…` / `postgresql://…` (`?schema=NAME`, default `switchyard`); options as URL parameters (see [`OpenOptions`]).
///
/// **A dead backend:** a Redis that refuses connections fails at once (about 1 ms) with
/// [`Error::Unavailable`](switchyard_core::Error::Unavailable); one that accepts but never
/// answers fails after `connect_timeout_ms` (5 s by default; 0.5 s measured with
/// `?connect_timeout_ms=500`). SQLite fails at once when the file cannot be created.
pub async fn open_event_store(url: &str) -> Result<Arc<dyn EventStore>> {
    open_event_store_with(url, &OpenOptions::default()).await
}

/// [`open_event_store`] with options; a field set in `options` wins over the URL's parameter.
pub async fn open_event_store_with(
    url: &str,
    options: &OpenOptions,
) -> Result<Arc<dyn EventStore>> {
    let (url, opts) = split("event_store", url, options)?;
    event_store(&url, "event_store", &opts).await
}

/// [`open_event_store`] with a Redis key prefix (`None`: `agentdeck:events`); other backends
/// ignore it (a Postgres store's namespace is its schema, `?schema=` in the URL).
pub async fn open_event_store_prefixed(
    url: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn EventStore>> {
    open_event_store_with(url, &prefixed(prefix)).await
}

/// Opens a stream bridge: `memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`,
/// `postgres://…` / `postgresql://…`; options
/// as URL parameters (see [`OpenOptions`]).
///
/// **A dead backend:** a Redis that refuses connections fails at once (about 1 ms) with
/// [`Error::Unavailable`](switchyard_core::Error::Unavailable); one that accepts but never
/// answers fails after `connect_timeout_ms` (5 s by default; `command_timeout_ms` bounds the
/// commands after that, not the connect).
pub async fn open_stream_bridge(url: &str) -> Result<Arc<dyn StreamBridge>> {
    open_stream_bridge_with(url, &OpenOptions::default()).await
}

/// [`open_stream_bridge`] with options; a field set in `options` wins over the URL's parameter.
pub async fn open_stream_bridge_with(
    url: &str,
    options: &OpenOptions,
) -> Result<Arc<dyn StreamBridge>> {
    let (url, opts) = split("stream_bridge", url, options)?;
    stream_bridge(&url, "stream_bridge", &opts).await
}

/// [`open_stream_bridge`] with a Redis key prefix (`None`: `deerflow:stream_bridge`) and the
/// number of events kept per run for replay.
pub async fn open_stream_bridge_prefixed(
    url: &str,
    prefix: Option<&str>,
    retention: usize,
) -> Result<Arc<dyn StreamBridge>> {
    let options = OpenOptions {
        retention: Some(retention),
        ..prefixed(prefix)
    };
    open_stream_bridge_with(url, &options).await
}

/// Opens the checkpoint cache port (entries as tag and payload bytes) with the default settings:
/// `memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`. For decoded entries, a chosen
/// serializer and the Redis deadlines use [`open_history_cache`](crate::open_history_cache).
///
/// **A dead backend:** opening never waits (ADR 0213, 0.1 ms measured); every call is a miss
/// answered at once while no connection is up, at most `call_timeout_ms` (250 ms) when one
/// stalls; `close()` returns within about 250 ms.
pub async fn open_checkpoint_cache(url: &str) -> Result<Arc<dyn CheckpointCache>> {
    Ok(
        crate::cache::open_history_cache(url, &CacheSettings::default())
            .await?
            .port()
            .clone(),
    )
}

/// Opens a fleet backend: `memory://`, `sqlite://PATH` or `sqlite:PATH` (created if absent; a
/// relative path is resolved against the working directory and logged), `redis://…`,
/// `rediss://…`, `redis-cluster://…`,
/// `postgres://…` / `postgresql://…`; options as URL parameters (see [`OpenOptions`]).
///
/// **A dead backend:** a Redis that refuses connections fails at once (about 1 ms) with
/// [`Error::Unavailable`](switchyard_core::Error::Unavailable); one that accepts but never
/// answers fails after about twice `command_timeout_ms` (10 s measured by default, 0.5 s with
/// `?command_timeout_ms=500`). SQLite fails at
/// once when the file cannot be created.
pub async fn open_fleet_backend(url: &str) -> Result<Arc<dyn FleetBackend>> {
    open_fleet_backend_with(url, &OpenOptions::default()).await
}

/// [`open_fleet_backend`] with options; a field set in `options` wins over the URL's parameter.
pub async fn open_fleet_backend_with(
    url: &str,
    options: &OpenOptions,
) -> Result<Arc<dyn FleetBackend>> {
    let (url, opts) = split("fleet", url, options)?;
    fleet_backend(&url, "fleet", &opts).await
}

/// [`open_fleet_backend`] with a Redis key prefix (`None`: none, the seed's `fleet:*` keys);
/// other backends ignore it.
pub async fn open_fleet_backend_prefixed(
    url: &str,
    prefix: Option<&str>,
) -> Result<Arc<dyn FleetBackend>> {
    open_fleet_backend_with(url, &prefixed(prefix)).await
}

fn prefixed(prefix: Option<&str>) -> OpenOptions {
    OpenOptions {
        prefix: prefix.map(str::to_string),
        ..OpenOptions::default()
    }
}

/// The URL without the facade's parameters, parsed, and the options: `options` first, then the
/// URL's parameters.
fn split(key: &str, url: &str, options: &OpenOptions) -> Result<(BackendUrl, OpenOptions)> {
    let (clean, from_url) = OpenOptions::from_url(key, url.trim())?;
    let opts = options.or(&from_url);
    opts.validate(key)?;
    Ok((BackendUrl::parse(key, &clean)?, opts))
}

/// A configured port's URL and options: `options` ([`Config::open_options`]), then the
/// parameters of the URL for a backend that reads them there (Redis; the other URLs lose theirs
/// when the configuration parses them).
fn configured(
    key: &str,
    url: BackendUrl,
    options: &OpenOptions,
) -> Result<(BackendUrl, OpenOptions)> {
    if backend::of(&url)?.reads_url_options() {
        split(key, url.url(), options)
    } else {
        options.validate(key)?;
        Ok((url, options.clone()))
    }
}

/// Checks a Redis event store's server settings (`maxmemory-policy` must be `noeviction`,
/// persistence on; see `docs/operations.md`): opens a store on `url`, runs
/// [`RedisEventStore::check_server`](switchyard_store_redis::RedisEventStore::check_server) and
/// closes it. An `Arc<dyn EventStore>` from [`open_event_store`] cannot reach that method, so
/// deployments call this at startup. Only a connection failure is an error; any other URL than
/// Redis is [`Error::Config`](switchyard_core::Error::Config) (SQLite and memory have nothing to check).
#[cfg(feature = "redis")]
pub async fn check_server(url: &str) -> Result<switchyard_store_redis::ServerReport> {
    match BackendUrl::parse("event_store", url)? {
        url if url.kind() == "redis" => {
            let store = switchyard_store_redis::RedisEventStore::connect_with(
                url.url(),
                switchyard_store_redis::RedisStoreOptions::default(),
            )
            .await?;
            let report = store.check_server().await;
            // The report is the answer; a failure to close a connection we are dropping is not.
            let _ = store.close().await;
            report
        }
        other => Err(switchyard_core::Error::config(
            "event_store",
            format!(
                "check_server reads a Redis server's settings; {} has none to check",
                other.kind()
            ),
        )),
    }
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
    /// key prefix; the fleet with `queues.max_result_bytes`.
    pub async fn open(config: &Config) -> Result<Self> {
        let opened = |p: Port| -> Result<(BackendUrl, OpenOptions)> {
            configured(p.setting(), config.url_for(p)?, &config.open_options(p))
        };
        let (store_url, store_opts) = opened(Port::EventStore)?;
        let (bridge_url, bridge_opts) = opened(Port::StreamBridge)?;
        let (fleet_url, fleet_opts) = opened(Port::Fleet)?;
        Ok(Self {
            event_store: event_store(&store_url, Port::EventStore.setting(), &store_opts).await?,
            stream_bridge: stream_bridge(&bridge_url, Port::StreamBridge.setting(), &bridge_opts)
                .await?,
            checkpoint_cache: history_cache(
                &config.url_for(Port::CheckpointCache)?,
                Port::CheckpointCache.setting(),
                &config.checkpoint_cache,
            )
            .await?,
            fleet: fleet_backend(&fleet_url, Port::Fleet.setting(), &fleet_opts).await?,
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

async fn event_store(
    url: &BackendUrl,
    key: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn EventStore>> {
    backend::of(url)?.event_store(url, key, opts).await
}

async fn stream_bridge(
    url: &BackendUrl,
    key: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn StreamBridge>> {
    backend::of(url)?.stream_bridge(url, key, opts).await
}

async fn fleet_backend(
    url: &BackendUrl,
    key: &str,
    opts: &OpenOptions,
) -> Result<Arc<dyn FleetBackend>> {
    backend::of(url)?.fleet(url, key, opts).await
}
