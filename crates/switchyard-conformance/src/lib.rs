#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod checkpoint_cache;
pub mod event_store;
pub mod fleet;
pub mod harness;
pub mod stream_bridge;

#[doc(hidden)]
pub use tokio as __tokio;
