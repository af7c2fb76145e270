#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod config;
pub mod limits;
mod open;
#[cfg(feature = "axum")]
pub mod sse;
pub mod url;

pub use config::{Config, Port, Prefixes};
pub use limits::Limits;
pub use open::{
    DEFAULT_MEMORY_CACHE_ENTRIES, Switchyard, open_checkpoint_cache, open_event_store,
    open_event_store_prefixed, open_fleet_backend, open_fleet_backend_prefixed, open_stream_bridge,
    open_stream_bridge_prefixed,
};
pub use url::BackendUrl;

/// The ports, the event model, the errors and the memory adapters (`switchyard-core`).
pub use switchyard_core as core;

/// The SQLite event store (feature `sqlite`).
#[cfg(feature = "sqlite")]
pub use switchyard_store_sqlite as store_sqlite;

/// The Redis event store (feature `redis`).
#[cfg(feature = "redis")]
pub use switchyard_store_redis as store_redis;

/// The Redis Streams stream bridge (feature `redis`).
#[cfg(feature = "redis")]
pub use switchyard_stream_bridge_redis as stream_bridge_redis;

/// The Redis checkpoint cache (feature `redis`).
#[cfg(feature = "redis")]
pub use switchyard_checkpoint_cache_redis as checkpoint_cache_redis;

/// The PostgreSQL event store (feature `postgres`).
#[cfg(feature = "postgres")]
pub use switchyard_store_postgres as store_postgres;

/// The PostgreSQL stream bridge (feature `postgres`).
#[cfg(feature = "postgres")]
pub use switchyard_stream_bridge_postgres as stream_bridge_postgres;

/// The fleet: the typed layer (`switchyard-fleet`) and the fleet backend of each enabled feature
/// (features `sqlite`, `redis` or `postgres`; each pulls only its own backend's crate, ADR 0160).
#[cfg(any(feature = "sqlite", feature = "redis", feature = "postgres"))]
pub mod fleet {
    /// The typed layer: `Queue<T>`, `Consumer`, `Lock`, `Pool`, the worker registry, … over any
    /// `Arc<dyn FleetBackend>` (`switchyard-fleet`).
    pub use switchyard_fleet as typed;

    /// The Redis fleet backend (feature `redis`, `switchyard-fleet-redis`).
    #[cfg(feature = "redis")]
    pub use switchyard_fleet_redis as redis;

    /// The SQLite fleet backend (feature `sqlite`, `switchyard-fleet-sqlite`).
    #[cfg(feature = "sqlite")]
    pub use switchyard_fleet_sqlite as sqlite;

    /// The PostgreSQL fleet backend (feature `postgres`, `switchyard-fleet-postgres`).
    #[cfg(feature = "postgres")]
    pub use switchyard_fleet_postgres as postgres;
}
