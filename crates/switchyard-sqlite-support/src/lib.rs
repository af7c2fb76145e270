#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod embedded;
pub mod error;
mod location;
mod migrate;
mod open;

pub use embedded::{EmbeddedMigration, embedded_migrator, unlisted_migrations};
pub use error::{error, is_unique_violation};
pub use location::{Create, Location};
pub use migrate::{MIGRATE_ATTEMPTS, migrate};
pub use open::{Database, MAX_BUSY_TIMEOUT, OpenOptions, begin_immediate, open};
