//! Every port opens by URL on every adapter compiled in, and works through `Arc<dyn …>`.

use std::time::Duration;

use serde_json::json;
#[cfg(feature = "sqlite")]
use switchyard_conformance::harness::TempSqlite;
#[cfg(feature = "redis")]
use switchyard_conformance::harness::redis_url;
use switchyard_kit::core::event::{MessageText, Payload};
use switchyard_kit::core::stream::StreamItem;
use switchyard_kit::core::{Error, HistoryEntry, RunContext};
use switchyard_kit::{
    CacheSettings, Config, Switchyard, open_checkpoint_cache, open_event_store, open_fleet_backend,
    open_history_cache, open_stream_bridge,
};

async fn exercise_event_store(url: &str) {
    let store = open_event_store(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let ctx = RunContext::new(format!("run-{}", rand_suffix()));
    let payload = Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: "hi".into(),
    });
    let events = store
        .append(&ctx, vec![payload], "o")
        .await
        .expect("append");
    assert_eq!(events[0].seq, 0);
    assert_eq!(store.read(&ctx, 0, None).await.expect("read"), events);
}

async fn exercise_stream_bridge(url: &str) {
    use futures::StreamExt;
    let bridge = open_stream_bridge(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let run = format!("run-{}", rand_suffix());
    bridge
        .publish(&run, "message", &json!({"n": 1}))
        .await
        .expect("publish");
    bridge.publish_end(&run).await.expect("end");
    let items: Vec<StreamItem> = bridge
        .subscribe(&run, None, Duration::from_secs(5))
        .map(|i| i.expect("item"))
        .collect()
        .await;
    assert!(
        matches!(items.as_slice(), [StreamItem::Event(e), StreamItem::End] if e.data == json!({"n": 1}))
    );
}

async fn exercise_checkpoint_cache(url: &str) {
    let cache = open_history_cache(url, &CacheSettings::default())
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let key = format!("swt:facade:{}", rand_suffix());
    let entry = HistoryEntry::from_json(vec![json!({"k": "v"})], None);
    // Opening never waits for Redis: calls are misses until the connection is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        cache.set_many(vec![(key.clone(), entry.clone())]).await;
        let hits = cache.get_many(std::slice::from_ref(&key)).await;
        if let Some(hit) = hits.get(&key) {
            assert_eq!(hit, &entry);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url}: no hit in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = cache.port().get_many(std::slice::from_ref(&key)).await;
    assert_eq!(
        stored[&key].tag(),
        "msgpack",
        "deer-flow's encoding by default"
    );
}

async fn exercise_fleet(url: &str) {
    let fleet = open_fleet_backend(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let counter = format!("swt-facade-{}", rand_suffix());
    assert_eq!(fleet.counter_incr(&counter, 2).await.expect("incr"), 2);
    assert_eq!(fleet.counter_get(&counter).await.expect("get"), 2);
}

fn rand_suffix() -> String {
    switchyard_conformance::harness::unique_id("x")
}

#[tokio::test]
async fn memory_urls_open_every_port() {
    exercise_event_store("memory://").await;
    exercise_stream_bridge("memory://").await;
    exercise_checkpoint_cache("memory://").await;
    exercise_fleet("memory://").await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_urls_create_the_file() {
    let db = TempSqlite::new();
    assert!(!db.path().exists());
    exercise_event_store(&db.url()).await;
    exercise_fleet(&db.url()).await;
    assert!(db.path().exists(), "sqlite:// creates the file");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlx_form_sqlite_urls_open() {
    let db = TempSqlite::new();
    let url = format!("sqlite:{}", db.path().display());
    exercise_event_store(&url).await;
    exercise_fleet(&url).await;
    assert!(db.path().exists(), "sqlite:PATH creates the file");
}

#[tokio::test]
async fn options_come_from_code_or_the_url() {
    use switchyard_kit::{OpenOptions, open_stream_bridge_with};
    // Retention 1 keeps one event per run: the first is gone when the second is published.
    for (url, options) in [
        ("memory://?retention=1", OpenOptions::default()),
        (
            "memory://?retention=50",
            OpenOptions {
                retention: Some(1),
                ..OpenOptions::default()
            },
        ),
    ] {
        let bridge = open_stream_bridge_with(url, &options)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        bridge.publish("r", "a", &json!(1)).await.expect("publish");
        let last = bridge.publish("r", "b", &json!(2)).await.expect("publish");
        bridge.publish_end("r").await.expect("end");
        use futures::StreamExt;
        let items: Vec<StreamItem> = bridge
            .subscribe("r", None, Duration::from_secs(5))
            .map(|i| i.expect("item"))
            .collect()
            .await;
        assert!(
            matches!(items.as_slice(), [StreamItem::Event(e), StreamItem::End] if e.id == last),
            "{url}: {items:?}"
        );
    }
    let zero = switchyard_kit::open_fleet_backend("memory://?pool_size=0").await;
    assert!(matches!(zero, Err(Error::Config { .. })), "{zero:?}");
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_urls_open_every_port() {
    let url = redis_url();
    exercise_event_store(&url).await;
    exercise_stream_bridge(&url).await;
    exercise_checkpoint_cache(&url).await;
    exercise_fleet(&url).await;
    // The facade's parameters are taken off before the Redis client parses the URL.
    let tuned = format!("{url}?command_timeout_ms=2000&pool_size=2&prefix=sy-test-");
    exercise_event_store(&tuned).await;
    exercise_fleet(&tuned).await;
    let report = switchyard_kit::check_server(&url)
        .await
        .expect("check_server");
    assert!(report.maxmemory_policy.is_some() || !report.issues.is_empty());
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_urls_open_every_port_but_the_cache() {
    use switchyard_conformance::harness::{postgres_url, unique_schema};
    let base = postgres_url();
    for scheme in ["postgres://", "postgresql://"] {
        let url = format!(
            "{scheme}{}?schema={}",
            base.split_once("://").expect("scheme").1,
            unique_schema("kit")
        );
        exercise_event_store(&url).await;
        exercise_stream_bridge(&url).await;
        exercise_fleet(&url).await;
        match open_checkpoint_cache(&url).await {
            Err(Error::Config { reason, .. }) => {
                assert!(reason.contains("no PostgreSQL adapter"), "{reason}")
            }
            other => panic!("the cache has no Postgres adapter: {other:?}"),
        }
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_adapters_take_the_facade_options() {
    use switchyard_conformance::harness::{postgres_exec, postgres_url, unique_schema};
    use switchyard_kit::{OpenOptions, open_event_store_with};
    let schema = unique_schema("kitopts");
    let url = format!("{}?schema={schema}", postgres_url());
    let tuned = format!("{url}&pool_size=2&connect_timeout_ms=5000&command_timeout_ms=300");
    exercise_event_store(&tuned).await;
    exercise_stream_bridge(&tuned).await;
    exercise_fleet(&tuned).await;
    // The command timeout bounds a call that waits on a lock another session holds: it fails
    // as retryable instead of waiting for the lock.
    let store = open_event_store(&tuned).await.expect("open");
    let holder = std::thread::spawn({
        let (url, schema) = (postgres_url(), schema.clone());
        move || {
            postgres_exec(
                &url,
                &format!(
                    "BEGIN; LOCK TABLE {schema}.events IN ACCESS EXCLUSIVE MODE; \
                     SELECT pg_sleep(3); COMMIT;"
                ),
            )
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ctx = RunContext::new(format!("run-{}", rand_suffix()));
    let payload = Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: "hi".into(),
    });
    let started = std::time::Instant::now();
    let blocked = store.append(&ctx, vec![payload], "o").await;
    assert!(
        matches!(blocked, Err(Error::Unavailable { .. })),
        "a locked table within the command timeout: {blocked:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    holder.join().expect("holder thread").expect("lock holder");
    // A key prefix means nothing to PostgreSQL: refused, naming the setting to use.
    let options = OpenOptions {
        prefix: Some("t:".into()),
        ..OpenOptions::default()
    };
    match open_event_store_with(&url, &options).await {
        Err(Error::Config { reason, .. }) => assert!(reason.contains("?schema="), "{reason}"),
        other => panic!("a prefix on PostgreSQL: {other:?}"),
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn embedded_default_needs_no_server() {
    let db = TempSqlite::new();
    let yard = Switchyard::embedded(db.path()).await.expect("embedded");
    assert!(!yard.stream_bridge.supports_cross_process());
    assert!(db.path().exists());
}

/// `queues.max_result_bytes` reaches the SQLite fleet a config opens; the memory fleet, whose
/// limit is fixed, refuses another one rather than ignore it (ADR 0384).
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_configured_result_limit_reaches_the_fleet() {
    let db = TempSqlite::new();
    let mut config = Config {
        sqlite_path: db.path().to_path_buf(),
        ..Config::default()
    };
    let yard = Switchyard::open(&config).await.expect("open");
    assert_eq!(yard.fleet.max_result_bytes(), 1 << 20, "the default");
    config.queues.max_result_bytes = Some(4096);
    let yard = Switchyard::open(&config).await.expect("open");
    assert_eq!(yard.fleet.max_result_bytes(), 4096);
    config.urls.fleet = Some("memory://".into());
    match Switchyard::open(&config).await {
        Err(Error::Config { reason, .. }) => {
            assert!(reason.contains("max_result_bytes"), "{reason}")
        }
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_port_without_an_adapter_for_the_scheme_says_so() {
    for (result, needle) in [
        (
            open_stream_bridge("sqlite://x.db").await.map(|_| ()),
            "no SQLite adapter",
        ),
        (
            open_checkpoint_cache("sqlite://x.db").await.map(|_| ()),
            "no SQLite adapter",
        ),
        (
            open_event_store("ftp://x").await.map(|_| ()),
            "unknown scheme",
        ),
    ] {
        match result {
            Err(Error::Config { reason, .. }) => assert!(reason.contains(needle), "{reason}"),
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}

#[cfg(not(feature = "redis"))]
#[tokio::test]
async fn a_feature_not_compiled_in_says_which_to_enable() {
    match open_event_store("redis://127.0.0.1:6379").await {
        Err(Error::Config { reason, .. }) => {
            assert!(reason.contains("`redis` feature"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn cluster_urls_open_every_port() {
    let url = switchyard_conformance::harness::redis_cluster_url();
    exercise_event_store(&url).await;
    exercise_stream_bridge(&url).await;
    exercise_checkpoint_cache(&url).await;
    exercise_fleet(&url).await;
}

#[tokio::test]
async fn config_from_env_opens_memory_everywhere() {
    let config = Config::default()
        .apply_env(|k| {
            // Every port's own URL; the shared Redis and PostgreSQL ones must name those servers.
            (k.ends_with("_URL") && !k.contains("REDIS") && !k.contains("POSTGRES"))
                .then(|| "memory://".to_string())
        })
        .expect("config");
    let yard = Switchyard::open(&config).await.expect("open");
    assert!(!yard.stream_bridge.supports_cross_process());
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_embedded_file_reopens_after_a_restart() {
    // The event store and the fleet share one file and its migrations table; each must accept
    // the other's migrations when the gateway starts again on the same file.
    let db = TempSqlite::new();
    let first = Switchyard::embedded(db.path()).await.expect("first start");
    let ctx = RunContext::new("r");
    let payload = Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: "kept".into(),
    });
    first
        .event_store
        .append(&ctx, vec![payload], "o")
        .await
        .expect("append");
    drop(first);
    let second = Switchyard::embedded(db.path())
        .await
        .expect("restart on the same file");
    let events = second.event_store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(events.len(), 1);
    let fleet_first = open_fleet_backend(&db.url()).await.expect("fleet reopens");
    drop(fleet_first);
}

/// Every opener's future is `Send` for any lifetime of its URL, so it can be spawned or boxed as
/// `Send` (it was not, once, for the PostgreSQL adapters: a sqlx call whose future is `Send` for
/// one lifetime only). A regression is a compile error here, whichever backends are compiled in.
#[allow(dead_code)]
fn every_opener_is_send(url: &str) {
    fn send<T: Send>(_: T) {}
    send(switchyard_kit::open_event_store(url));
    send(switchyard_kit::open_stream_bridge(url));
    send(switchyard_kit::open_checkpoint_cache(url));
    send(switchyard_kit::open_fleet_backend(url));
}

/// A server that accepts connections and never answers costs the stream bridge its connect
/// timeout, which the URL (or `OpenOptions`) sets: here 300 ms against the 5 s default.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_silent_server_fails_the_stream_bridge_within_its_connect_timeout() {
    use switchyard_kit::{OpenOptions, open_stream_bridge_with};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Accepts every connection and holds it open without a byte in reply.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    for (url, options) in [
        (
            format!("redis://{addr}?connect_timeout_ms=300"),
            OpenOptions::default(),
        ),
        (
            format!("redis://{addr}"),
            OpenOptions {
                connect_timeout_ms: Some(300),
                ..OpenOptions::default()
            },
        ),
    ] {
        let started = std::time::Instant::now();
        let opened = tokio::time::timeout(
            Duration::from_secs(30),
            open_stream_bridge_with(&url, &options),
        )
        .await
        .unwrap_or_else(|_| panic!("{url}: the open hung past 30 s"));
        let took = started.elapsed();
        assert!(opened.is_err(), "{url}: a silent server opened a bridge");
        // Generous: far under the 5 s default, far over the 300 ms asked for.
        assert!(
            took < Duration::from_secs(4),
            "{url}: failed after {took:?}, not within the configured 300 ms"
        );
    }
    silent.abort();
}
