//! # switchyard-fleet-backend
//!
//! Adapters of [`switchyard_core::fleet::FleetBackend`] and the typed layer users call:
//!
//! * [`sqlite`]: `SqliteFleetBackend`, on the seed's (fleet-framework 0.1.0) tables, every
//!   operation one `BEGIN IMMEDIATE` transaction or one statement;
//! * [`typed`]: `Queue<T>` with the seed's task envelope, `Consumer`, `Pool`, `Lock`, `Counter`,
//!   `Kv`, `Stream`, `Events`, `WorkerRegistry` and `Catalog`, over any `Arc<dyn FleetBackend>`.

pub mod sqlite;
pub mod typed;
