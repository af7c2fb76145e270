#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod group;
mod json;
mod key;
mod sql;
mod store;

pub use store::{PostgresEventStore, PostgresLayout, PostgresOptions};
