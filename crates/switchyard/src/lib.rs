//! # switchyard
//!
//! The persistence and coordination layer for agent platforms and worker fleets. Four ports, each
//! with interchangeable adapters chosen by URL at run time:
//!
//! | port | what it does | `memory://` | `sqlite://PATH` | `redis://` |
//! |---|---|---|---|---|
//! | [`EventStore`](core::EventStore) | run log, session claims, folded status | ✓ | ✓ (feature `sqlite`) | ✓ (feature `redis`) |
//! | [`StreamBridge`](core::StreamBridge) | live run streams for SSE, `Last-Event-ID` replay | ✓ | – | ✓ (feature `redis`) |
//! | [`CheckpointCache`](core::CheckpointCache) | shared cache, failures degrade to misses | ✓ | – | ✓ (feature `redis`) |
//! | [`FleetBackend`](core::FleetBackend) | KV, pools, locks, counters, job queue, registry | ✓ | ✓ (feature `sqlite`) | ✓ (feature `redis`) |
//!
//! Features: `sqlite` (default), `redis`, `axum` (SSE responses), `full` (all three).
//!
//! ## Open a port by URL
//!
//! Every opener returns the port as `Arc<dyn …>`, so the rest of a program does not care which
//! backend runs underneath.
//!
//! ```
//! use switchyard::core::event::{Block, InvocableKind, RunStarted};
//! use switchyard::core::{RunContext, RunStatus};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> switchyard::core::Result<()> {
//! let store = switchyard::open_event_store("memory://").await?;
//! let ctx = RunContext::new("run-1").with_session("session-1");
//! let opening = RunStarted {
//!     invocable: "helper".into(),
//!     kind_of_invocable: InvocableKind::Agent,
//!     input: vec![Block::text("hello")],
//! };
//! let (claim, started) = store
//!     .claim_start(ctx.log_key(), opening, &ctx, "helper", Duration::from_secs(3600))
//!     .await?;
//! assert!(claim.won());
//! assert_eq!(started.map(|e| e.seq), Some(0));
//! assert_eq!(store.run_status(ctx.log_key(), "run-1", &ctx).await?, RunStatus::Running);
//! # Ok(())
//! # }
//! ```
//!
//! With the `sqlite` feature, `sqlite://PATH` opens (and creates) a file that a Python agentdeck
//! process can share:
//!
//! ```
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> switchyard::core::Result<()> {
//! # let dir = tempfile::tempdir().expect("tempdir");
//! let url = format!("sqlite://{}", dir.path().join("runs.db").display());
//! let store = switchyard::open_event_store(&url).await?;
//! # let _ = store;
//! # Ok(())
//! # }
//! ```
//!
//! ## Configure a whole deployment
//!
//! [`Config`] reads a TOML file and `SWITCHYARD_…` variables; [`Switchyard::open`] opens all four
//! ports. With nothing configured it is the embedded default: one SQLite file for the event store
//! and the fleet, the memory bridge and cache. One `redis` URL moves everything to Redis.
//!
//! ```
//! use switchyard::{Config, Port, BackendUrl};
//!
//! let config = Config::from_toml_str("redis = \"redis://127.0.0.1:6379\"", "inline")?
//!     .apply_env(|name| std::env::var(name).ok())?;
//! assert!(matches!(config.url_for(Port::Fleet)?, BackendUrl::Redis { .. }));
//! # Ok::<(), switchyard::core::Error>(())
//! ```
//!
//! Bad values are one [`Config`](core::Error::Config) error each, naming the setting and what to do:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let err = switchyard::open_event_store("postgres://db").await.unwrap_err();
//! assert!(err.to_string().contains("unknown scheme"));
//! # }
//! ```
//!
//! ## Stream a run over SSE (feature `axum`)
//!
//! [`sse::sse_response`] turns a bridge subscription into a `text/event-stream` response that
//! honours `Last-Event-ID`, sends heartbeats as comments and ends with the end or gap frame.

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

/// The fleet: the typed layer (`switchyard-fleet`) and the fleet backend of each enabled feature
/// (features `sqlite` or `redis`; each pulls only its own backend's crate, ADR 0160).
#[cfg(any(feature = "sqlite", feature = "redis"))]
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
}
