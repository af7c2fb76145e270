//! The cluster layout (ADR 0092) and the pub/sub fan-out (ADR 0093) on the harness Redis Cluster.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchyard_conformance::harness::{redis_cluster_url, redis_cmd, redis_url, unique_prefix};
use switchyard_core::keys::quote;
use switchyard_core::{Error, ItemStream, StreamBridge, StreamItem};
use switchyard_stream_bridge_redis::{KeyLayout, RedisStreamBridge, RedisStreamBridgeConfig};

const HANG: Duration = Duration::from_secs(60);
/// Longer than [`HANG`]: a subscriber re-reads after each heartbeat interval, so with this one a
/// lost wake-up hangs the test instead of being covered by the heartbeat re-read.
const NO_HEARTBEAT: Duration = Duration::from_secs(600);

fn first_node(cluster_url: &str) -> String {
    let rest = cluster_url
        .split_once("://")
        .map_or(cluster_url, |(_, r)| r);
    format!(
        "redis://{}",
        rest.split(['?', '/']).next().unwrap_or_default()
    )
}

/// A raw command on the cluster, following one `MOVED` redirect.
async fn raw(args: &[&str]) -> String {
    let node = first_node(&redis_cluster_url());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = match redis_cmd(&node, &refs) {
            Err(e) if e.starts_with("MOVED ") => {
                let addr = e.split_whitespace().nth(2).unwrap_or_default();
                redis_cmd(&format!("redis://{addr}"), &refs)
            }
            other => other,
        };
        reply.unwrap_or_else(|e| panic!("{refs:?}: {e}"))
    })
    .await
    .expect("join")
}

/// Shard-channel subscribers of `channel` summed over every node of the cluster URL.
async fn shard_subscribers(channel: &str) -> u64 {
    let url = redis_cluster_url();
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let mut nodes = vec![rest.split(['?', '/']).next().unwrap_or_default().to_owned()];
    if let Some((_, query)) = rest.split_once('?') {
        nodes.extend(
            query
                .split('&')
                .filter_map(|kv| kv.strip_prefix("node="))
                .map(str::to_owned),
        );
    }
    let channel = channel.to_owned();
    tokio::task::spawn_blocking(move || {
        nodes
            .iter()
            .map(|node| {
                let reply = redis_cmd(
                    &format!("redis://{node}"),
                    &["PUBSUB", "SHARDNUMSUB", &channel],
                )
                .unwrap_or_default();
                reply
                    .lines()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum()
    })
    .await
    .expect("join")
}

async fn keyslot(key: &str) -> u16 {
    raw(&["CLUSTER", "KEYSLOT", key])
        .await
        .parse()
        .expect("slot")
}

async fn cluster_bridge(maxsize: usize) -> RedisStreamBridge {
    let mut c = RedisStreamBridgeConfig::new(redis_cluster_url());
    c.key_prefix = unique_prefix("rsbc");
    c.queue_maxsize = maxsize;
    RedisStreamBridge::connect(c).await.expect("connect")
}

async fn events_until_end(s: &mut ItemStream) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    loop {
        let item = tokio::time::timeout(HANG, s.next())
            .await
            .expect("subscription hung");
        match item {
            Some(Ok(StreamItem::Event(e))) => out.push((e.event, e.data)),
            Some(Ok(StreamItem::Heartbeat)) => {}
            Some(Ok(StreamItem::End)) | None => return out,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn cluster_layout_exact_key_and_slot() {
    let b = cluster_bridge(4).await;
    let prefix = b
        .stream_key("x")
        .split_once(":{")
        .expect("tagged")
        .0
        .to_owned();
    assert_eq!(b.stream_key("run 1"), format!("{prefix}:{{run:run%201}}"));
    b.publish("run 1", "e", &json!({"a": 1}))
        .await
        .expect("publish");
    let key = format!("{prefix}:{{run:run%201}}");
    assert_eq!(raw(&["TYPE", &key]).await, "stream");
    assert_eq!(keyslot(&key).await, keyslot("run:run%201").await);
    // The entry is the seed's: kind / event / data.
    let entry = raw(&["XRANGE", &key, "-", "+"]).await;
    assert!(
        entry.ends_with("kind\nevent\nevent\ne\ndata\n{\"a\":1}"),
        "{entry}"
    );
}

#[tokio::test]
async fn hostile_run_ids_stay_in_their_slot_and_never_collide() {
    let b = cluster_bridge(16).await;
    let runs = ["{", "}", "}{", "%7B", "{run:}", "run:", "{x}y"];
    let mut keys = BTreeSet::new();
    for (i, run) in runs.iter().enumerate() {
        b.publish(run, "e", &json!(i)).await.expect("publish");
        b.publish_end(run).await.expect("end");
        let key = b.stream_key(run);
        assert!(keys.insert(key.clone()), "{key} collides");
        let tag = format!("run:{}", quote(run));
        assert_eq!(keyslot(&key).await, keyslot(&tag).await, "{key} left {tag}");
        assert_eq!(raw(&["XLEN", &key]).await, "2", "{key}");
    }
    for (i, run) in runs.iter().enumerate() {
        let mut s = b.subscribe(run, None, Duration::from_secs(5));
        let got = events_until_end(&mut s).await;
        assert_eq!(got, vec![("e".to_owned(), json!(i))], "run {run:?}");
    }
    // The empty run id has no key at all: it is refused before Redis.
    let err = b.publish("", "e", &json!(0)).await.expect_err("empty run");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
}

#[tokio::test]
async fn many_live_subscribers_share_one_subscriber_client() {
    let b = cluster_bridge(16).await;
    let n = 200;
    let mut subs = Vec::new();
    for i in 0..n {
        let run = format!("live-{i}");
        subs.push((i, b.subscribe(&run, None, NO_HEARTBEAT)));
    }
    // Every subscriber is parked (polled once into its wait) before anything is published.
    let mut waiting = Vec::new();
    for (i, mut s) in subs {
        let first = tokio::spawn(async move {
            let got = events_until_end(&mut s).await;
            (i, got)
        });
        waiting.push(first);
    }
    let deadline = tokio::time::Instant::now() + HANG;
    while b.watched_keys() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "subscribers never registered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every run's wake channel is subscribed, so what follows is delivered by the SPUBLISH of the
    // publish script (heartbeats are longer than the hang limit).
    for i in 0..n {
        let channel = format!("{}:wake", b.stream_key(&format!("live-{i}")));
        while shard_subscribers(&channel).await == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{channel} never subscribed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for i in 0..n {
        let run = format!("live-{i}");
        b.publish(&run, "e", &json!(i)).await.expect("publish");
        b.publish_end(&run).await.expect("end");
    }
    for task in waiting {
        let (i, got) = task.await.expect("join");
        assert_eq!(got, vec![("e".to_owned(), json!(i))], "subscriber {i}");
    }
    assert_eq!(b.failed_reads(), 0);
}

#[tokio::test]
async fn cluster_layout_works_on_a_standalone_server_and_the_seed_layout_is_refused_on_a_cluster() {
    let mut c = RedisStreamBridgeConfig::new(redis_url());
    c.key_prefix = unique_prefix("rsbc1");
    c.layout = Some(KeyLayout::Cluster);
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let mut s = b.subscribe("r", None, NO_HEARTBEAT);
    let publisher = b.clone();
    let writer = tokio::spawn(async move {
        while publisher.watched_keys() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        publisher
            .publish("r", "e", &json!(1))
            .await
            .expect("publish");
        publisher.publish_end("r").await.expect("end");
    });
    assert_eq!(
        events_until_end(&mut s).await,
        vec![("e".to_owned(), json!(1))]
    );
    writer.await.expect("join");

    let mut c = RedisStreamBridgeConfig::new(redis_cluster_url());
    c.layout = Some(KeyLayout::Seed);
    let err = RedisStreamBridge::connect(c)
        .await
        .expect_err("seed layout on a cluster");
    assert!(matches!(err, Error::Config { .. }), "{err}");
    let mut c = RedisStreamBridgeConfig::new(redis_cluster_url());
    c.key_prefix = "a{b}".into();
    let err = RedisStreamBridge::connect(c)
        .await
        .expect_err("brace in prefix");
    assert!(matches!(err, Error::Config { .. }), "{err}");
}
