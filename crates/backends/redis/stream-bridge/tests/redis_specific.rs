//! Redis-only behaviour: the seed's layout byte for byte, exact trimming, TTL, the cursor table,
//! foreign and wrong-type data, faults on a private server, and scale.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use switchyard_conformance::harness::{
    RedisServer, redis_cmd, redis_url, unique_id, unique_prefix,
};
use switchyard_core::{Error, ItemStream, StreamBridge, StreamGap, StreamItem};
use switchyard_stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};

const HANG: Duration = Duration::from_secs(60);

fn config(url: &str, maxsize: usize) -> RedisStreamBridgeConfig {
    let mut c = RedisStreamBridgeConfig::new(url);
    c.key_prefix = unique_prefix("rsb");
    c.queue_maxsize = maxsize;
    c.readers = 2;
    c
}

async fn bridge(maxsize: usize) -> (RedisStreamBridge, String) {
    let url = redis_url();
    (
        RedisStreamBridge::connect(config(&url, maxsize))
            .await
            .expect("connect"),
        url,
    )
}

fn cmd(url: &str, args: &[&str]) -> String {
    redis_cmd(url, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

async fn next_raw(s: &mut ItemStream) -> Option<switchyard_core::Result<StreamItem>> {
    tokio::time::timeout(HANG, s.next())
        .await
        .expect("subscription hung")
}

async fn next(s: &mut ItemStream) -> Option<StreamItem> {
    loop {
        match next_raw(s).await {
            Some(Ok(StreamItem::Heartbeat)) => continue,
            Some(Ok(i)) => return Some(i),
            Some(Err(e)) => panic!("subscription failed: {e}"),
            None => return None,
        }
    }
}

fn name(i: &StreamItem) -> String {
    match i {
        StreamItem::Event(e) => e.event.clone(),
        StreamItem::End => "END".into(),
        StreamItem::Heartbeat => "HB".into(),
        StreamItem::Gap(_) => "GAP".into(),
    }
}

async fn names_until_end(s: &mut ItemStream) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(i) = next(s).await {
        out.push(name(&i));
        if i.is_terminal() {
            break;
        }
    }
    out
}

#[tokio::test]
async fn layout_is_the_seeds() {
    let url = redis_url();
    let mut c = config(&url, 4);
    let prefix = c.key_prefix.clone();
    c.key_prefix = format!("{prefix}:");
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = "run-1";
    let key = format!("{prefix}:{run}");
    assert_eq!(
        b.stream_key(run),
        key,
        "trailing ':' stripped, run id verbatim"
    );
    let id = b
        .publish(
            run,
            "values",
            &json!({"a": [1, "é"], "b": null, "f": [1e-5, 1e16]}),
        )
        .await
        .expect("publish");
    b.publish_end(run).await.expect("end");
    let raw = cmd(&url, &["XRANGE", &key, "-", "+"]);
    let lines: Vec<&str> = raw.lines().collect();
    assert_eq!(lines[0], id);
    assert_eq!(
        &lines[1..7],
        [
            "kind",
            "event",
            "event",
            "values",
            "data",
            // The seed's compact json.dumps: floats in Python's repr form.
            r#"{"a":[1,"é"],"b":null,"f":[1e-05,1e+16]}"#
        ]
    );
    assert_eq!(&lines[8..], ["kind", "end"]);
    assert_eq!(cmd(&url, &["TYPE", &key]), "stream");
    let default = RedisStreamBridgeConfig::new(&url);
    assert_eq!(default.key_prefix, "deerflow:stream_bridge");
    assert_eq!(default.queue_maxsize, 256);
    assert_eq!(default.stream_ttl, Some(Duration::from_secs(86_400)));
}

#[tokio::test]
async fn maxlen_is_exact_and_end_gets_one_more() {
    let (b, url) = bridge(2).await;
    let run = unique_id("trim");
    for i in 0..6 {
        b.publish(&run, "e", &json!(i)).await.expect("publish");
    }
    assert_eq!(cmd(&url, &["XLEN", &b.stream_key(&run)]), "2");
    b.publish_end(&run).await.expect("end");
    assert_eq!(cmd(&url, &["XLEN", &b.stream_key(&run)]), "3");
}

#[tokio::test]
async fn ttl_is_rolling_disabled_and_reclaims_the_key() {
    let url = redis_url();
    let mut c = config(&url, 4);
    c.stream_ttl = Some(Duration::from_secs(42));
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = unique_id("ttl");
    let key = b.stream_key(&run);
    b.publish(&run, "e", &json!(1)).await.expect("publish");
    let ttl: i64 = cmd(&url, &["TTL", &key]).parse().expect("int");
    assert!((1..=42).contains(&ttl), "{ttl}");
    cmd(&url, &["EXPIRE", &key, "5"]);
    b.publish_end(&run).await.expect("end");
    let ttl: i64 = cmd(&url, &["TTL", &key]).parse().expect("int");
    assert!(ttl > 5, "publish_end refreshes the TTL: {ttl}");

    let mut c = config(&url, 4);
    c.stream_ttl = None;
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    b.publish(&run, "e", &json!(1)).await.expect("publish");
    assert_eq!(cmd(&url, &["TTL", &b.stream_key(&run)]), "-1");

    let mut c = config(&url, 4);
    c.stream_ttl = Some(Duration::from_secs(1));
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    b.publish(&run, "e", &json!(1)).await.expect("publish");
    assert!(b.stream_exists(&run).await.expect("exists"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.stream_exists(&run).await.expect("exists") {
        assert!(Instant::now() < deadline, "TTL never reclaimed the key");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn key_expiring_under_a_subscriber_ends_it() {
    let (b, url) = bridge(4).await;
    let run = unique_id("expire");
    b.publish(&run, "e1", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&run, None, Duration::from_millis(200));
    assert_eq!(next(&mut s).await.map(|i| name(&i)).as_deref(), Some("e1"));
    cmd(&url, &["PEXPIRE", &b.stream_key(&run), "1"]);
    assert_eq!(next(&mut s).await, Some(StreamItem::End));
    assert!(next_raw(&mut s).await.is_none());
}

#[tokio::test]
async fn cursor_table() {
    let (b, url) = bridge(8).await;
    let run = unique_id("cursors");
    let key = b.stream_key(&run);
    // Ids we control: XADD with explicit ids, fields as the seed writes them.
    for id in ["100-0", "100-1", "200-0"] {
        cmd(
            &url,
            &["XADD", &key, id, "kind", "event", "event", id, "data", "1"],
        );
    }
    cmd(&url, &["XADD", &key, "300-0", "kind", "end"]);
    let hb = Duration::from_millis(200);
    let run_with = |cursor: &'static str| b.subscribe(&run, Some(cursor), hb);
    // `123` is `123-0`: below the oldest → gap naming the cursor as given.
    let mut s = run_with("99");
    assert_eq!(
        next(&mut s).await,
        Some(StreamItem::Gap(StreamGap {
            requested: Some("99".into()),
            earliest: "100-0".into(),
            latest: "300-0".into()
        }))
    );
    for c in ["0-0", "0"] {
        let mut s = b.subscribe(&run, Some(c), hb);
        assert!(
            matches!(next(&mut s).await, Some(StreamItem::Gap(_))),
            "{c}"
        );
    }
    // Retained exact id, an id between two entries (XREAD semantics: next greater), the end mark.
    assert_eq!(
        names_until_end(&mut run_with("100-0")).await,
        ["100-1", "200-0", "END"]
    );
    assert_eq!(
        names_until_end(&mut run_with("150-7")).await,
        ["200-0", "END"]
    );
    assert_eq!(names_until_end(&mut run_with("300-0")).await, ["END"]);
    // Beyond the end: waits (heartbeats), as the seed does (reference d.5).
    let mut s = run_with("999-0");
    assert_eq!(
        next_raw(&mut s).await.expect("item").expect("ok"),
        StreamItem::Heartbeat
    );
    // Shaped like an id but rejected by Redis: a typed error, no reset to 0-0.
    let mut s = run_with("99999999999999999999999-0");
    assert!(matches!(
        next_raw(&mut s).await,
        Some(Err(Error::Rejected { .. }))
    ));
    assert!(next_raw(&mut s).await.is_none());
    // Malformed on a finished run: full replay and end.
    assert_eq!(
        names_until_end(&mut run_with("-1")).await,
        ["100-0", "100-1", "200-0", "END"]
    );
}

#[tokio::test]
async fn malformed_cursor_on_empty_stream_waits_for_first_events() {
    let (b, _url) = bridge(8).await;
    let run = unique_id("tail-empty");
    let mut s = b.subscribe(&run, Some("-1"), Duration::from_millis(100));
    assert_eq!(
        next_raw(&mut s).await.expect("item").expect("ok"),
        StreamItem::Heartbeat
    );
    b.publish(&run, "metadata", &json!({}))
        .await
        .expect("publish");
    b.publish_end(&run).await.expect("end");
    assert_eq!(names_until_end(&mut s).await, ["metadata", "END"]);
}

#[tokio::test]
async fn foreign_entries_use_the_documented_fallbacks() {
    let (b, url) = bridge(8).await;
    let run = unique_id("foreign");
    let key = b.stream_key(&run);
    cmd(
        &url,
        &[
            "XADD",
            &key,
            "*",
            "kind",
            "event",
            "event",
            "x",
            "data",
            "{not json",
        ],
    );
    cmd(&url, &["XADD", &key, "*", "data", "[1,2]"]);
    cmd(&url, &["XADD", &key, "*", "other", "field"]);
    cmd(&url, &["XADD", &key, "*", "kind", "end"]);
    let mut s = b.subscribe(&run, None, Duration::from_secs(5));
    let mut got = Vec::new();
    while let Some(i) = next(&mut s).await {
        got.push(match i {
            StreamItem::Event(e) => (e.event, e.data),
            other => (name(&other), json!(null)),
        });
    }
    assert_eq!(
        got,
        [
            ("x".into(), json!("{not json")),
            ("message".into(), json!([1, 2])),
            ("message".into(), json!(null)),
            ("END".into(), json!(null)),
        ]
    );
}

#[tokio::test]
async fn wrong_type_key_is_a_typed_error() {
    let (b, url) = bridge(8).await;
    let run = unique_id("wrongtype");
    cmd(&url, &["SET", &b.stream_key(&run), "not a stream"]);
    assert!(matches!(
        b.publish(&run, "e", &json!(1)).await,
        Err(Error::Rejected { .. })
    ));
    assert!(matches!(
        b.publish_end(&run).await,
        Err(Error::Rejected { .. })
    ));
    let mut s = b.subscribe(&run, None, Duration::from_millis(200));
    assert!(matches!(
        next_raw(&mut s).await,
        Some(Err(Error::Rejected { .. }))
    ));
    assert!(next_raw(&mut s).await.is_none());
    let mut s = b.subscribe(&run, Some("-1"), Duration::from_millis(200));
    assert!(matches!(
        next_raw(&mut s).await,
        Some(Err(Error::Rejected { .. }))
    ));
    // A hash where the stream should be, too.
    let run2 = unique_id("wrongtype-hash");
    cmd(&url, &["HSET", &b.stream_key(&run2), "f", "v"]);
    let mut s = b.subscribe(&run2, Some("1-0"), Duration::from_millis(200));
    assert!(matches!(
        next_raw(&mut s).await,
        Some(Err(Error::Rejected { .. }))
    ));
}

async fn publish_retrying(b: &RedisStreamBridge, run: &str, event: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match b.publish(run, event, &json!(event)).await {
            Ok(id) => return id,
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("publish {event}: {e}"),
        }
    }
}

#[tokio::test]
async fn redis_restart_mid_subscription_resumes_without_loss_or_duplicates() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("server");
    let mut c = config(&server.url(), 16);
    c.command_timeout = Duration::from_secs(1);
    c.reader_block = Duration::from_millis(500);
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = unique_id("restart");
    for e in ["e1", "e2"] {
        b.publish(&run, e, &json!(e)).await.expect("publish");
    }
    let mut s = b.subscribe(&run, None, Duration::from_secs(1));
    assert_eq!(names_until(&mut s, 2).await, ["e1", "e2"]);
    server.kill();
    server.restart().expect("restart");
    for e in ["e3", "e4"] {
        publish_retrying(&b, &run, e).await;
    }
    while b.publish_end(&run).await.is_err() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names_until_end(&mut s).await, ["e3", "e4", "END"]);
}

async fn names_until(s: &mut ItemStream, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(name(&next(s).await.expect("item")));
    }
    out
}

#[tokio::test]
async fn trimmed_during_restart_yields_gap() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("server");
    let mut c = config(&server.url(), 2);
    c.command_timeout = Duration::from_secs(1);
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = unique_id("restart-gap");
    let e1 = b.publish(&run, "e1", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&run, None, Duration::from_secs(1));
    assert_eq!(names_until(&mut s, 1).await, ["e1"]);
    server.kill();
    server.restart().expect("restart");
    for e in ["e2", "e3", "e4"] {
        publish_retrying(&b, &run, e).await;
    }
    match next(&mut s).await {
        Some(StreamItem::Gap(g)) => assert_eq!(g.requested, Some(e1)),
        other => panic!("expected a gap, got {other:?}"),
    }
}

#[tokio::test]
async fn redis_gone_for_good_fails_the_subscription_after_retries() {
    let mut server = RedisServer::start().expect("server");
    let mut c = config(&server.url(), 4);
    c.command_timeout = Duration::from_millis(500);
    c.reader_block = Duration::from_millis(300);
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = unique_id("gone");
    b.publish(&run, "e1", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&run, None, Duration::from_millis(300));
    assert_eq!(names_until(&mut s, 1).await, ["e1"]);
    server.kill();
    loop {
        match next_raw(&mut s).await {
            Some(Ok(StreamItem::Heartbeat)) => continue,
            Some(Err(e)) => {
                assert!(e.is_transient(), "{e}");
                break;
            }
            other => panic!("expected an Unavailable error, got {other:?}"),
        }
    }
    assert!(next_raw(&mut s).await.is_none());
    assert!(matches!(b.publish(&run, "e2", &json!(2)).await, Err(e) if e.is_transient()));
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// 10,000 idle subscribers on distinct runs share at most 8 Redis connections, and still get
/// their events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_subscribers_use_at_most_eight_connections() {
    const N: usize = 10_000;
    let server = RedisServer::start_with(&["--maxclients", "20000"]).expect("server");
    let url = server.url();
    let mut c = config(&url, 16);
    c.readers = 6;
    let b = Arc::new(RedisStreamBridge::connect(c).await.expect("connect"));
    let runs: Vec<String> = (0..N).map(|i| format!("run-{i}")).collect();
    let rss_before = rss_kib();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(N);
    for (i, run) in runs.iter().enumerate() {
        let mut s = b.subscribe(run, None, Duration::from_secs(600));
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            if let Some(Ok(StreamItem::Event(e))) = s.next().await {
                let _ = tx.send((i, e.event));
            }
            drop(s);
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while b.watched_keys() < N {
        assert!(
            Instant::now() < deadline,
            "only {} of {N} subscribers parked",
            b.watched_keys()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let every subscriber finish its first snapshot and park.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = rss_kib();
    let list = cmd(&url, &["CLIENT", "LIST"]);
    let clients = list.lines().count() - 1; // minus our own
    println!(
        "{N} idle subscribers: {clients} Redis connections; RSS +{} KiB (~{} bytes per subscriber)",
        rss_after.saturating_sub(rss_before),
        rss_after.saturating_sub(rss_before) * 1024 / N as u64
    );
    assert!(clients <= 8, "{clients} connections for {N} subscribers");
    // Fan-out still works at this scale: wake 100 of them.
    for i in (0..N).step_by(100) {
        b.publish(&runs[i], &format!("hello-{i}"), &json!(i))
            .await
            .expect("publish");
    }
    let mut woke = Vec::new();
    while woke.len() < N / 100 {
        let (i, event) = tokio::time::timeout(HANG, rx.recv())
            .await
            .expect("wake-up")
            .expect("open");
        assert_eq!(event, format!("hello-{i}"));
        woke.push(i);
    }
    woke.sort_unstable();
    assert_eq!(woke, (0..N).step_by(100).collect::<Vec<_>>());
    b.close().await.expect("close");
    for t in tasks {
        let _ = t.await;
    }
}

/// Subscribers of wrong-type keys fail alone: they never join the shared blocking read, so the
/// other subscribers of that reader see no errors.
#[tokio::test]
async fn wrong_type_keys_do_not_disturb_other_subscribers() {
    let url = redis_url();
    let mut c = config(&url, 8);
    c.readers = 1;
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let good = unique_id("good");
    let mut s = b.subscribe(&good, None, Duration::from_secs(30));
    // Park it: publish nothing yet; poll in the background.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let first = tokio::time::timeout(HANG, s.next()).await.expect("hung");
        let _ = tx.send(first);
    });
    while b.watched_keys() < 1 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..8 {
        let bad = unique_id(&format!("bad{i}"));
        cmd(&url, &["SET", &b.stream_key(&bad), "x"]);
        let mut s = b.subscribe(&bad, None, Duration::from_secs(30));
        assert!(matches!(
            next_raw(&mut s).await,
            Some(Err(Error::Rejected { .. }))
        ));
    }
    assert_eq!(
        b.failed_reads(),
        0,
        "a wrong-type key reached the shared XREAD"
    );
    let id = b.publish(&good, "ok", &json!(1)).await.expect("publish");
    match rx.await.expect("result") {
        Some(Ok(StreamItem::Event(e))) => assert_eq!(e.id, id),
        other => panic!("the good subscriber was disturbed: {other:?}"),
    }
    task.await.expect("join");
}

/// The connect timeout bounds the whole opening, handshake included: a server that accepts and
/// never answers fails `connect` after about `connect_timeout`, not the 5 s default; zero is a
/// configuration error.
#[tokio::test]
async fn a_silent_server_fails_within_the_connect_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut c = config(&format!("redis://{addr}"), 16);
    c.connect_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let opened = tokio::time::timeout(HANG, RedisStreamBridge::connect(c))
        .await
        .expect("connect hung");
    let took = started.elapsed();
    assert!(
        matches!(opened, Err(Error::Unavailable { .. })),
        "{:?}",
        opened.err()
    );
    // Generous bound: far under the 5 s default.
    assert!(took < Duration::from_secs(4), "failed after {took:?}");
    silent.abort();

    let mut zero = config(&redis_url(), 16);
    zero.connect_timeout = Duration::ZERO;
    assert!(matches!(
        RedisStreamBridge::connect(zero).await,
        Err(Error::Config { .. })
    ));
}

/// A reader blocked in `XREAD BLOCK` does not hold `close` (and so a gateway's exit) for the
/// rest of its block: it is unblocked before its connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_does_not_wait_out_a_blocked_read() {
    let url = redis_url();
    let mut c = config(&url, 8);
    c.reader_block = Duration::from_secs(10);
    let b = RedisStreamBridge::connect(c).await.expect("connect");
    let run = unique_id("close-blocked");
    b.publish(&run, "metadata", &json!({}))
        .await
        .expect("publish");
    let mut s = b.subscribe(&run, None, Duration::from_secs(30));
    assert_eq!(
        next(&mut s).await.as_ref().map(name).as_deref(),
        Some("metadata")
    );
    // The subscriber waits for more, so a reader blocks on its stream.
    let waiting = tokio::spawn(async move { while s.next().await.is_some() {} });
    eventually_blocked(&url).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), b.close())
        .await
        .expect("close returned")
        .expect("close");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "close took {:?}",
        started.elapsed()
    );
    waiting.abort();
}

/// Waits until a client of the server at `url` is blocked in `XREAD`.
async fn eventually_blocked(url: &str) {
    for _ in 0..100 {
        if cmd(url, &["CLIENT", "LIST"])
            .lines()
            .any(|c| c.contains("flags=b") && c.contains("cmd=xread"))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no reader blocked in XREAD within 5 s");
}
