#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod embedded;
pub mod events;

pub use embedded::{EmbeddedMigration, embedded_migrator, unlisted_migrations};
