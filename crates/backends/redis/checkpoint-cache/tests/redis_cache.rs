//! Redis-specific behaviour: the exact keys and values deer-flow shares with us, TTL, big purges,
//! values that are not entries. Outages and stalls are in `faults.rs`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Warnings, get_raw, set_raw};
use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::{RedisServer, redis_cmd, redis_url, unique_prefix};
use switchyard_core::Error;
use switchyard_core::cache::rmpv::Value;
use switchyard_core::cache::{
    CheckpointCache, HistoryCache, HistoryEntry, TypedPayload, make_history_key,
};

/// Stored values deer-flow wrote through LangGraph's `JsonPlusSerializer` (`tag NUL payload`),
/// copied from switchyard-core's `tests/fixtures/checkpoint_cache/entries.json`.
const DEER_FLOW_VALUES: [(&str, &str); 3] = [
    ("one_write", "6d73677061636b0081a67772697465739101"),
    (
        "null_seed",
        "6d73677061636b0082a677726974657390a473656564c0",
    ),
    (
        "datetime",
        "6d73677061636b0082a677726974657393c7430394a86461746574696d65a86461746574696d65d920323032362d31322d30315431353a30343a30352e3132333435362b30303a3030ad66726f6d69736f666f726d6174c7150193a86461746574696d65a46461746593cd07ea0c01c7180193a86461746574696d65a974696d6564656c746193005a00a473656564c7430394a86461746574696d65a86461746574696d65d920323032362d31322d30315431353a30343a30352e3132333435362b30303a3030ad66726f6d69736f666f726d6174",
    ),
];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn payload(n: i64) -> TypedPayload {
    TypedPayload::new("msgpack", format!("entry {n}").into_bytes()).expect("tag")
}

fn options(ttl_seconds: u64) -> RedisCheckpointCacheOptions {
    RedisCheckpointCacheOptions {
        ttl_seconds,
        call_timeout: Duration::from_secs(5),
        ..RedisCheckpointCacheOptions::default()
    }
}

async fn connect(url: &str, options: RedisCheckpointCacheOptions) -> RedisCheckpointCache {
    let cache = RedisCheckpointCache::connect(url, options)
        .await
        .expect("connect");
    assert!(cache.wait_connected(Duration::from_secs(10)).await);
    cache
}

async fn cache(ttl_seconds: u64) -> RedisCheckpointCache {
    connect(&redis_url(), options(ttl_seconds)).await
}

#[tokio::test]
async fn deer_flows_values_are_read_and_written_back_byte_for_byte_under_raw_thread_ids() {
    let url = redis_url();
    let port: Arc<dyn CheckpointCache> = Arc::new(cache(0).await);
    let typed = HistoryCache::new(port.clone());
    let p = unique_prefix("ckpt");
    for (name, stored) in DEER_FLOW_VALUES {
        let stored = unhex(stored);
        // deer-flow writes the thread id raw, `:` and all.
        let theirs = make_history_key(&p, &format!("t1:{name}"), "", "c1", "messages");
        assert!(theirs.contains(&format!(":t1:{name}:")), "{theirs}");
        set_raw(&url, &theirs, &stored).await;

        // The port hands out the tag and payload as stored, and writes them back identically.
        let found = port.get_many(std::slice::from_ref(&theirs)).await;
        let entry = found.get(&theirs).expect("a hit").clone();
        assert_eq!(entry.tag(), "msgpack");
        assert_eq!(&entry.payload()[..], &stored["msgpack\0".len()..]);
        let copy = format!("{theirs}-copy");
        port.set_many(vec![(copy.clone(), entry)]).await;
        assert_eq!(
            get_raw(&url, &copy).await.as_deref(),
            Some(&stored[..]),
            "{name}"
        );

        // The typed layer decodes it and, encoding it again, writes deer-flow's bytes.
        let decoded = typed.get_many(std::slice::from_ref(&theirs)).await;
        let decoded = decoded.get(&theirs).expect("decodes").clone();
        let ours = make_history_key(&p, &format!("t2:{name}"), "", "c1", "messages");
        typed.set_many(vec![(ours.clone(), decoded)]).await;
        assert_eq!(
            get_raw(&url, &ours).await.as_deref(),
            Some(&stored[..]),
            "{name}"
        );
    }
    let one = typed
        .get_many(&[make_history_key(&p, "t1:one_write", "", "c1", "messages")])
        .await;
    assert_eq!(
        one.into_values().next(),
        Some(HistoryEntry::new(vec![Value::from(1)]))
    );
}

#[tokio::test]
async fn ttl_is_applied_and_ttl_zero_clears_it() {
    let p = unique_prefix("ckpt");
    let k = format!("{p}:t1:k");
    cache(60)
        .await
        .set_many(vec![(k.clone(), payload(1))])
        .await;
    let ttl: i64 = redis_cmd(&redis_url(), &["TTL", &k])
        .expect("TTL")
        .parse()
        .expect("int");
    assert!((1..=60).contains(&ttl), "EX 60 applied, got {ttl}");
    // TTL 0: SET without EX, which also strips the TTL of an earlier write.
    cache(0).await.set_many(vec![(k.clone(), payload(2))]).await;
    assert_eq!(redis_cmd(&redis_url(), &["TTL", &k]).as_deref(), Ok("-1"));
}

#[tokio::test]
async fn purge_of_10000_keys_leaves_the_other_threads_keys() {
    let c = cache(0).await;
    let p = unique_prefix("ckpt");
    let t1: Vec<String> = (0..10_000)
        .map(|i| make_history_key(&p, "t1", "", &format!("c{i}"), "messages"))
        .collect();
    let others: Vec<String> = (0..100)
        .map(|i| {
            let thread = ["t10", "t2", "t1:x", "t1:"][i % 4];
            make_history_key(&p, thread, "", &format!("c{i}"), "m")
        })
        .collect();
    let entries = t1
        .iter()
        .chain(others.iter())
        .enumerate()
        .map(|(i, k)| (k.clone(), payload(i as i64)))
        .collect();
    c.set_many(entries).await;
    assert_eq!(c.get_many(&t1).await.len(), 10_000, "all stored");

    c.delete_thread(&p, "t1").await;

    assert!(c.get_many(&t1).await.is_empty(), "every t1 key purged");
    assert_eq!(
        c.get_many(&others).await.len(),
        100,
        "t10, t2, t1:x and t1: untouched"
    );
    let left = redis_cmd(&redis_url(), &["EXISTS", &t1[0], &t1[9_999]]).expect("EXISTS");
    assert_eq!(left, "0");
}

#[tokio::test]
async fn empty_calls_send_no_commands() {
    let server = RedisServer::start().expect("redis");
    let c = connect(&server.url(), options(0)).await;
    redis_cmd(&server.url(), &["CONFIG", "RESETSTAT"]).expect("RESETSTAT");
    assert!(c.get_many(&[]).await.is_empty());
    c.set_many(Vec::new()).await;
    let stats = redis_cmd(&server.url(), &["INFO", "commandstats"]).expect("INFO");
    assert!(!stats.contains("cmdstat_mget"), "{stats}");
    assert!(!stats.contains("cmdstat_set:"), "{stats}");
    // The counting works: a real call shows up.
    c.get_many(&["k".to_string()]).await;
    let stats = redis_cmd(&server.url(), &["INFO", "commandstats"]).expect("INFO");
    assert!(stats.contains("cmdstat_mget:calls=1,"), "{stats}");
}

#[tokio::test]
async fn values_that_are_not_entries_are_misses_with_one_warning_per_call() {
    let warnings = Warnings::default();
    let _guard = warnings.install();
    let url = redis_url();
    let port: Arc<dyn CheckpointCache> = Arc::new(cache(0).await);
    let p = unique_prefix("ckpt");
    let good = format!("{p}:t1:good");
    port.set_many(vec![(good.clone(), payload(1))]).await;
    // No tag separator, nothing at all, a tag that is not UTF-8.
    let not_entries: [(String, &[u8]); 3] = [
        (format!("{p}:t1:no-nul"), b"msgpack\x81\xa6writes\x90"),
        (format!("{p}:t1:empty"), b""),
        (format!("{p}:t1:bad-tag"), b"\xff\xfe\x00payload"),
    ];
    for (k, v) in &not_entries {
        set_raw(&url, k, v).await;
    }
    let list = format!("{p}:t1:a-list");
    redis_cmd(&url, &["RPUSH", &list, "x"]).expect("RPUSH");
    let mut keys: Vec<String> = not_entries.iter().map(|(k, _)| k.clone()).collect();
    keys.push(good.clone());
    keys.push(list);
    let before = port.stats();
    let found = port.get_many(&keys).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found.get(&good), Some(&payload(1)));
    let after = port.stats();
    // A key of the wrong type: MGET answers nil for it, a plain miss.
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (1, 4)
    );
    let logged = warnings.take();
    assert_eq!(logged.len(), 1, "one warning per call: {logged:?}");
    assert!(logged[0].contains("undecodable"), "{logged:?}");

    // Entries whose payload the serializer cannot read: misses in the typed layer, one warning.
    let typed = HistoryCache::new(port);
    let garbled = [format!("{p}:t1:garbled"), format!("{p}:t1:unknown-tag")];
    set_raw(&url, &garbled[0], b"msgpack\x00\xc1").await;
    set_raw(&url, &garbled[1], b"pickle\x00\x80\x04").await;
    let before = typed.stats();
    assert!(typed.get_many(&garbled).await.is_empty());
    let after = typed.stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (0, 2)
    );
    let logged = warnings.take();
    assert_eq!(logged.len(), 1, "one warning per call: {logged:?}");
}

#[tokio::test]
async fn bad_configuration_is_a_config_error_without_credentials() {
    for url in [
        "nope://user:s3cret@host",
        "redis://user:s3cret@host:notaport",
        "redis-cluster://user:s3cret@host:notaport",
    ] {
        match RedisCheckpointCache::connect(url, options(0)).await {
            Err(Error::Config { key, reason }) => {
                assert_eq!(key, "redis_url");
                assert!(!reason.contains("s3cret"), "{reason}");
            }
            other => panic!("{url}: expected a config error, got {other:?}"),
        }
    }
    for (bad, key) in [
        (
            RedisCheckpointCacheOptions {
                pool_size: 0,
                ..options(0)
            },
            "pool_size",
        ),
        (
            RedisCheckpointCacheOptions {
                call_timeout: Duration::ZERO,
                ..options(0)
            },
            "call_timeout",
        ),
        (
            RedisCheckpointCacheOptions {
                reconnect_interval: Duration::from_millis(10),
                ..options(0)
            },
            "reconnect_interval",
        ),
    ] {
        assert!(
            matches!(
                RedisCheckpointCache::connect(&redis_url(), bad).await,
                Err(Error::Config { key: k, .. }) if k == key
            ),
            "{key}"
        );
    }
}

/// A cache used right after it opens answers like deer-flow's client, which connects on its first
/// command: the first `get_many` waits for the first connection (within the call deadline) and
/// hits, and the first `set_many` is written (ADR 0355). Before, both came within the 50-90 ms
/// the connection takes and were a miss and a dropped write.
#[tokio::test]
async fn a_cache_used_right_after_opening_hits_and_writes() {
    let url = redis_url();
    let p = unique_prefix("ckpt-fresh");
    let stored = format!("{p}:t1:stored");
    set_raw(&url, &stored, b"msgpack\0entry 1").await;

    let reader = RedisCheckpointCache::connect(&url, options(0))
        .await
        .expect("connect");
    let found = reader.get_many(std::slice::from_ref(&stored)).await;
    assert_eq!(
        found.get(&stored).map(|e| e.payload().to_vec()),
        Some(b"entry 1".to_vec()),
        "the first call of a fresh cache is a hit"
    );
    assert_eq!((reader.stats().hits, reader.stats().misses), (1, 0));

    let writer = RedisCheckpointCache::connect(&url, options(0))
        .await
        .expect("connect");
    let written = format!("{p}:t1:written");
    writer.set_many(vec![(written.clone(), payload(2))]).await;
    assert_eq!(
        get_raw(&url, &written).await.as_deref(),
        Some(&b"msgpack\0entry 2"[..]),
        "the first write of a fresh cache is stored (read back by another client)"
    );
}
