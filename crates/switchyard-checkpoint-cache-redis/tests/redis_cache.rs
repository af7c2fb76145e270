//! Redis-specific behaviour: exact key and value bytes, TTL, big purges, outages, corrupt values.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::{RedisServer, redis_cmd, redis_url, unique_prefix};
use switchyard_core::cache::{
    CheckpointCache, EntrySerializer, HistoryEntry, TypedPayload, make_history_key,
};
use switchyard_core::{Error, Result};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

fn entry(n: i64) -> HistoryEntry {
    HistoryEntry::new(vec![json!({"n": n})])
}

fn options(ttl_seconds: u64) -> RedisCheckpointCacheOptions {
    RedisCheckpointCacheOptions {
        ttl_seconds,
        ..RedisCheckpointCacheOptions::default()
    }
}

/// Fault-test options: short timeouts so a dead server is noticed quickly.
fn fault_options() -> RedisCheckpointCacheOptions {
    RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        command_timeout: Duration::from_millis(500),
        connect_timeout: Duration::from_millis(500),
        max_reconnect_delay: Duration::from_millis(200),
        ..RedisCheckpointCacheOptions::default()
    }
}

async fn cache(ttl_seconds: u64) -> RedisCheckpointCache {
    RedisCheckpointCache::connect(&redis_url(), options(ttl_seconds))
        .await
        .expect("connect")
}

/// Collects this crate's WARN events (thread-local: the test runtime is current-thread).
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(Registry::default().with(self.clone()))
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN
            && meta
                .target()
                .starts_with("switchyard_checkpoint_cache_redis")
        {
            struct Message(String);
            impl tracing::field::Visit for Message {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0 = format!("{v:?}");
                    }
                }
            }
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().expect("lock").push(m.0);
        }
    }
}

#[tokio::test]
async fn keys_and_values_land_exactly_as_the_seed_writes_them() {
    let c = cache(0).await;
    let p = unique_prefix("ckpt");
    let k = make_history_key(&p, "t1", "", "c1", "messages");
    c.set_many(vec![(k.clone(), HistoryEntry::new(vec![json!("a\u{0}b")]))])
        .await;
    // The key verbatim; the value = tag, NUL, payload.
    let raw = redis_cmd(&redis_url(), &["GET", &k]).expect("GET");
    assert_eq!(raw, "json\u{0}{\"writes\":[\"a\\u0000b\"]}");
    c.set_many(vec![(
        k.clone(),
        HistoryEntry::with_seed(vec![], serde_json::Value::Null),
    )])
    .await;
    assert_eq!(
        redis_cmd(&redis_url(), &["GET", &k]).expect("GET"),
        "json\u{0}{\"writes\":[],\"seed\":null}"
    );
    // A value written by another worker in the same format is a hit.
    let other = format!("{p}:t1:other");
    redis_cmd(
        &redis_url(),
        &[
            "SET",
            &other,
            "json\u{0}{\"writes\": [1, 2], \"seed\": {\"x\": 1}}",
        ],
    )
    .expect("SET");
    let found = c.get_many(std::slice::from_ref(&other)).await;
    assert_eq!(
        found.get(&other),
        Some(&HistoryEntry::with_seed(
            vec![json!(1), json!(2)],
            json!({"x": 1})
        ))
    );
}

/// A serializer whose payload holds NULs: reads must split on the first NUL only.
#[derive(Debug)]
struct NulPayload;

impl EntrySerializer for NulPayload {
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload> {
        let n = entry.writes.len();
        Ok(TypedPayload {
            tag: "nul".into(),
            payload: format!("\u{0}{n}\u{0}").into_bytes(),
        })
    }
    fn loads_typed(&self, tag: &str, payload: &[u8]) -> Result<HistoryEntry> {
        if tag != "nul" {
            return Err(Error::corrupt("entry", format!("tag {tag}")));
        }
        let text = std::str::from_utf8(payload).map_err(|e| Error::corrupt("entry", e))?;
        let n: usize = text
            .trim_matches('\u{0}')
            .parse()
            .map_err(|e| Error::corrupt("entry", e))?;
        Ok(HistoryEntry::new(vec![json!(null); n]))
    }
}

#[tokio::test]
async fn a_custom_serializer_round_trips_with_its_tag_and_nul_payload() {
    let c = RedisCheckpointCache::connect(
        &redis_url(),
        RedisCheckpointCacheOptions {
            ttl_seconds: 0,
            serializer: Arc::new(NulPayload),
            ..RedisCheckpointCacheOptions::default()
        },
    )
    .await
    .expect("connect");
    let p = unique_prefix("ckpt");
    let k = format!("{p}:t1:k");
    let e = HistoryEntry::new(vec![json!(null); 3]);
    c.set_many(vec![(k.clone(), e.clone())]).await;
    assert_eq!(
        redis_cmd(&redis_url(), &["GET", &k]).expect("GET"),
        "nul\u{0}\u{0}3\u{0}"
    );
    assert_eq!(c.get_many(std::slice::from_ref(&k)).await.get(&k), Some(&e));
}

#[tokio::test]
async fn ttl_is_applied_and_ttl_zero_clears_it() {
    let p = unique_prefix("ckpt");
    let k = format!("{p}:t1:k");
    cache(60).await.set_many(vec![(k.clone(), entry(1))]).await;
    let ttl: i64 = redis_cmd(&redis_url(), &["TTL", &k])
        .expect("TTL")
        .parse()
        .expect("int");
    assert!((1..=60).contains(&ttl), "EX 60 applied, got {ttl}");
    // TTL 0: SET without EX, which also strips the TTL of an earlier write.
    cache(0).await.set_many(vec![(k.clone(), entry(2))]).await;
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
            make_history_key(
                &p,
                if i % 2 == 0 { "t10" } else { "t2" },
                "",
                &format!("c{i}"),
                "m",
            )
        })
        .collect();
    let entries = t1
        .iter()
        .chain(others.iter())
        .enumerate()
        .map(|(i, k)| (k.clone(), entry(i as i64)))
        .collect();
    c.set_many(entries).await;
    assert_eq!(c.get_many(&t1).await.len(), 10_000, "all stored");

    c.delete_thread(&p, "t1").await;

    assert!(c.get_many(&t1).await.is_empty(), "every t1 key purged");
    assert_eq!(c.get_many(&others).await.len(), 100, "t10 and t2 untouched");
    let left = redis_cmd(&redis_url(), &["EXISTS", &t1[0], &t1[9_999]]).expect("EXISTS");
    assert_eq!(left, "0");
}

#[tokio::test]
async fn empty_calls_send_no_commands() {
    let server = RedisServer::start().expect("redis");
    let c = RedisCheckpointCache::connect(&server.url(), options(0))
        .await
        .expect("connect");
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
async fn redis_stopped_mid_run_degrades_to_misses_and_recovers_on_its_own() {
    let warnings = Warnings::default();
    let _guard = warnings.install();
    let mut server = RedisServer::start().expect("redis");
    let c = RedisCheckpointCache::connect(&server.url(), fault_options())
        .await
        .expect("connect");
    let p = unique_prefix("ckpt");
    let keys: Vec<String> = (0..5).map(|i| format!("{p}:t1:{i}")).collect();
    let entries: Vec<(String, HistoryEntry)> = keys.iter().map(|k| (k.clone(), entry(1))).collect();
    c.set_many(entries.clone()).await;
    assert_eq!(c.get_many(&keys).await.len(), 5);
    assert!(warnings.take().is_empty());

    server.kill();
    let before = c.stats();
    let guard = Duration::from_secs(30); // a hang fails the test instead of blocking it
    let found = tokio::time::timeout(guard, c.get_many(&keys))
        .await
        .expect("get_many returns");
    assert!(found.is_empty());
    tokio::time::timeout(guard, c.set_many(entries.clone()))
        .await
        .expect("set_many returns");
    tokio::time::timeout(guard, c.delete_thread(&p, "t1"))
        .await
        .expect("delete_thread returns");
    let found = tokio::time::timeout(guard, c.get_many(&keys))
        .await
        .expect("get_many returns");
    assert!(found.is_empty());
    let after = c.stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (0, 10)
    );
    let logged = warnings.take();
    assert_eq!(
        logged.len(),
        4,
        "one warning per degraded call, not per key: {logged:?}"
    );
    assert!(logged[0].contains("mget failed"), "{logged:?}");
    assert!(logged[1].contains("write failed"), "{logged:?}");
    assert!(logged[2].contains("thread purge failed"), "{logged:?}");

    // Redis comes back (empty: persistence is off). No reconnect by hand: calls just work again.
    server.restart().expect("restart");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.set_many(entries.clone()).await;
        if c.get_many(&keys).await.len() == 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no hits 20 s after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_cache_built_while_redis_is_down_warms_up_when_it_starts() {
    let mut server = RedisServer::start().expect("redis");
    server.kill();
    let c = RedisCheckpointCache::connect(&server.url(), fault_options())
        .await
        .expect("an unreachable Redis is not an error for a cache");
    let k = "k".to_string();
    assert!(c.get_many(std::slice::from_ref(&k)).await.is_empty());
    assert_eq!(c.stats().misses, 1);
    server.restart().expect("restart");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.set_many(vec![(k.clone(), entry(1))]).await;
        if !c.get_many(std::slice::from_ref(&k)).await.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no hits 20 s after Redis started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn corrupt_values_are_misses_with_one_warning() {
    let warnings = Warnings::default();
    let _guard = warnings.install();
    let c = cache(0).await;
    let p = unique_prefix("ckpt");
    let good = format!("{p}:t1:good");
    c.set_many(vec![(good.clone(), entry(1))]).await;
    let bad = [
        (format!("{p}:t1:no-nul"), "json{\"writes\":[]}"),
        (format!("{p}:t1:msgpack"), "msgpack\u{0}\u{81}"),
        (format!("{p}:t1:bad-json"), "json\u{0}{\"writes\": 3}"),
        (format!("{p}:t1:empty"), ""),
    ];
    for (k, v) in &bad {
        redis_cmd(&redis_url(), &["SET", k, v]).expect("SET");
    }
    let list = format!("{p}:t1:a-list");
    redis_cmd(&redis_url(), &["RPUSH", &list, "x"]).expect("RPUSH");
    let mut keys: Vec<String> = bad.iter().map(|(k, _)| k.clone()).collect();
    keys.push(good.clone());
    let before = c.stats();
    let found = c.get_many(&keys).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found.get(&good), Some(&entry(1)));
    let after = c.stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (1, 4)
    );
    let logged = warnings.take();
    assert_eq!(logged.len(), 1, "one warning per call: {logged:?}");
    assert!(logged[0].contains("undecodable"), "{logged:?}");
    // A key of the wrong type: MGET answers nil for it, a plain miss.
    assert!(c.get_many(&[list]).await.is_empty());
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
    let zero_pool = RedisCheckpointCacheOptions {
        pool_size: 0,
        ..options(0)
    };
    assert!(matches!(
        RedisCheckpointCache::connect(&redis_url(), zero_pool).await,
        Err(Error::Config { .. })
    ));
}
