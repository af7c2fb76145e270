//! Exact keys and values on Redis: the seed's layout (fleet-framework 0.1.0) plus our extra keys,
//! read back with raw commands; and interop with data the seed wrote.

use std::time::Duration;

use serde_json::json;
use switchyard_conformance::harness::{RedisServer, redis_cmd, redis_url, unique_prefix};
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{Priority, Receipt, Retention, Tags, TaskState, Tasks, WorkerState};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

const LONG: Duration = Duration::from_secs(60);

async fn backend() -> (RedisFleetBackend, String, String) {
    let url = redis_url();
    let prefix = format!("{}:", unique_prefix("layout"));
    let b = RedisFleetBackend::with_config(RedisFleetConfig::new(&url).with_prefix(&prefix))
        .await
        .expect("connect");
    (b, prefix, url)
}

fn cmd(url: &str, args: &[&str]) -> String {
    redis_cmd(url, args).expect("redis command")
}

#[tokio::test]
async fn queue_keys_and_values() {
    let (b, p, url) = backend().await;
    let body = r#"{"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 0, "submitted_at": 1795999426.797343, "ttl_seconds": 60}"#;
    b.queue_push("orders", body.as_bytes(), Priority::High)
        .await
        .expect("push");
    b.queue_push("orders", b"n", Priority::Normal)
        .await
        .expect("push");
    b.queue_push("orders", b"l", Priority::Low)
        .await
        .expect("push");
    assert_eq!(
        cmd(
            &url,
            &["LRANGE", &format!("{p}fleet:queue:orders:high"), "0", "-1"]
        ),
        body
    );
    assert_eq!(
        cmd(
            &url,
            &["LRANGE", &format!("{p}fleet:queue:orders"), "0", "-1"]
        ),
        "n"
    );
    assert_eq!(
        cmd(
            &url,
            &["LRANGE", &format!("{p}fleet:queue:orders:low"), "0", "-1"]
        ),
        "l"
    );

    let d = b
        .queue_reserve("orders", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    let r = d.receipt.as_str();
    assert_eq!(r.len(), 32);
    let deadline: f64 = cmd(
        &url,
        &["ZSCORE", &format!("{p}fleet:queue:orders:processing"), r],
    )
    .parse()
    .expect("deadline is a unix time");
    assert!((deadline - d.visible_until).abs() < 1e-3);
    assert_eq!(
        cmd(
            &url,
            &["HGET", &format!("{p}fleet:queue:orders:processing:body"), r]
        ),
        body
    );
    assert_eq!(
        cmd(
            &url,
            &["HGET", &format!("{p}fleet:queue:orders:processing:meta"), r]
        ),
        // The identity is left out when no attempt count was stored (the sweep derives it from
        // the body; ADR 0141), unless the task has a record: then it names the id, which is how
        // ack, nack, fail, extend and progress find the record (ADR 0380).
        "h|1|i:t-1"
    );
    assert_eq!(
        cmd(&url, &["HLEN", &format!("{p}fleet:queue:orders:attempts")]),
        "0",
        "the count lives in the reservation"
    );

    assert!(
        b.queue_nack("orders", &d.receipt, b"retry", LONG)
            .await
            .expect("nack")
    );
    // A delayed task of the high tier waits in our own set (the seed's form holds the normal
    // tier only; ADR 0286), its member tier + receipt and its body beside it.
    let member = format!("h:{r}");
    assert!(
        !cmd(
            &url,
            &[
                "ZSCORE",
                &format!("{p}fleet:queue:orders:scheduled:own"),
                &member
            ]
        )
        .is_empty()
    );
    assert_eq!(
        cmd(
            &url,
            &["ZCARD", &format!("{p}fleet:queue:orders:scheduled")]
        ),
        "0"
    );
    assert_eq!(
        cmd(
            &url,
            &[
                "HGET",
                &format!("{p}fleet:queue:orders:scheduled:body"),
                &member
            ]
        ),
        "retry"
    );
    assert_eq!(
        cmd(
            &url,
            &["ZCARD", &format!("{p}fleet:queue:orders:processing")]
        ),
        "0"
    );
    assert_eq!(
        cmd(
            &url,
            &["HLEN", &format!("{p}fleet:queue:orders:processing:body")]
        ),
        "0"
    );

    let retry_sha = cmd(
        &url,
        &["EVAL", "return redis.sha1hex(ARGV[1])", "0", "retry"],
    );
    assert_eq!(
        cmd(
            &url,
            &[
                "HGET",
                &format!("{p}fleet:queue:orders:attempts"),
                &format!("s:{retry_sha}")
            ]
        ),
        "1",
        "the nacked copy's count waits for its next delivery"
    );

    let d = b
        .queue_reserve("orders", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert_eq!(d.body, b"n");
    assert!(
        b.queue_fail("orders", &d.receipt, b"n-dead")
            .await
            .expect("fail")
    );
    assert_eq!(
        cmd(
            &url,
            &["LRANGE", &format!("{p}fleet:queue:orders:dead"), "0", "-1"]
        ),
        "n-dead"
    );
    let sha = cmd(&url, &["EVAL", "return redis.sha1hex(ARGV[1])", "0", "n"]);
    assert_eq!(
        cmd(
            &url,
            &[
                "HEXISTS",
                &format!("{p}fleet:queue:orders:attempts"),
                &format!("s:{sha}")
            ]
        ),
        "0"
    );
}

#[tokio::test]
async fn kv_pool_lock_counter_stream_catalog_keys() {
    let (b, p, url) = backend().await;
    b.kv_set("idem:orders", "k 1", b"v", Some(LONG))
        .await
        .expect("kv");
    let k = format!("{p}fleet:kv:idem%3Aorders:k%201");
    assert_eq!(cmd(&url, &["GET", &k]), "v");
    let pttl: i64 = cmd(&url, &["PTTL", &k]).parse().expect("pttl");
    assert!(pttl > 0 && pttl <= 60_000);

    let tags: Tags = json!({"region": "eu", "n": 1})
        .as_object()
        .cloned()
        .expect("object");
    b.pool_put("gpus", "g1", b"payload", &tags, None)
        .await
        .expect("put");
    assert_eq!(
        cmd(&url, &["HGET", &format!("{p}fleet:pool:gpus"), "g1"]),
        r#"{"p": "cGF5bG9hZA==", "t": {"region": "eu", "n": 1}, "x": null}"#
    );
    assert_eq!(
        cmd(
            &url,
            &["ZSCORE", &format!("{p}fleet:pool:gpus:expiry"), "g1"]
        ),
        "-1"
    );
    b.pool_put("gpus", "g:2", b"", &Tags::new(), Some(LONG))
        .await
        .expect("put");
    let raw = cmd(&url, &["HGET", &format!("{p}fleet:pool:gpus"), "g:2"]);
    let doc: serde_json::Value = serde_json::from_str(&raw).expect("json");
    assert!(raw.starts_with(r#"{"p": "", "t": {}, "x": "#), "{raw}");
    assert!(doc["x"].as_f64().expect("x is a unix time") > 1.0e9);
    let c = b
        .pool_claim_any("gpus", &Tags::new(), LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(c.item.id, "g:2", "expiring items first");
    assert_eq!(
        cmd(&url, &["GET", &format!("{p}fleet:pool:gpus:claim:g%3A2")]),
        c.token
    );

    let g = b
        .lock_acquire("jobs", LONG, Duration::ZERO)
        .await
        .expect("lock")
        .expect("free");
    assert_eq!(cmd(&url, &["GET", &format!("{p}fleet:lock:jobs")]), g.token);
    assert_eq!(
        cmd(&url, &["GET", &format!("{p}fleet:lock:jobs:fence")]),
        g.fence.to_string()
    );

    b.counter_incr("done", 5).await.expect("incr");
    assert_eq!(cmd(&url, &["GET", &format!("{p}fleet:counter:done")]), "5");

    b.stream_push(
        "out",
        b"e1",
        1795999426.5,
        50_000,
        Some(Duration::from_secs(3600)),
    )
    .await
    .expect("push");
    assert_eq!(
        cmd(
            &url,
            &["ZRANGE", &format!("{p}stream:out"), "0", "-1", "WITHSCORES"]
        ),
        "e1\n1795999426.5"
    );

    b.catalog_set("scrape", br#"{"name": "scrape"}"#)
        .await
        .expect("catalog");
    assert_eq!(
        cmd(&url, &["HGET", &format!("{p}fleet:catalog"), "scrape"]),
        r#"{"name": "scrape"}"#
    );
}

#[tokio::test]
async fn worker_keys_and_values() {
    let (b, p, url) = backend().await;
    b.worker_register("scrape", "w:1", &json!({"cpu": 4, "gpu": "h\u{e9}"}))
        .await
        .expect("register");
    let w = format!("{p}wkr:scrape:w%3A1");
    assert_eq!(
        cmd(&url, &["GET", &format!("{w}:hardware")]),
        r#"{"cpu": 4, "gpu": "h\u00e9"}"#
    );
    assert_eq!(cmd(&url, &["GET", &format!("{w}:config")]), "{}");
    assert_eq!(cmd(&url, &["GET", &format!("{w}:gen")]), "0");
    assert_eq!(cmd(&url, &["SMEMBERS", &format!("{p}wkrs:scrape")]), "w:1");
    assert_eq!(
        cmd(&url, &["SMEMBERS", &format!("{p}wkrs:all")]),
        "scrape|w%3A1"
    );
    b.worker_set_config("scrape", "w:1", &json!({"slots": 2}), None)
        .await
        .expect("config");
    assert_eq!(
        cmd(&url, &["GET", &format!("{w}:config")]),
        r#"{"slots": 2}"#
    );
    assert_eq!(cmd(&url, &["GET", &format!("{w}:gen")]), "1");
    let st = WorkerState {
        state: "RUNNING",
        last_error: None,
        last_seen: 1795999426.0,
        applied_gen: Some(1),
    };
    b.worker_set_state("scrape", "w:1", st)
        .await
        .expect("state");
    assert_eq!(
        cmd(&url, &["HGETALL", &format!("{w}:state")]),
        "state\nRUNNING\nlast_seen\n1795999426.0\nlast_error\n\napplied_gen\n1"
    );
    b.worker_stats_push("scrape", "w:1", 10.5, &json!({"ok": 1}), 240)
        .await
        .expect("stats");
    assert_eq!(
        cmd(
            &url,
            &[
                "ZRANGE",
                &format!("{w}:stats:history"),
                "0",
                "-1",
                "WITHSCORES"
            ]
        ),
        "{\"ok\": 1}\n10.5"
    );
    assert!(b.worker_remove("scrape", "w:1").await.expect("remove"));
    assert_eq!(
        cmd(
            &url,
            &[
                "EXISTS",
                &format!("{w}:stats:history"),
                &format!("{w}:config"),
                &format!("{w}:state")
            ]
        ),
        "0"
    );
    assert_eq!(
        cmd(&url, &["GET", &format!("{w}:gen")]),
        "1",
        "the generation outlives removal"
    );
    assert_eq!(cmd(&url, &["SCARD", &format!("{p}wkrs:all")]), "0");
}

/// Floats are written as Python's `repr` writes them (`1e-05`, `1e+16`), where Rust's own
/// formatting would write `1e-5` and `1e16`: the `.emit` score, `last_seen`, the stats history
/// score and the documents `json.dumps` would write.
#[tokio::test]
async fn floats_are_spelled_as_python_writes_them() {
    use futures::StreamExt;
    let (b, p, url) = backend().await;
    let mut emits = b.event_subscribe("tiny.emit").await.expect("subscribe");
    b.stream_push("tiny", b"e", 1e-5, 0, None)
        .await
        .expect("push");
    let m = tokio::time::timeout(Duration::from_secs(5), emits.next())
        .await
        .expect("emit within 5 s")
        .expect("stream open");
    assert_eq!(String::from_utf8(m).expect("utf8"), "1e-05");

    b.worker_register("f", "w", &json!({"gpu": 1e16}))
        .await
        .expect("register");
    let w = format!("{p}wkr:f:w");
    assert_eq!(
        cmd(&url, &["GET", &format!("{w}:hardware")]),
        r#"{"gpu": 1e+16}"#
    );
    let st = WorkerState {
        state: "RUNNING",
        last_error: None,
        last_seen: 1e16,
        applied_gen: None,
    };
    b.worker_set_state("f", "w", st).await.expect("state");
    assert_eq!(
        cmd(&url, &["HGET", &format!("{w}:state"), "last_seen"]),
        "1e+16"
    );
    b.worker_stats_push("f", "w", 1e-5, &json!({"load": 0.0001, "tiny": 1e-5}), 240)
        .await
        .expect("stats");
    assert_eq!(
        cmd(&url, &["ZRANGE", &format!("{w}:stats:history"), "0", "-1"]),
        r#"{"load": 0.0001, "tiny": 1e-05}"#
    );
}

#[tokio::test]
async fn reads_what_the_seed_wrote() {
    let (b, p, url) = backend().await;
    // A seed producer RPUSHes directly; a seed nack scheduled the body itself as the member.
    cmd(
        &url,
        &["RPUSH", &format!("{p}fleet:queue:legacy"), r#"{"id": "a"}"#],
    );
    cmd(
        &url,
        &[
            "ZADD",
            &format!("{p}fleet:queue:legacy:scheduled"),
            "1",
            r#"{"id": "b"}"#,
        ],
    );
    let mut got = Vec::new();
    while let Some(d) = b
        .queue_reserve("legacy", Duration::ZERO, LONG)
        .await
        .expect("reserve")
    {
        got.push(String::from_utf8(d.body.clone()).expect("utf8"));
        assert!(b.queue_ack("legacy", &d.receipt).await.expect("ack"));
    }
    assert_eq!(got, [r#"{"id": "a"}"#, r#"{"id": "b"}"#]);

    // A seed reservation (member = task id) that lapsed is swept back like ours.
    cmd(
        &url,
        &[
            "ZADD",
            &format!("{p}fleet:queue:legacy:processing"),
            "1",
            "old",
        ],
    );
    cmd(
        &url,
        &[
            "HSET",
            &format!("{p}fleet:queue:legacy:processing:body"),
            "old",
            r#"{"id": "old"}"#,
        ],
    );
    assert_eq!(b.queue_sweep_expired("legacy").await.expect("sweep"), 1);
    assert_eq!(
        b.queue_peek("legacy", 5).await.expect("peek"),
        vec![br#"{"id": "old"}"#.to_vec()]
    );

    // Seed pool items have no expiry index: the index is rebuilt on first use.
    cmd(
        &url,
        &[
            "HSET",
            &format!("{p}fleet:pool:seeded"),
            "x",
            r#"{"p": "eA==", "t": {"k": "v"}, "x": null}"#,
        ],
    );
    cmd(
        &url,
        &[
            "HSET",
            &format!("{p}fleet:pool:seeded"),
            "y",
            r#"{"p": "eQ==", "t": {"k": "v"}, "x": 4102444800.0}"#,
        ],
    );
    assert_eq!(b.pool_size("seeded").await.expect("size"), 2);
    let want: Tags = json!({"k": "v"}).as_object().cloned().expect("object");
    let c = b
        .pool_claim_any("seeded", &want, LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(
        (c.item.id.as_str(), c.item.payload.as_slice()),
        ("y", &b"y"[..])
    );
    let c = b
        .pool_claim_any("seeded", &want, LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(c.item.id, "x");
}

#[tokio::test]
async fn scripts_reload_after_flush_and_wrong_types_are_rejected() {
    // A private server: SCRIPT FLUSH must not race the other tests of this binary.
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let p = format!("{}:", unique_prefix("layout"));
    let b = RedisFleetBackend::with_config(RedisFleetConfig::new(&url).with_prefix(&p))
        .await
        .expect("connect");
    b.queue_push("q", b"1", Priority::Normal)
        .await
        .expect("push");
    // The queue's functions are a library (ADR 0400), the other scripts scripts of their own:
    // both kinds are loaded again after the server forgot them.
    cmd(&url, &["SCRIPT", "FLUSH"]);
    cmd(&url, &["FUNCTION", "FLUSH"]);
    assert!(!cmd(&url, &["FUNCTION", "LIST"]).contains("switchyard_fleet_queue_"));
    let d = b
        .queue_reserve("q", Duration::ZERO, LONG)
        .await
        .expect("reserve after flush")
        .expect("task");
    assert!(cmd(&url, &["FUNCTION", "LIST"]).contains("switchyard_fleet_queue_"));
    assert!(b.queue_ack("q", &d.receipt).await.expect("ack"));

    cmd(&url, &["SET", &format!("{p}fleet:queue:wrong"), "a string"]);
    let err = b
        .queue_push("wrong", b"x", Priority::Normal)
        .await
        .expect_err("wrong type");
    assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
    cmd(&url, &["RPUSH", &format!("{p}fleet:counter:c"), "x"]);
    let err = b.counter_incr("c", 1).await.expect_err("wrong type");
    assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
    cmd(&url, &["SET", &format!("{p}fleet:counter:text"), "abc"]);
    assert!(matches!(
        b.counter_get("text").await,
        Err(Error::Corrupt { .. })
    ));
    cmd(
        &url,
        &["HSET", &format!("{p}fleet:pool:bad"), "z", "not json"],
    );
    b.pool_put("bad", "ok", b"", &Tags::new(), None)
        .await
        .expect("put");
    let items = b
        .pool_list("bad")
        .await
        .expect("a corrupt item does not hide the others");
    assert_eq!(items.len(), 1);
}

/// A reserve that leaves 32 or more reservations held writes the processing keys wide
/// (ADR 0335): the same members, scores, fields and values as a small one, Redis stores them as
/// a skiplist and hash tables, and the placeholder that made it do so is gone. Fewer held: the
/// keys stay listpacks.
#[tokio::test]
async fn a_big_reserve_writes_the_processing_keys_wide() {
    let (b, p, url) = backend().await;
    let bodies: Vec<Vec<u8>> = (0..40)
        .map(|i| format!(r#"{{"id": "t-{i}"}}"#).into_bytes())
        .collect();
    b.queue_push_many("big", &bodies, Priority::Normal)
        .await
        .expect("push_many");
    let proc_key = format!("{p}fleet:queue:big:processing");
    let body_key = format!("{p}fleet:queue:big:processing:body");
    let meta_key = format!("{p}fleet:queue:big:processing:meta");
    let encodings =
        || [&proc_key, &body_key, &meta_key].map(|k| cmd(&url, &["OBJECT", "ENCODING", k]));

    let mut held = b
        .queue_reserve_many("big", 10, Duration::ZERO, LONG)
        .await
        .expect("reserve_many");
    assert_eq!(held.len(), 10);
    assert_eq!(encodings(), ["listpack", "listpack", "listpack"]);

    // 10 held + 30 reserved now: from 32 on the keys are written wide.
    held.extend(
        b.queue_reserve_many("big", 30, Duration::ZERO, LONG)
            .await
            .expect("reserve_many"),
    );
    assert_eq!(held.len(), 40);
    assert_eq!(encodings(), ["skiplist", "hashtable", "hashtable"]);
    assert_eq!(cmd(&url, &["ZCARD", &proc_key]), "40");
    assert_eq!(cmd(&url, &["HLEN", &body_key]), "40");
    assert_eq!(cmd(&url, &["HLEN", &meta_key]), "40");
    for (i, d) in held.iter().enumerate() {
        let r = d.receipt.as_str();
        assert_eq!(d.body, bodies[i], "served in push order");
        assert_eq!(d.attempt, 1);
        let deadline: f64 = cmd(&url, &["ZSCORE", &proc_key, r])
            .parse()
            .expect("deadline is a unix time");
        assert!((deadline - d.visible_until).abs() < 1e-3);
        assert_eq!(
            cmd(&url, &["HGET", &body_key, r]).as_bytes(),
            &bodies[i][..]
        );
        assert_eq!(
            cmd(&url, &["HGET", &meta_key, r]),
            format!("n|1|i:t-{i}"),
            "a recorded task's delivery names its id (ADR 0380)"
        );
    }

    let receipts: Vec<Receipt> = held.iter().map(|d| d.receipt.clone()).collect();
    let acked = b.queue_ack_many("big", &receipts).await.expect("ack_many");
    assert_eq!(acked, vec![true; 40]);
    for k in [&proc_key, &body_key, &meta_key] {
        assert_eq!(cmd(&url, &["EXISTS", k]), "0", "{k}");
    }
}

/// Pushes that leave 32 or more recorded bodies waiting or running write `task:body` wide
/// (ADR 0392): the same fields and values, stored as a hash table, and the placeholder that
/// made Redis convert it is gone. Fewer: the key stays a listpack.
#[tokio::test]
async fn recorded_bodies_are_written_wide_from_32_on() {
    let (b, p, url) = backend().await;
    let key = format!("{p}fleet:queue:wide:task:body");
    let body = |i: usize| format!(r#"{{"id": "w-{i}"}}"#).into_bytes();
    let first: Vec<Vec<u8>> = (0..20).map(body).collect();
    b.queue_push_many("wide", &first, Priority::Normal)
        .await
        .expect("push_many");
    assert_eq!(cmd(&url, &["OBJECT", "ENCODING", &key]), "listpack");

    // 20 held + 20 pushed now: from 32 on the key is written wide.
    let second: Vec<Vec<u8>> = (20..40).map(body).collect();
    b.queue_push_many("wide", &second, Priority::Normal)
        .await
        .expect("push_many");
    assert_eq!(cmd(&url, &["OBJECT", "ENCODING", &key]), "hashtable");
    assert_eq!(cmd(&url, &["HLEN", &key]), "40");
    for i in 0..40 {
        assert_eq!(
            cmd(&url, &["HGET", &key, &format!("w-{i}")]).as_bytes(),
            &body(i)[..]
        );
    }
}

/// The task keys of ADR 0380 and what they hold, read back raw; bodies without an id write none.
#[tokio::test]
async fn task_keys_and_values() {
    let (b, p, url) = backend().await;
    let base = format!("{p}fleet:queue:jobs");
    let keys = b.keys().queue("jobs");
    let all = keys.all();
    for (i, suffix) in [
        "tasks",
        "task:body",
        "task:result",
        "task:error",
        "task:progress",
        "done:ok",
        "done:bad",
        "done:dead",
        "task:live",
        "events",
        "ends",
        "retention",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(all[15 + i], format!("{base}:{suffix}"), "KEYS[{}]", 16 + i);
    }
    assert_eq!(all.len(), 27);
    assert_eq!(keys.with_op("t")[27], format!("{base}:op:t"));

    // Without ids: no task key is written.
    b.queue_push("jobs", b"plain", Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve("jobs", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    assert!(b.queue_ack("jobs", &d.receipt).await.expect("ack"));
    for k in &all[15..] {
        assert_eq!(cmd(&url, &["EXISTS", k]), "0", "{k}");
    }

    let body = r#"{"id": "a", "max_attempts": 3}"#;
    b.queue_push("jobs", body.as_bytes(), Priority::High)
        .await
        .expect("push");
    let record = cmd(&url, &["HGET", &format!("{base}:tasks"), "a"]);
    let fields: Vec<&str> = record.split('|').collect();
    assert_eq!(fields.len(), 9, "{record}");
    assert_eq!(&fields[..4], ["waiting", "h", "0", "3"]);
    assert!(fields[4].parse::<f64>().is_ok(), "submitted: {record}");
    // No start, no end, no flags, no location beyond its tier.
    assert_eq!(&fields[5..], ["", "", "", ""]);
    assert_eq!(
        cmd(&url, &["HGET", &format!("{base}:task:body"), "a"]),
        body
    );

    let d = b
        .queue_reserve("jobs", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    let record = cmd(&url, &["HGET", &format!("{base}:tasks"), "a"]);
    assert!(record.starts_with("running|h|1|3|"), "{record}");
    assert!(
        record.ends_with(&format!("|||{}", d.receipt.as_str())),
        "{record}"
    );

    assert!(
        b.queue_complete("jobs", &d.receipt, b"42")
            .await
            .expect("complete")
    );
    let record = cmd(&url, &["HGET", &format!("{base}:tasks"), "a"]);
    assert!(record.starts_with("completed|h|1|3|"), "{record}");
    assert_eq!(
        cmd(&url, &["HGET", &format!("{base}:task:result"), "a"]),
        "42"
    );
    assert_eq!(
        cmd(&url, &["HEXISTS", &format!("{base}:task:body"), "a"]),
        "0"
    );
    assert!(!cmd(&url, &["ZSCORE", &format!("{base}:done:ok"), "a"]).is_empty());
    assert_eq!(
        cmd(&url, &["HGET", &format!("{base}:ends"), "completed"]),
        "1"
    );
    assert_eq!(cmd(&url, &["XLEN", &format!("{base}:events")]), "1");
    let event = cmd(&url, &["XRANGE", &format!("{base}:events"), "-", "+"]);
    for part in ["id", "a", "s", "completed", "r", "42", "z", "2"] {
        assert!(event.contains(part), "{event}");
    }
    assert!(b.task_get("jobs", "a").await.expect("get").is_some());

    b.queue_set_retention("jobs", Retention::default())
        .await
        .expect("retention");
    assert_eq!(
        cmd(&url, &["HGET", &format!("{base}:retention"), "ev_n"]),
        "10000"
    );
}

/// What a seed consumer (fleet-framework 0.1.0, which keeps no records) does to our recorded
/// tasks, done here with its raw commands: its reservation is reported `running` and `foreign`,
/// our swept-back reservation `waiting` and `foreign`, and the letters it pops end `failed` at
/// the next `queue_maintain` (ADR 0380, section 7).
#[tokio::test]
async fn seed_moves_are_reported_foreign_and_repaired() {
    let (b, p, url) = backend().await;
    let base = format!("{p}fleet:queue:mixed");
    b.queue_push("mixed", br#"{"id": "s1"}"#, Priority::Normal)
        .await
        .expect("push");
    // The seed reserves it: LPOP, then the id in its processing set.
    assert_eq!(cmd(&url, &["LPOP", &base]), r#"{"id": "s1"}"#);
    cmd(
        &url,
        &["ZADD", &format!("{base}:processing"), "9999999999", "s1"],
    );
    let t = b
        .task_get("mixed", "s1")
        .await
        .expect("get")
        .expect("record");
    assert_eq!((t.state, t.foreign), (TaskState::Running, true));
    cmd(&url, &["ZREM", &format!("{base}:processing"), "s1"]);

    // Our reservation swept back by the seed: gone from processing, back in the tier.
    b.queue_push("mixed", br#"{"id": "s2"}"#, Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve("mixed", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    cmd(
        &url,
        &["ZREM", &format!("{base}:processing"), d.receipt.as_str()],
    );
    cmd(&url, &["RPUSH", &base, r#"{"id": "s2"}"#]);
    let t = b
        .task_get("mixed", "s2")
        .await
        .expect("get")
        .expect("record");
    assert_eq!((t.state, t.foreign), (TaskState::Waiting, true));
    // Our next reserve rewrites the record.
    let d = b
        .queue_reserve("mixed", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    let t = b
        .task_get("mixed", "s2")
        .await
        .expect("get")
        .expect("record");
    assert_eq!((t.state, t.foreign), (TaskState::Running, false));

    // Dead, then the seed pops the letter from the head.
    assert!(
        b.queue_fail("mixed", &d.receipt, br#"{"id": "s2"}"#)
            .await
            .expect("fail")
    );
    assert_eq!(
        b.task_get("mixed", "s2")
            .await
            .expect("get")
            .map(|t| t.state),
        Some(TaskState::Dead)
    );
    assert_eq!(
        cmd(&url, &["LPOP", &format!("{base}:dead")]),
        r#"{"id": "s2"}"#
    );
    assert_eq!(b.queue_maintain("mixed").await.expect("maintain"), 1);
    assert_eq!(
        b.task_get("mixed", "s2")
            .await
            .expect("get")
            .map(|t| t.state),
        Some(TaskState::Failed)
    );
    let stats = b.queue_stats("mixed").await.expect("stats");
    assert_eq!((stats.dead_lettered, stats.failed), (1, 1));
}
