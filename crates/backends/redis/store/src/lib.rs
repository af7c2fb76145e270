#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod config;
mod keys;
mod server;
mod store;

#[doc(hidden)]
pub use config::BeforeExecHook;
pub use config::{Reconnect, RedisStoreOptions};
pub use keys::{DEFAULT_PREFIX, KeyLayout, KeySpace};
pub use server::{ServerIssue, ServerReport};
pub use store::RedisEventStore;
