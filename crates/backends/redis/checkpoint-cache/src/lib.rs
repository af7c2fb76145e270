#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod cache;
mod keys;

pub use cache::{RedisCheckpointCache, RedisCheckpointCacheOptions, scan_pattern_for_stem};
pub use keys::{CacheKeyLayout, CacheKeyLayoutExt, owner_tag};
