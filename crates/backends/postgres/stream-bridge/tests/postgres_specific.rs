//! What the suite cannot see: two bridges (two gateways) on one database, the number of
//! connections behind many subscribers, a killed LISTEN connection, the retention sweep.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchyard_conformance::harness::{
    fresh_database, postgres_query, postgres_url, unique_id, unique_schema,
};
use switchyard_core::{ItemStream, StreamBridge, StreamItem};
use switchyard_stream_bridge_postgres::{PostgresStreamBridge, PostgresStreamBridgeConfig};

const BEAT: Duration = Duration::from_secs(30);

async fn bridge(url: &str, schema: &str) -> PostgresStreamBridge {
    let mut config = PostgresStreamBridgeConfig::new(url);
    config.schema = Some(schema.to_string());
    config.max_connections = 2;
    PostgresStreamBridge::connect(config)
        .await
        .expect("connect")
}

/// The next data event's name, skipping heartbeats; panics on anything else or after 10 s.
async fn next_event(stream: &mut ItemStream) -> (String, serde_json::Value) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.next().await {
                Some(Ok(StreamItem::Event(e))) => return (e.event, e.data),
                Some(Ok(StreamItem::Heartbeat)) => continue,
                other => panic!("expected an event, got {other:?}"),
            }
        }
    })
    .await
    .expect("an event within 10 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_published_on_one_gateway_streams_from_another() {
    let schema = unique_schema("two");
    let (a, b) = (
        bridge(&postgres_url(), &schema).await,
        bridge(&postgres_url(), &schema).await,
    );
    let run = unique_id("run");
    let mut live = b.subscribe(&run, None, BEAT);
    let first = a
        .publish(&run, "values", &json!({"n": 1}))
        .await
        .expect("publish");
    assert_eq!(
        next_event(&mut live).await,
        ("values".into(), json!({"n": 1}))
    );
    a.publish(&run, "values", &json!({"n": 2}))
        .await
        .expect("publish");
    assert_eq!(next_event(&mut live).await.1, json!({"n": 2}));
    a.publish_end(&run).await.expect("end");
    let end = tokio::time::timeout(Duration::from_secs(10), live.next())
        .await
        .expect("end in time");
    assert!(matches!(end, Some(Ok(StreamItem::End))), "{end:?}");
    // A reconnect to the other gateway with Last-Event-ID resumes after it.
    let mut replay = b.subscribe(&run, Some(&first), BEAT);
    assert_eq!(next_event(&mut replay).await.1, json!({"n": 2}));
    assert!(b.stream_exists(&run).await.expect("exists"));
    a.cleanup(&run, Duration::ZERO).await.expect("cleanup");
    assert!(!b.stream_exists(&run).await.expect("exists"));
}

/// However many subscribers wait, a bridge holds its pool and one LISTEN connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_subscribers_share_one_listen_connection() {
    let url = fresh_database(&postgres_url(), "fanout");
    let database = url.rsplit('/').next().expect("database").to_string();
    let bridge = bridge(&url, "switchyard").await;
    let runs: Vec<String> = (0..10).map(|_| unique_id("run")).collect();
    let mut streams: Vec<ItemStream> = (0..100)
        .map(|i| bridge.subscribe(&runs[i % runs.len()], None, BEAT))
        .collect();
    // The publisher waits until every run has a parked subscriber.
    let publisher = {
        let (bridge, runs) = (bridge.clone(), runs.clone());
        tokio::spawn(async move {
            while bridge.waiting_subscribers() < runs.len() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            for run in &runs {
                bridge
                    .publish(run, "values", &json!({"run": run}))
                    .await
                    .expect("publish");
            }
        })
    };
    // Every stream is polled at once, so all of them park before the publisher starts.
    let events = futures::future::join_all(streams.iter_mut().map(next_event)).await;
    assert!(events.iter().all(|(_, data)| data["run"].is_string()));
    publisher.await.expect("publisher");
    let connections = postgres_query(
        &postgres_url(),
        &format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'"),
    )
    .expect("count");
    let n: usize = connections[0][0]
        .as_deref()
        .expect("count")
        .parse()
        .expect("number");
    assert!(
        n <= 3,
        "the pool (2) and one LISTEN connection, not one per subscriber: {n}"
    );
}

/// A terminated LISTEN connection is re-established; a subscriber gets what was published
/// while it was down and what comes after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_listen_connection_loses_nothing() {
    let url = fresh_database(&postgres_url(), "relisten");
    let bridge = bridge(&url, "switchyard").await;
    let run = unique_id("run");
    let mut live = bridge.subscribe(&run, None, BEAT);
    bridge
        .publish(&run, "values", &json!(0))
        .await
        .expect("publish");
    assert_eq!(next_event(&mut live).await.1, json!(0));
    let database = url.rsplit('/').next().expect("database");
    let killed = postgres_query(
        &postgres_url(),
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = '{database}' AND query LIKE 'LISTEN%'"
        ),
    )
    .expect("terminate");
    assert_eq!(killed.len(), 1, "one LISTEN connection");
    for n in 1..=3 {
        bridge
            .publish(&run, "values", &json!(n))
            .await
            .expect("publish");
    }
    for n in 1..=3 {
        assert_eq!(next_event(&mut live).await.1, json!(n));
    }
}

/// Streams nobody publishes to for `stream_ttl` are removed, and their subscribers end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_streams_are_swept_after_their_ttl() {
    let mut config = PostgresStreamBridgeConfig::new(postgres_url());
    config.schema = Some(unique_schema("sweep"));
    config.stream_ttl = Some(Duration::from_secs(1));
    let bridge = PostgresStreamBridge::connect(config)
        .await
        .expect("connect");
    let run = unique_id("run");
    bridge
        .publish(&run, "values", &json!(1))
        .await
        .expect("publish");
    let mut live = bridge.subscribe(&run, None, BEAT);
    assert_eq!(next_event(&mut live).await.1, json!(1));
    let end = tokio::time::timeout(Duration::from_secs(15), live.next())
        .await
        .expect("the sweep ends the subscription");
    assert!(matches!(end, Some(Ok(StreamItem::End))), "{end:?}");
    assert!(!bridge.stream_exists(&run).await.expect("exists"));
}
