//! # switchyard-fleet-backend
//!
//! Adapters of [`switchyard_core::fleet::FleetBackend`]:
//!
//! * [`redis`]: `RedisFleetBackend`, on the seed's (fleet-framework 0.1.0) key layout, every
//!   multi-step operation one Lua script.
//!
//! The SQLite adapter (`sqlite`) and the typed layer (`typed`: `Queue<T>`, `Consumer`, `Lock`, …)
//! are added next to it.

pub mod redis;
