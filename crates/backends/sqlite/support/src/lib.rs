#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod error;
mod location;
mod migrate;
mod open;

pub use error::{error, is_unique_violation};
pub use location::{Create, Location};
pub use migrate::{MIGRATE_ATTEMPTS, migrate, shared_file_migrator};
pub use open::{Database, MAX_BUSY_TIMEOUT, OpenOptions, begin_immediate, open};
pub use switchyard_sqlx_support::{
    EmbeddedMigration, embed_migrations, embedded_migrator, events, unlisted_migrations,
};
