//! Failure means a miss, now (ADR 0213): opening never waits for Redis, a call while the
//! connection is down answers at once, a stalled Redis costs one call deadline, and hits return
//! within one reconnect interval of Redis coming back.
//!
//! Times are measured by the test's own clock and asserted only as upper bounds with generous
//! slack (several times the configured value); each bound is well below what the cache did before
//! (5 s to open, 2 s per call, 1.3 to 1.5 s to recover).

mod common;

use std::time::{Duration, Instant};

use common::Warnings;
use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::{RedisServer, redis_cmd, unique_prefix};
use switchyard_core::cache::{CheckpointCache, TypedPayload};

/// A call that "answers at once" returns within this (it waits for no deadline).
const AT_ONCE: Duration = Duration::from_millis(750);
/// Hits must be back this long after Redis is: twice the default reconnect interval (500 ms).
const RECOVERY: Duration = Duration::from_millis(1_000);

fn payload(n: i64) -> TypedPayload {
    TypedPayload::new("msgpack", format!("entry {n}").into_bytes()).expect("tag")
}

/// Default options, but a call deadline so long that only a call answered at once can meet
/// [`AT_ONCE`].
fn patient() -> RedisCheckpointCacheOptions {
    RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        call_timeout: Duration::from_secs(10),
        ..RedisCheckpointCacheOptions::default()
    }
}

async fn timed<T>(what: &str, limit: Duration, call: impl Future<Output = T>) -> T {
    let started = Instant::now();
    // A hang fails the test instead of blocking it.
    let out = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"));
    let took = started.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took <= limit, "{what} took {took:?}, more than {limit:?}");
    out
}

/// Sets and reads one key until it is a hit; fails after [`RECOVERY`] from `since`.
async fn hits_again(c: &RedisCheckpointCache, since: Instant, what: &str) {
    let k = unique_prefix("ckpt-back");
    loop {
        c.set_many(vec![(k.clone(), payload(1))]).await;
        if c.get_many(std::slice::from_ref(&k)).await.len() == 1 {
            eprintln!("{what}: hits {:?} after Redis came back", since.elapsed());
            return;
        }
        let waited = since.elapsed();
        assert!(
            waited <= RECOVERY,
            "{what}: no hit {waited:?} after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn opening_while_redis_is_down_returns_at_once_and_warms_up_when_it_starts() {
    let mut server = RedisServer::start().expect("redis");
    server.kill();
    let c = timed(
        "opening with Redis down",
        AT_ONCE,
        RedisCheckpointCache::connect(&server.url(), patient()),
    )
    .await
    .expect("an unreachable Redis is not an error for a cache");
    assert!(!c.is_connected());
    let k = "k".to_string();
    let found = timed(
        "get_many with Redis down",
        AT_ONCE,
        c.get_many(std::slice::from_ref(&k)),
    )
    .await;
    assert!(found.is_empty());
    timed(
        "set_many with Redis down",
        AT_ONCE,
        c.set_many(vec![(k.clone(), payload(1))]),
    )
    .await;
    timed(
        "delete_thread with Redis down",
        AT_ONCE,
        c.delete_thread("p", "t"),
    )
    .await;
    assert_eq!(c.stats().misses, 1);
    server.restart().expect("restart");
    hits_again(&c, Instant::now(), "a cache opened while Redis was down").await;
}

#[tokio::test]
async fn redis_stopped_mid_run_degrades_at_once_and_recovers_within_the_reconnect_interval() {
    let warnings = Warnings::default();
    let _guard = warnings.install();
    let mut server = RedisServer::start().expect("redis");
    // The default deadline, and one so long that only an answer at once meets AT_ONCE.
    let quick =
        RedisCheckpointCache::connect(&server.url(), RedisCheckpointCacheOptions::default())
            .await
            .expect("connect");
    let slow = RedisCheckpointCache::connect(&server.url(), patient())
        .await
        .expect("connect");
    for c in [&quick, &slow] {
        assert!(c.wait_connected(Duration::from_secs(10)).await);
    }
    let p = unique_prefix("ckpt");
    let keys: Vec<String> = (0..5).map(|i| format!("{p}:t1:{i}")).collect();
    let entries: Vec<(String, TypedPayload)> =
        keys.iter().map(|k| (k.clone(), payload(1))).collect();
    slow.set_many(entries.clone()).await;
    assert_eq!(slow.get_many(&keys).await.len(), 5);
    assert!(warnings.take().is_empty());

    server.kill();
    // The first call after the drop may race the client noticing it: it costs at most the
    // deadline (250 ms by default).
    let found = timed(
        "the first call after the drop",
        AT_ONCE,
        quick.get_many(&keys),
    )
    .await;
    assert!(found.is_empty());
    // Once the drop is noticed, calls answer at once, whatever the deadline.
    let noticed = Instant::now();
    while slow.is_connected() {
        assert!(
            noticed.elapsed() < Duration::from_secs(10),
            "drop never noticed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    warnings.take();
    let before = slow.stats();
    let found = timed("get_many while down", AT_ONCE, slow.get_many(&keys)).await;
    assert!(found.is_empty());
    timed(
        "set_many while down",
        AT_ONCE,
        slow.set_many(entries.clone()),
    )
    .await;
    timed(
        "delete_thread while down",
        AT_ONCE,
        slow.delete_thread(&p, "t1"),
    )
    .await;
    let after = slow.stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (0, 5)
    );
    let logged = warnings.take();
    assert_eq!(logged.len(), 3, "one warning per degraded call: {logged:?}");
    assert!(logged[0].contains("mget failed"), "{logged:?}");
    assert!(logged[1].contains("write failed"), "{logged:?}");
    assert!(logged[2].contains("thread purge failed"), "{logged:?}");

    // Redis comes back (empty: persistence is off). No reconnect by hand.
    server.restart().expect("restart");
    let back = Instant::now();
    hits_again(&quick, back, "default options").await;
    hits_again(&slow, back, "long deadline").await;
}

#[tokio::test]
async fn a_stalled_redis_costs_one_deadline_per_call_and_then_answers_again() {
    let server = RedisServer::start().expect("redis");
    let c = RedisCheckpointCache::connect(&server.url(), RedisCheckpointCacheOptions::default())
        .await
        .expect("connect");
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    let p = unique_prefix("ckpt");
    let k = format!("{p}:t1:k");
    c.set_many(vec![(k.clone(), payload(1))]).await;
    assert_eq!(c.get_many(std::slice::from_ref(&k)).await.len(), 1);

    // Redis holds every command for 1.5 s: the connection is up but nothing answers.
    redis_cmd(&server.url(), &["CLIENT", "PAUSE", "1500", "ALL"]).expect("CLIENT PAUSE");
    let paused = Instant::now();
    let found = timed(
        "get_many on a stalled Redis",
        AT_ONCE,
        c.get_many(std::slice::from_ref(&k)),
    )
    .await;
    assert!(found.is_empty(), "a late answer is a miss");
    timed(
        "set_many on a stalled Redis",
        AT_ONCE,
        c.set_many(vec![(k.clone(), payload(2))]),
    )
    .await;
    assert!(
        paused.elapsed() < Duration::from_millis(1_500),
        "the calls ended while Redis was still paused"
    );
    // Hits come back once the pause is over.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.get_many(std::slice::from_ref(&k)).await.is_empty() {
        assert!(Instant::now() < deadline, "no hit after the pause");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
