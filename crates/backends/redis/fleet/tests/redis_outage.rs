//! A Redis that is down (its process killed): the fleet's calls fail at once with `Unavailable`
//! naming the server and the refused connection, instead of waiting in fred's reconnect queue for
//! the 10 s command timeout; a reserve blocked when Redis goes away ends the same way; once Redis
//! is back the calls succeed and a blocked reserve is woken by a push again (ADR 0355).

use std::future::Future;
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{RedisCluster, RedisServer, unique_prefix};
use switchyard_core::Error;
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

/// How long a call may take while Redis is known to be down: far under the 10 s command timeout
/// it waited before, with room for a slow machine.
const FAST: Duration = Duration::from_secs(2);
/// How long after a restart the calls must succeed again: fred's reconnect backoff grows to at
/// most a few seconds here, so this leaves room for a slow machine.
const RECOVERY: Duration = Duration::from_secs(20);

/// Runs `call` and checks it fails within [`FAST`] with the circuit's `Unavailable`, whose text
/// contains each of `names`.
async fn fails_fast<T: std::fmt::Debug>(
    what: &str,
    names: &[&str],
    call: impl Future<Output = switchyard_core::Result<T>>,
) {
    let began = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for 30 s"));
    let took = began.elapsed();
    let e = out.expect_err(&format!("{what}: no answer while Redis is down"));
    assert!(matches!(e, Error::Unavailable { .. }), "{what}: {e:?}");
    let text = e.to_string();
    for name in names {
        assert!(text.contains(name), "{what}: {text:?} lacks {name:?}");
    }
    assert!(
        text.contains("retrying in the background"),
        "{what}: {text}"
    );
    assert!(took < FAST, "{what} took {took:?}");
}

/// The three calls a gateway makes most (push, blocking reserve, KV read) while Redis is down.
async fn calls_fail_fast(b: &RedisFleetBackend, names: &[&str]) {
    // The first call may be sent before the client has seen the connection drop: it waits in
    // fred's queue until the reconnect is refused, then ends with the others' error.
    fails_fast(
        "queue_push",
        names,
        b.queue_push("q", br#"{"id": "down"}"#, Priority::Normal),
    )
    .await;
    fails_fast(
        "queue_reserve with a 10 s timeout",
        names,
        b.queue_reserve("q", Duration::from_secs(10), Duration::from_secs(30)),
    )
    .await;
    fails_fast("kv_get", names, b.kv_get("ns", "k")).await;
}

/// After a restart: calls succeed again within [`RECOVERY`], and a blocked reserve is woken by a
/// push.
async fn calls_recover(b: &RedisFleetBackend) {
    let back = Instant::now();
    loop {
        // A KV write and read: each failed attempt's outcome is unknown, and rewriting the same
        // value is harmless.
        let attempt = async {
            b.kv_set("ns", "k", b"back", None).await?;
            b.kv_get("ns", "k").await
        };
        match attempt.await {
            Ok(v) => {
                assert_eq!(v.as_deref(), Some(&b"back"[..]));
                break;
            }
            Err(e) => {
                assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
                assert!(
                    back.elapsed() < RECOVERY,
                    "no call succeeded {:?} after the restart: {e}",
                    back.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let reserver = {
        let b = b.clone();
        tokio::spawn(async move {
            b.queue_reserve("w", Duration::from_secs(10), Duration::from_secs(30))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.queue_push("w", br#"{"id": "after"}"#, Priority::Normal)
        .await
        .expect("queue_push after the restart");
    let got = tokio::time::timeout(Duration::from_secs(8), reserver)
        .await
        .expect("the blocked reserve was not woken by the push")
        .expect("reserver task")
        .expect("queue_reserve after the restart")
        .expect("a delivery");
    assert_eq!(got.body, br#"{"id": "after"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_fails_fleet_calls_at_once_and_they_succeed_after_restart() {
    let mut server = RedisServer::start().expect("redis-server");
    // The default command timeout (10 s): what a call waited for before the circuit.
    let config =
        RedisFleetConfig::new(server.url()).with_prefix(format!("{}:", unique_prefix("down")));
    let b = RedisFleetBackend::with_config(config)
        .await
        .expect("connect");
    b.kv_set("ns", "k", b"before", None).await.expect("kv_set");

    // A reserve blocked on an empty queue when Redis goes away ends with the circuit's error
    // once the reconnect is refused, not when its 10 s timeout runs out.
    let blocked = {
        let b = b.clone();
        tokio::spawn(async move {
            b.queue_reserve("empty", Duration::from_secs(10), Duration::from_secs(30))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    let killed = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), blocked)
        .await
        .expect("the blocked reserve hung")
        .expect("reserver task");
    let took = killed.elapsed();
    let refused = format!("cannot reach Redis at 127.0.0.1:{}", server.port());
    match out {
        Err(e @ Error::Unavailable { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&refused) && text.contains("refused"),
                "{text}"
            );
        }
        other => panic!("the blocked reserve ended with {other:?}"),
    }
    assert!(
        took < FAST,
        "the blocked reserve ended {took:?} after the kill"
    );

    calls_fail_fast(&b, &[&refused, "refused"]).await;

    server.restart().expect("restart");
    calls_recover(&b).await;
    b.close().await;
}

/// The same on a Redis Cluster whose every node is killed: the circuit names the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_cluster_fails_fleet_calls_at_once_and_they_succeed_after_restart() {
    let mut cluster = RedisCluster::start(3, 0).expect("redis cluster");
    let config =
        RedisFleetConfig::new(cluster.url()).with_prefix(format!("{}:", unique_prefix("cdown")));
    let b = RedisFleetBackend::with_config(config)
        .await
        .expect("connect");
    b.kv_set("ns", "k", b"before", None).await.expect("kv_set");
    for node in cluster.nodes() {
        node.kill();
    }
    calls_fail_fast(&b, &["cannot reach the Redis Cluster at", "refused"]).await;

    // Every node back on its data directory: each rejoins with its `nodes.conf`, and the cluster
    // is ok again once all of them are up.
    for node in cluster.nodes() {
        node.restart().expect("restart a node");
    }
    calls_recover(&b).await;
    b.close().await;
}
