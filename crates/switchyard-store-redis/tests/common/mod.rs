//! Shared test helpers.
#![allow(dead_code)]

use std::sync::Arc;

use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::Clock;
use switchyard_store_redis::{RedisEventStore, RedisStoreOptions};

/// A store on the shared harness Redis under a fresh prefix.
pub async fn store(tag: &str, clock: Option<Arc<dyn Clock>>) -> RedisEventStore {
    store_at(&redis_url(), &unique_prefix(tag), clock).await
}

pub async fn store_at(url: &str, prefix: &str, clock: Option<Arc<dyn Clock>>) -> RedisEventStore {
    let mut options = RedisStoreOptions::default().prefix(prefix);
    options.clock = clock;
    RedisEventStore::connect_with(url, options)
        .await
        .expect("connect to the test Redis")
}

/// Runs a raw command on `url` off the async runtime's threads.
pub async fn raw(url: &str, args: &[&str]) -> Result<String, String> {
    let url = url.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        switchyard_conformance::harness::redis_cmd(&url, &refs)
    })
    .await
    .expect("join")
}
