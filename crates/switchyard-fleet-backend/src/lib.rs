//! # switchyard-fleet-backend
//!
//! Adapters of [`switchyard_core::fleet::FleetBackend`] and the typed layer users call:
//!
//! * [`redis`]: `RedisFleetBackend`, on the seed's (fleet-framework 0.1.0) key layout, every
//!   multi-step operation one Lua script;
//! * [`sqlite`]: `SqliteFleetBackend`, on the seed's tables, every operation one
//!   `BEGIN IMMEDIATE` transaction or one statement;
//! * [`typed`]: `Queue<T>` with the seed's task envelope, `Consumer`, `Pool`, `Lock`, `Counter`,
//!   `Kv`, `Stream`, `Events`, `WorkerRegistry` and `Catalog`, over any `Arc<dyn FleetBackend>`.

pub mod redis;
pub mod sqlite;
pub mod typed;
