//! The cluster key layout of the Redis fleet backend: exact keys (the layout run on the standalone
//! server, so keys can be read by name), every key of an owner in the owner's slot whatever its
//! name (`CLUSTER KEYSLOT`), no collisions, and the cross-slot operations on the real cluster.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde_json::json;
use switchyard_conformance::harness::{
    redis_cluster_url, redis_cmd, redis_url, unique_id, unique_prefix,
};
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{IdempotencyKey, Priority, SubmitOutcome, Tags};
use switchyard_core::keys::quote;
use switchyard_fleet_redis::{FleetKeys, KeyLayout, RedisFleetBackend, RedisFleetConfig};

const LONG: Duration = Duration::from_secs(60);

const HOSTILE: &[&str] = &[
    "orders", "{", "}", "}{", "{x}", "%7B", "%7D", "a:b", "a|b", "a b", "é", "{}", "*",
];

fn cluster_node_url() -> String {
    let url = redis_cluster_url();
    let rest = url.split_once("://").map(|(_, r)| r).expect("scheme");
    format!("redis://{}", rest.split(['?', '/']).next().expect("node"))
}

fn keyslot(key: &str) -> u16 {
    redis_cmd(&cluster_node_url(), &["CLUSTER", "KEYSLOT", key])
        .expect("CLUSTER KEYSLOT")
        .parse()
        .expect("slot")
}

fn cmd(url: &str, args: &[&str]) -> String {
    redis_cmd(url, args).expect("redis command")
}

/// Every key of one owner, per owner kind, for `name` (a queue, pool, lock, stream or type).
fn owned_keys(k: &FleetKeys, name: &str) -> Vec<(String, Vec<String>)> {
    let mut queue = k.queue(name).all();
    queue.push(k.queue_idem(name, "idem:{ns}", "}{"));
    let mut pool = vec![k.pool(name), k.pool_expiry(name)];
    pool.extend(HOSTILE.iter().map(|id| k.pool_claim(name, id)));
    let mut workers = vec![k.workers_of(name)];
    for wid in HOSTILE {
        for field in [
            "hardware",
            "config",
            "gen",
            "stats",
            "state",
            "stats:history",
        ] {
            workers.push(k.worker(name, wid, field));
        }
    }
    vec![
        (format!("q:{}", quote(name)), queue),
        (format!("p:{}", quote(name)), pool),
        (
            format!("l:{}", quote(name)),
            vec![k.lock(name), k.lock_fence(name)],
        ),
        (format!("s:{}", quote(name)), vec![k.stream(name)]),
        (format!("w:{}", quote(name)), workers),
    ]
}

#[test]
fn every_key_of_an_owner_is_in_the_owners_slot_and_names_never_collide() {
    let k = FleetKeys::with_layout("swt:p:", KeyLayout::Cluster).expect("layout");
    let mut seen = HashSet::new();
    let mut slots = BTreeSet::new();
    for name in HOSTILE {
        for (tag, keys) in owned_keys(&k, name) {
            let slot = keyslot(&tag);
            slots.insert(slot);
            for key in keys {
                assert!(key.contains(&format!("{{{tag}}}")), "{key}");
                assert_eq!(keyslot(&key), slot, "{name:?}: {key}");
                assert!(seen.insert(key.clone()), "collision: {key}");
            }
        }
    }
    assert!(slots.len() > 10, "owners spread over slots: {slots:?}");
    // The registry index of all types has its own tag.
    assert_eq!(k.worker_types(), "swt:p:wkrs:{r}:types");
    assert!(!seen.contains(&k.worker_types()));
}

#[test]
fn exact_cluster_keys() {
    let k = FleetKeys::with_layout("P:", KeyLayout::Cluster).expect("layout");
    let q = k.queue("a:b}");
    assert_eq!(q.normal, "P:fleet:queue:{q:a%3Ab%7D}");
    assert_eq!(q.high, "P:fleet:queue:{q:a%3Ab%7D}:high");
    assert_eq!(q.wake, "P:fleet:queue:{q:a%3Ab%7D}:wake");
    assert_eq!(
        k.queue_idem("a:b}", "idem:x", "k"),
        "P:fleet:queue:{q:a%3Ab%7D}:idem:idem%3Ax:k"
    );
    assert_eq!(k.pool("{"), "P:fleet:pool:{p:%7B}");
    assert_eq!(k.pool_claim("{", "}"), "P:fleet:pool:{p:%7B}:claim:%7D");
    assert_eq!(k.lock("x"), "P:fleet:lock:{l:x}");
    assert_eq!(k.lock_fence("x"), "P:fleet:lock:{l:x}:fence");
    assert_eq!(k.stream("s"), "P:stream:{s:s}");
    assert_eq!(k.worker("at", "w:1", "gen"), "P:wkr:{w:at}:w%3A1:gen");
    assert_eq!(k.workers_of("at"), "P:wkrs:{w:at}");
    // Single keys keep the seed's form.
    assert_eq!(k.kv("ns", "k"), "P:fleet:kv:ns:k");
    assert_eq!(k.counter("c"), "P:fleet:counter:c");
    assert_eq!(k.catalog(), "P:fleet:catalog");
    assert_eq!(k.channel("t"), "P:event:t");
    // The seed layout is unchanged.
    let seed = FleetKeys::new("P:");
    assert_eq!(seed.queue("a:b}").normal, "P:fleet:queue:a%3Ab%7D");
    assert_eq!(seed.worker("at", "w", "gen"), "P:wkr:at:w:gen");
    // An empty name still gets a non-empty tag (names are checked non-empty anyway).
    assert_eq!(k.lock(""), "P:fleet:lock:{l:}");
}

#[tokio::test]
async fn a_prefix_with_braces_is_refused_on_the_cluster_layout() {
    for prefix in ["{x}", "a{", "}"] {
        let config = RedisFleetConfig::new(redis_url())
            .with_prefix(prefix)
            .with_layout(KeyLayout::Cluster);
        match RedisFleetBackend::with_config(config).await {
            Err(Error::Config { key, .. }) => assert_eq!(key, "prefix"),
            other => panic!("{prefix}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn cluster_layout_writes_the_tagged_keys() {
    // The cluster layout on the standalone server, so the keys can be read back by name.
    let url = redis_url();
    let p = format!("{}:", unique_prefix("fcl"));
    let b = RedisFleetBackend::with_config(
        RedisFleetConfig::new(&url)
            .with_prefix(&p)
            .with_layout(KeyLayout::Cluster),
    )
    .await
    .expect("connect");
    b.queue_push("q}", b"t1", Priority::High)
        .await
        .expect("push");
    assert_eq!(
        cmd(
            &url,
            &[
                "LRANGE",
                &format!("{p}fleet:queue:{{q:q%7D}}:high"),
                "0",
                "-1"
            ]
        ),
        "t1"
    );
    let d = b
        .queue_reserve("q}", Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("task");
    let deadline = cmd(
        &url,
        &[
            "ZSCORE",
            &format!("{p}fleet:queue:{{q:q%7D}}:processing"),
            d.receipt.as_str(),
        ],
    );
    assert!(!deadline.is_empty());
    b.pool_put("p{", "i}", b"x", &Tags::new(), None)
        .await
        .expect("put");
    let claim = b
        .pool_claim_any("p{", &Tags::new(), LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(
        cmd(
            &url,
            &["GET", &format!("{p}fleet:pool:{{p:p%7B}}:claim:i%7D")]
        ),
        claim.token
    );
    let listed = b.pool_list("p{").await.expect("list");
    assert!(listed[0].in_use_until.is_some());
    assert!(b.pool_remove("p{", "i}").await.expect("remove"));
    assert_eq!(
        cmd(
            &url,
            &["EXISTS", &format!("{p}fleet:pool:{{p:p%7B}}:claim:i%7D")]
        ),
        "0"
    );
    b.worker_register("at{", "w}", &json!({"cpu": 1}))
        .await
        .expect("register");
    assert_eq!(
        cmd(&url, &["GET", &format!("{p}wkr:{{w:at%7B}}:w%7D:gen")]),
        "0"
    );
    assert_eq!(
        cmd(&url, &["SMEMBERS", &format!("{p}wkrs:{{w:at%7B}}")]),
        "w}"
    );
    assert_eq!(
        cmd(&url, &["SMEMBERS", &format!("{p}wkrs:{{r}}:types")]),
        "at%7B"
    );
    // The seed's all-set is not written on the cluster layout.
    assert_eq!(cmd(&url, &["EXISTS", &format!("{p}wkrs:all")]), "0");
    let lock = b
        .lock_acquire("l", LONG, Duration::ZERO)
        .await
        .expect("lock")
        .expect("grant");
    assert_eq!(
        cmd(&url, &["GET", &format!("{p}fleet:lock:{{l:l}}")]),
        lock.token
    );
    assert_eq!(
        cmd(&url, &["GET", &format!("{p}fleet:lock:{{l:l}}:fence")]),
        lock.fence.to_string()
    );
}

#[tokio::test]
async fn cross_slot_operations_on_the_cluster() {
    let b = RedisFleetBackend::with_config(
        RedisFleetConfig::new(redis_cluster_url())
            .with_prefix(format!("{}:", unique_prefix("fclx"))),
    )
    .await
    .expect("connect");
    assert_eq!(b.keys().layout(), KeyLayout::Cluster);

    // Workers of many types (many slots): the registry of all types lists them all.
    let mut want = Vec::new();
    for (i, at) in HOSTILE.iter().enumerate() {
        for wid in ["w1", "}{"] {
            b.worker_register(at, wid, &json!({"i": i}))
                .await
                .expect("register");
            want.push((at.to_string(), wid.to_string()));
        }
    }
    want.sort();
    assert_eq!(b.worker_list(None).await.expect("list"), want);
    assert!(b.worker_remove("{", "w1").await.expect("remove"));
    want.retain(|(at, wid)| !(at == "{" && wid == "w1"));
    assert_eq!(b.worker_list(None).await.expect("list"), want);
    assert_eq!(
        b.worker_list(Some("{")).await.expect("list"),
        vec![("{".to_string(), "}{".to_string())]
    );

    // submit_once: the queue's slot decides, the KV entry (another slot) mirrors it.
    let ns = unique_id("idem{");
    let idem = |value: &'static [u8]| IdempotencyKey {
        ns: &ns,
        key: "k}",
        value,
        ttl: Some(LONG),
    };
    assert_eq!(
        b.queue_submit_once("q1", b"a", Priority::Normal, idem(b"id-a"))
            .await
            .expect("submit"),
        SubmitOutcome::Enqueued
    );
    assert_ne!(
        keyslot(&b.keys().kv(&ns, "k}")),
        keyslot(&b.keys().queue("q1").normal)
    );
    assert_eq!(
        b.kv_get(&ns, "k}").await.expect("kv"),
        Some(b"id-a".to_vec())
    );
    // A KV entry lost between push and mirror is written again by the next duplicate.
    assert!(b.kv_del(&ns, "k}").await.expect("del"));
    assert_eq!(
        b.queue_submit_once("q1", b"b", Priority::Normal, idem(b"id-b"))
            .await
            .expect("submit"),
        SubmitOutcome::Duplicate(b"id-a".to_vec())
    );
    assert_eq!(
        b.kv_get(&ns, "k}").await.expect("kv"),
        Some(b"id-a".to_vec())
    );
    // An existing KV entry is a duplicate for any queue.
    assert_eq!(
        b.queue_submit_once("q2", b"c", Priority::Normal, idem(b"id-c"))
            .await
            .expect("submit"),
        SubmitOutcome::Duplicate(b"id-a".to_vec())
    );
    assert_eq!(b.queue_size("q1").await.expect("size"), 1);
    assert_eq!(b.queue_size("q2").await.expect("size"), 0);

    // A blocked reserve wakes on a push to a queue on another node than the first seed.
    let (b2, q) = (b.clone(), "}wake{".to_string());
    let waiter =
        tokio::spawn(async move { b2.queue_reserve(&q, Duration::from_secs(20), LONG).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.queue_push("}wake{", b"late", Priority::Low)
        .await
        .expect("push");
    let d = waiter.await.expect("join").expect("reserve").expect("task");
    assert_eq!(d.body, b"late");
    b.close().await;
}
