//! `postgres://` and `postgresql://`: the event store, the stream bridge and the fleet on
//! PostgreSQL (feature `postgres`), their tables in the URL's `?schema=` (default `switchyard`).

use std::sync::Arc;

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_core::{Error, Result};

use super::{Backend, async_trait};
use crate::cache::CacheSettings;
use crate::options::OpenOptions;
use crate::url::BackendUrl;

/// `switchyard-store-postgres`, `-stream-bridge-postgres` and `-fleet-postgres`. The URL goes to
/// sqlx as given (`sslmode`, `application_name`, …) with `schema=` read by the adapters.
#[derive(Debug)]
pub(super) struct Postgres;

#[async_trait]
impl Backend for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    fn parse(&self, key: &str, url: &str, rest: &str) -> Result<BackendUrl> {
        if super::require_host(key, url, rest).is_err() {
            return Err(Error::config(
                key,
                "a postgres:// URL needs a host: postgres://USER:PASSWORD@HOST:5432/DATABASE",
            ));
        }
        Ok(BackendUrl::new(self.name(), url))
    }

    #[allow(unused_variables)]
    async fn event_store(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn EventStore>> {
        #[cfg(feature = "postgres")]
        {
            let pool_size = pool_size(key, opts)?;
            let mut options = switchyard_store_postgres::PostgresOptions::default();
            if let Some(n) = pool_size {
                options = options.max_connections(n);
            }
            if let Some(t) = opts.connect_timeout() {
                options = options.connect_timeout(t);
            }
            if let Some(t) = opts.command_timeout() {
                options = options.acquire_timeout(t).statement_timeout(t);
            }
            Ok(Arc::new(
                switchyard_store_postgres::PostgresEventStore::open_with(url.url(), options)
                    .await?,
            ))
        }
        #[cfg(not(feature = "postgres"))]
        Err(super::feature_missing(key, self.name()))
    }

    #[allow(unused_variables)]
    async fn stream_bridge(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn StreamBridge>> {
        #[cfg(feature = "postgres")]
        {
            let pool_size = pool_size(key, opts)?;
            let mut config = switchyard_stream_bridge_postgres::PostgresStreamBridgeConfig::new(
                url.url().to_owned(),
            );
            config.queue_maxsize = opts
                .retention
                .unwrap_or(switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE);
            if let Some(n) = pool_size {
                config.max_connections = n;
            }
            if let Some(t) = opts.connect_timeout() {
                config.connect_timeout = t;
            }
            config.command_timeout = opts.command_timeout();
            Ok(Arc::new(
                switchyard_stream_bridge_postgres::PostgresStreamBridge::connect(config).await?,
            ))
        }
        #[cfg(not(feature = "postgres"))]
        Err(super::feature_missing(key, self.name()))
    }

    #[allow(unused_variables)]
    async fn fleet(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn FleetBackend>> {
        // The fleet's own defaults stay (no ping before each one-statement call, ADR 0235);
        // `?schema=` is read as the store and the bridge read it.
        #[cfg(feature = "postgres")]
        {
            let pool_size = pool_size(key, opts)?;
            let mut options = switchyard_fleet_postgres::PostgresFleetOptions::for_url(url.url())?;
            if let Some(n) = pool_size {
                options.pool = options.pool.max_connections(n);
            }
            if let Some(t) = opts.connect_timeout() {
                options.pool = options.pool.connect_timeout(t);
            }
            if let Some(t) = opts.command_timeout() {
                options.pool = options.pool.acquire_timeout(t).statement_timeout(t);
            }
            if let Some(n) = opts.max_result_bytes {
                options.max_result_bytes = n;
            }
            Ok(Arc::new(
                switchyard_fleet_postgres::PostgresFleetBackend::open_with(url.url(), options)
                    .await?,
            ))
        }
        #[cfg(not(feature = "postgres"))]
        Err(super::feature_missing(key, self.name()))
    }

    // Not yet (ADR 0225): a Postgres cache would follow the reshaped cache port.
    async fn checkpoint_cache(
        &self,
        _url: &BackendUrl,
        key: &str,
        _settings: &CacheSettings,
    ) -> Result<Arc<dyn CheckpointCache>> {
        Err(Error::config(
            key,
            "the checkpoint cache has no PostgreSQL adapter: use memory:// (per process) or redis://",
        ))
    }
}

/// Checks `opts` for a PostgreSQL adapter and returns its pool size: a key prefix has no meaning
/// there (tables live in a schema), and a pool size must fit PostgreSQL's connection count
/// (ADR 0345).
#[cfg(feature = "postgres")]
fn pool_size(key: &str, opts: &OpenOptions) -> Result<Option<u32>> {
    if opts.prefix.is_some() {
        return Err(Error::config(
            key,
            "`prefix` is a Redis key prefix; the PostgreSQL adapters keep their tables in a \
             schema: name it with `?schema=NAME` on the URL instead",
        ));
    }
    opts.pool_size
        .map(|n| {
            u32::try_from(n).map_err(|_| {
                Error::config(
                    key,
                    format!("`pool_size` {n} is more connections than PostgreSQL can serve"),
                )
            })
        })
        .transpose()
}
