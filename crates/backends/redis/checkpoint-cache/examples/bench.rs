//! Throughput of the Redis checkpoint cache against a local redis-server, with the floor of the
//! same server measured in the same run.
//!
//! ```text
//! cargo run --release -p switchyard-checkpoint-cache-redis --example bench
//! ```
//!
//! Uses `REDIS_URL` if set, else starts its own `redis-server` on a free port. Runs ~15 s. Each
//! rate is measured in three 1 s rounds interleaved with the floors, and the best round is
//! reported (the machine is shared, so the best round is the least disturbed one).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::{ClientLike, Expiration, KeysInterface};
use serde_json::json;
use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::cache::{
    EntrySerializer, HistoryCache, HistoryEntry, MsgpackSerializer, make_history_key,
};

const PHASE: Duration = Duration::from_secs(1);
const ROUNDS: usize = 3;

/// A typical small history: three chat messages (~400 bytes encoded).
fn entry(i: usize) -> HistoryEntry {
    HistoryEntry::from_json(
        vec![
            json!({"type": "human", "content": format!("question {i}"), "id": format!("h{i}")}),
            json!({"type": "ai", "content": "an answer of a few dozen characters, like most replies", "id": format!("a{i}")}),
            json!({"type": "tool", "content": "{\"result\": 42}", "tool_call_id": format!("c{i}")}),
        ],
        None,
    )
}

/// Runs `op` repeatedly for `PHASE`; returns calls per second.
async fn rate<F, Fut>(mut op: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < PHASE {
        op().await;
        calls += 1;
    }
    calls as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = redis_url();
    let port = RedisCheckpointCache::connect(&url, RedisCheckpointCacheOptions::default())
        .await
        .expect("connect");
    assert!(port.wait_connected(Duration::from_secs(10)).await);
    // The typed layer with the default (msgpack) serializer, as an application uses the cache.
    let cache = HistoryCache::new(Arc::new(port));
    let p = unique_prefix("bench");

    // Floor: single-connection round trips on a plain fred client.
    let floor =
        fred::prelude::Builder::from_config(fred::prelude::Config::from_url(&url).expect("url"))
            .build()
            .expect("client");
    floor.init().await.expect("connect");
    // Floor for set_many: one pipeline of 100 `SET key value EX 86400` of the same encoded size.
    let typed = MsgpackSerializer.dumps_typed(&entry(0)).expect("encode");
    let mut stored = typed.tag().as_bytes().to_vec();
    stored.push(0);
    stored.extend_from_slice(typed.payload());
    let value = fred::bytes::Bytes::from(stored);
    let floor_keys: Vec<String> = (0..100).map(|i| format!("{p}:floor:{i}")).collect();

    let keys: Vec<String> = (0..100)
        .map(|i| make_history_key(&p, "t-get", "", &format!("c{i}"), "messages"))
        .collect();
    let batch: Vec<(String, HistoryEntry)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), entry(i)))
        .collect();
    cache.set_many(batch.clone()).await;
    assert_eq!(cache.get_many(&keys).await.len(), 100);

    let (mut ping, mut pipelined, mut get, mut set, mut clone) = (0f64, 0f64, 0f64, 0f64, 0f64);
    for _ in 0..ROUNDS {
        ping = ping.max(
            rate(|| async {
                let _: i64 = floor.exists("bench:none").await.expect("EXISTS");
            })
            .await,
        );
        pipelined = pipelined.max(
            rate(|| async {
                let pipe = floor.pipeline();
                for k in &floor_keys {
                    let _: () = pipe
                        .set(
                            k.as_str(),
                            value.clone(),
                            Some(Expiration::EX(86_400)),
                            None,
                            false,
                        )
                        .await
                        .expect("queue");
                }
                let _: Vec<fred::prelude::Value> = pipe.all().await.expect("pipeline");
            })
            .await,
        );
        get = get.max(
            rate(|| async {
                let found = cache.get_many(&keys).await;
                debug_assert_eq!(found.len(), 100);
            })
            .await,
        );
        // set_many takes its entries by value; the clone is part of the measured call, and its
        // own cost is measured next.
        set = set.max(rate(|| async { cache.set_many(batch.clone()).await }).await);
        clone = clone.max(
            rate(|| async {
                std::hint::black_box(batch.clone());
            })
            .await,
        );
    }
    let _: i64 = floor.del(floor_keys.clone()).await.expect("DEL");

    let mut purge = Vec::new();
    for round in 0..3 {
        let thread = format!("t-purge-{round}");
        let keys: Vec<String> = (0..10_000)
            .map(|i| make_history_key(&p, &thread, "", &format!("c{i}"), "messages"))
            .collect();
        for chunk in keys.chunks(1_000) {
            cache
                .set_many(
                    chunk
                        .iter()
                        .enumerate()
                        .map(|(i, k)| (k.clone(), entry(i)))
                        .collect(),
                )
                .await;
        }
        let start = Instant::now();
        cache.delete_thread(&p, &thread).await;
        purge.push(start.elapsed());
        assert!(cache.get_many(&keys[..100]).await.is_empty(), "purged");
    }
    cache.delete_thread(&p, "t-get").await;
    let stats = cache.stats();
    let _ = floor.quit().await;

    println!("| operation | rate | vs floor |");
    println!("|---|---|---|");
    println!("| floor: single-key round trip (EXISTS) | {ping:.0} /s | 1.00 |");
    println!(
        "| get_many(100 keys, all hits) | {get:.0} calls/s = {:.0} keys/s | {:.2} |",
        get * 100.0,
        get / ping
    );
    println!("| floor: pipeline of 100 SET EX (fred, same value size) | {pipelined:.0} /s | |");
    println!(
        "| set_many(100 entries, EX 86400) | {set:.0} calls/s = {:.0} entries/s | {:.2} of pipelined floor |",
        set * 100.0,
        set / pipelined
    );
    for (i, d) in purge.iter().enumerate() {
        println!(
            "| delete_thread(10,000 keys) run {} | {:.1} ms | |",
            i + 1,
            d.as_secs_f64() * 1e3
        );
    }
    println!(
        "(cloning the 100-entry batch alone: {:.0} µs per call)",
        1e6 / clone
    );
    println!("stats: {stats:?}");
}
