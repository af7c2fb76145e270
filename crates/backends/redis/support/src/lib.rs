#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod circuit;
pub mod connect;
pub mod error;
pub mod keys;
pub mod scan;
pub mod script;
pub mod url;

pub use circuit::{Circuit, Reachability};
pub use connect::{ConnectionPolicy, Reconnect};
pub use error::classify;
pub use keys::KeyLayout;
pub use script::{LuaLibrary, LuaScript};
pub use url::{RedisUrl, Topology, redact};
