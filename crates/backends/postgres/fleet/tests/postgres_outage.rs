//! A PostgreSQL server that is down (stopped): the fleet's calls fail quickly with `Unavailable`
//! naming the server and the refused connection, instead of waiting the pool's 10 s acquire
//! timeout and blaming the pool's size; a reserve waiting when the server goes away ends the
//! same way; once the server is back the calls succeed and a waiting reserve is woken by a push
//! again (ADR 0355).

use std::future::Future;
use std::time::{Duration, Instant};

use switchyard_conformance::harness::PostgresServer;
use switchyard_core::Error;
use switchyard_core::fleet::Priority;
use switchyard_core::fleet::prelude::*;
use switchyard_fleet_postgres::PostgresFleetBackend;

/// How long a call may take while the server is down: the circuit answers after its 0.3 s
/// suspicion delay and one refused connection attempt; a reserve's wait re-checks within 1 s.
/// Far under the 10 s acquire timeout, with room for a slow machine.
const FAST: Duration = Duration::from_secs(2);
/// How long after a restart the calls must succeed again (the circuit retries every 0.5 s).
const RECOVERY: Duration = Duration::from_secs(20);

async fn fails_fast<T: std::fmt::Debug>(
    what: &str,
    refused: &str,
    call: impl Future<Output = switchyard_core::Result<T>>,
) {
    let began = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for 30 s"));
    let took = began.elapsed();
    let e = out.expect_err(&format!("{what}: no answer while the server is down"));
    assert!(matches!(e, Error::Unavailable { .. }), "{what}: {e:?}");
    let text = e.to_string();
    assert!(
        text.contains(refused) && text.contains("refused"),
        "{what}: {text}"
    );
    assert!(took < FAST, "{what} took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_fails_fleet_calls_quickly_and_they_succeed_after_restart() {
    let mut server = PostgresServer::start().expect("postgres");
    let b = PostgresFleetBackend::open(&server.url())
        .await
        .expect("open");
    // Connections in the pool, as on a gateway that has been serving.
    b.kv_set("ns", "k", b"before", None).await.expect("kv_set");
    b.queue_push("q", br#"{"id": "before"}"#, Priority::Normal)
        .await
        .expect("queue_push");
    let refused = format!("cannot reach PostgreSQL at 127.0.0.1:{}", server.port());

    // A reserve waiting on an empty queue when the server goes away.
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.queue_reserve("empty", Duration::from_secs(10), Duration::from_secs(30))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.stop();
    let stopped = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting reserve hung")
        .expect("reserver task");
    let took = stopped.elapsed();
    match out {
        Err(e @ Error::Unavailable { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&refused) && text.contains("refused"),
                "{text}"
            );
        }
        other => panic!("the waiting reserve ended with {other:?}"),
    }
    assert!(
        took < FAST,
        "the waiting reserve ended {took:?} after the stop"
    );

    fails_fast(
        "queue_push",
        &refused,
        b.queue_push("q", br#"{"id": "down"}"#, Priority::Normal),
    )
    .await;
    fails_fast(
        "queue_reserve with a 10 s timeout",
        &refused,
        b.queue_reserve("q", Duration::from_secs(10), Duration::from_secs(30)),
    )
    .await;
    fails_fast("kv_get", &refused, b.kv_get("ns", "k")).await;

    server.restart().expect("restart");
    let back = Instant::now();
    loop {
        match b.kv_get("ns", "k").await {
            Ok(v) => {
                assert_eq!(v.as_deref(), Some(&b"before"[..]), "the data survived");
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
        .expect("the waiting reserve was not woken by the push")
        .expect("reserver task")
        .expect("queue_reserve after the restart")
        .expect("a delivery");
    assert_eq!(got.body, br#"{"id": "after"}"#);
    b.close().await;
}
