//! Shared test helpers.
#![allow(dead_code)]

use std::sync::Arc;

use std::time::Duration;
use switchyard_conformance::harness::{redis_url, unique_prefix};

use switchyard_core::Clock;
use switchyard_core::event::{Block, InvocableKind, MessageText, Payload, RunStarted};
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

/// The first seed node of a `redis-cluster://host:port?node=…` URL as a `redis://` URL.
pub fn first_node(cluster_url: &str) -> String {
    let rest = cluster_url
        .split_once("://")
        .map_or(cluster_url, |(_, r)| r);
    let host = rest.split(['?', '/']).next().unwrap_or_default();
    format!("redis://{host}")
}

/// Runs a raw command on a Redis Cluster, following one `MOVED` redirect (the harness's
/// `redis_cmd` speaks to one node). Off the async runtime's threads.
pub async fn cluster_raw(cluster_url: &str, args: &[&str]) -> Result<String, String> {
    let node = first_node(cluster_url);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        match switchyard_conformance::harness::redis_cmd(&node, &refs) {
            Err(e) if e.starts_with("MOVED ") => {
                let addr = e.split_whitespace().nth(2).unwrap_or_default();
                switchyard_conformance::harness::redis_cmd(&format!("redis://{addr}"), &refs)
            }
            other => other,
        }
    })
    .await
    .expect("join")
}

/// `CLUSTER KEYSLOT key`.
pub async fn keyslot(cluster_url: &str, key: &str) -> u16 {
    cluster_raw(cluster_url, &["CLUSTER", "KEYSLOT", key])
        .await
        .expect("CLUSTER KEYSLOT")
        .parse()
        .expect("a slot number")
}

/// A staleness bound no test reaches.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The `run.started` payload of every test run.
pub fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

/// A text delta of message `m`.
pub fn text(t: impl Into<String>) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: t.into(),
    })
}
