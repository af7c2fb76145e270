#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod backend;
pub mod cache;
pub mod config;
pub mod limits;
mod open;
pub mod options;
#[cfg(feature = "axum")]
pub mod sse;
pub mod url;

pub use cache::{
    CacheSettings, DEFAULT_MEMORY_CACHE_ENTRIES, SerializerChoice, open_history_cache,
};
pub use config::{
    Config, MAX_RESULT_BYTES, MIN_RESULT_BYTES, Port, Prefixes, QueueSettings, WebhookConfig,
};
pub use limits::Limits;
pub use open::{
    Switchyard, open_checkpoint_cache, open_event_store, open_event_store_prefixed,
    open_event_store_with, open_fleet_backend, open_fleet_backend_prefixed,
    open_fleet_backend_with, open_stream_bridge, open_stream_bridge_prefixed,
    open_stream_bridge_with,
};
pub use options::{OpenOptions, PortOptions};
pub use url::BackendUrl;

#[cfg(feature = "redis")]
pub use open::check_server;

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
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> switchyard_kit::core::Result<()> {
/// use std::time::Duration;
/// use switchyard_kit::core::fleet::Priority;
/// use switchyard_kit::fleet::typed::{PushOptions, Queue, Reserved};
///
/// let queue: Queue<String> = Queue::new(switchyard_kit::open_fleet_backend("memory://").await?, "jobs");
/// let opts = PushOptions { priority: Priority::High, ..PushOptions::default() };
/// let id = queue.push_with(&"resize a.png".to_string(), opts).await?;
/// let Some(Reserved::Task(task)) = queue.reserve(Duration::ZERO, Duration::from_secs(30)).await? else {
///     panic!("a task");
/// };
/// assert_eq!((task.id.as_str(), task.payload.as_str()), (id.as_str(), "resize a.png"));
/// assert!(queue.ack(&task.delivery).await?);
/// # Ok(())
/// # }
/// ```
#[cfg(any(feature = "sqlite", feature = "redis", feature = "postgres"))]
pub mod fleet {
    /// The typed layer: `Queue<T>`, `Consumer`, `Lock`, `Pool`, the worker registry, … over any
    /// `Arc<dyn FleetBackend>` (`switchyard-fleet`).
    pub use switchyard_fleet as typed;

    /// The queue features and recurring schedules of the typed layer (ADR 0280, ADR 0300,
    /// ADR 0301), also under [`typed`], with the port types they take.
    pub use switchyard_core::fleet::{InFlight, MAX_BATCH, RateLimit, RunAt, Submit};
    pub use switchyard_fleet::{
        CatchUp, Fired, InFlightTask, ScheduleSpec, Scheduler, SchedulerHandle, SchedulerOptions,
    };

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
