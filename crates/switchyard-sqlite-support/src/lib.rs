//! # switchyard-sqlite-support
//!
//! Shared plumbing of switchyard's SQLite adapters; not for direct use. Applications open a
//! SQLite adapter (`switchyard-store-sqlite`, the SQLite fleet backend) or the `switchyard`
//! facade; this crate is what those adapters have in common, written once (ADR 0175):
//!
//! * [`Location`]: a database file from a path or a `sqlite://` / `file://` URL, refusing
//!   in-memory databases (each connection would see its own), and the [`Create`] policy for a
//!   missing file;
//! * [`open`]: one writer connection and a read pool on the file, in WAL with
//!   `synchronous=NORMAL` and a busy timeout, each checked after opening because SQLite ignores a
//!   pragma it cannot apply ([`OpenOptions`], [`Database`]);
//! * [`migrate`]: sqlx migrations with the one retry policy for processes migrating a new file
//!   at once (ADR 0176);
//! * [`error`]: sqlx errors as [`switchyard_core::Error`], busy past the timeout being
//!   transient.
//!
//! Its signatures hand sqlx connections to the adapters that run SQL on them; no sqlx type
//! reaches an adapter's own public API.

pub mod error;
mod location;
mod migrate;
mod open;

pub use error::{error, is_unique_violation};
pub use location::{Create, Location};
pub use migrate::{MIGRATE_ATTEMPTS, migrate};
pub use open::{Database, MAX_BUSY_TIMEOUT, OpenOptions, begin_immediate, open};
