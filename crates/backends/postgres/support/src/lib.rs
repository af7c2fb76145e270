#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod circuit;
pub mod error;
pub mod listen;
pub mod migrate;
mod pool;
mod url;

pub use circuit::Circuit;
pub use error::{error, is_retryable, is_unique_violation, sqlstate};
pub use listen::{Notifications, Signal, Subscription};
pub use migrate::migrate;
pub use pool::{DEFAULT_SCHEMA, PoolOptions, Schema, connect};
pub use switchyard_sqlx_support::{
    EmbeddedMigration, embed_migrations, embedded_migrator, events, unlisted_migrations,
};
pub use url::{PostgresUrl, is_postgres_url, redact};
