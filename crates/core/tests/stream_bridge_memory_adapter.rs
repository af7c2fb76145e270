//! The memory bridge beyond the port: its byte bounds (ADR 0192; adapter options, not port
//! guarantees) and the state it keeps for subscribers.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_core::stream::{MemoryLimits, Retained, StreamItem};
use switchyard_core::{MemoryStreamBridge, StreamBridge, SystemClock};

const HB: Duration = Duration::from_secs(30);

fn bridge(max_run_bytes: usize, max_total_bytes: usize) -> MemoryStreamBridge {
    MemoryStreamBridge::with_limits(
        1000,
        MemoryLimits {
            max_run_bytes,
            max_total_bytes,
        },
        Arc::new(SystemClock),
    )
    .expect("bridge")
}

fn big(n: usize) -> Value {
    json!("x".repeat(n))
}

/// Every item up to the end (or the first gap) of `run` from `cursor`.
async fn drain(b: &MemoryStreamBridge, run: &str, cursor: Option<&str>) -> Vec<StreamItem> {
    let mut items = Vec::new();
    let mut s = b.subscribe(run, cursor, HB);
    while let Some(item) = s.next().await {
        let item = item.expect("item");
        let stop = item.is_terminal() || item == StreamItem::Heartbeat;
        items.push(item);
        if stop {
            break;
        }
    }
    items
}

#[tokio::test]
async fn a_run_keeps_its_newest_events_within_its_byte_bound() {
    let b = bridge(2500, 1 << 20);
    let first = b.publish("r", "e", &big(1000)).await.expect("publish");
    for _ in 0..4 {
        b.publish("r", "e", &big(1000)).await.expect("publish");
    }
    b.publish_end("r").await.expect("end");
    let Retained { runs, bytes } = b.retained();
    assert_eq!(runs, 1);
    assert!(bytes <= 2500, "{bytes}");
    // The evicted cursor gets a gap, as for events past `queue_maxsize`.
    match drain(&b, "r", Some(&first)).await.as_slice() {
        [StreamItem::Gap(gap)] => assert_eq!(gap.requested.as_deref(), Some(first.as_str())),
        other => panic!("expected one gap, got {other:?}"),
    }
    // Without a cursor: the two newest events, then the end.
    let items = drain(&b, "r", None).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(items.last(), Some(&StreamItem::End));
}

#[tokio::test]
async fn an_event_larger_than_the_run_bound_is_still_delivered() {
    let b = bridge(100, 1 << 20);
    b.publish("r", "e", &big(1000)).await.expect("publish");
    let first = b.subscribe("r", None, HB).next().await;
    assert!(matches!(first, Some(Ok(StreamItem::Event(_)))), "{first:?}");
}

#[tokio::test]
async fn the_oldest_runs_are_evicted_past_the_total_bound() {
    let b = bridge(1 << 20, 3500);
    for run in ["a", "b", "c"] {
        b.publish(run, "e", &big(1000)).await.expect("publish");
    }
    assert_eq!(b.retained().runs, 3);
    b.publish("d", "e", &big(1000)).await.expect("publish");
    let Retained { runs, bytes } = b.retained();
    assert_eq!(runs, 3);
    assert!(bytes <= 3500, "{bytes}");
    assert!(
        !b.stream_exists("a").await.expect("exists"),
        "oldest evicted"
    );
    for run in ["b", "c", "d"] {
        assert!(b.stream_exists(run).await.expect("exists"), "{run} kept");
    }
}

#[tokio::test]
async fn an_evicted_live_run_continues_its_ids() {
    let b = bridge(1 << 20, 2500);
    let a0 = b.publish("a", "e", &big(1000)).await.expect("publish");
    b.publish("b", "e", &big(1000)).await.expect("publish");
    b.publish("c", "e", &big(1000)).await.expect("publish"); // evicts "a"
    assert!(!b.stream_exists("a").await.expect("exists"));
    let a1 = b.publish("a", "e", &json!(1)).await.expect("publish");
    let seq = |id: &str| {
        id.split_once('-')
            .map(|(_, s)| s.parse::<u64>().expect("seq"))
    };
    assert_eq!(seq(&a1), Some(seq(&a0).expect("seq") + 1), "ids continue");
    // A subscriber holding the evicted event's id learns of the gap.
    assert!(matches!(
        drain(&b, "a", Some(&a0)).await.as_slice(),
        [StreamItem::Gap(_)]
    ));
}

#[tokio::test]
async fn cleanup_releases_the_bytes() {
    let b = bridge(1 << 20, 1 << 20);
    b.publish("r", "e", &big(1000)).await.expect("publish");
    assert!(b.retained().bytes > 1000);
    b.cleanup("r", Duration::ZERO).await.expect("cleanup");
    assert_eq!(b.retained(), Retained::default());
}

#[test]
fn zero_bounds_are_refused() {
    for (run, total) in [(0, 1), (1, 0)] {
        let got = MemoryStreamBridge::with_limits(
            1,
            MemoryLimits {
                max_run_bytes: run,
                max_total_bytes: total,
            },
            Arc::new(SystemClock),
        );
        assert!(got.is_err());
    }
}

#[tokio::test]
async fn waiting_subscribers_leave_nothing_behind() {
    let b = MemoryStreamBridge::new(4).expect("bridge");
    let mut s = b.subscribe("ghost", None, Duration::from_millis(10));
    assert_eq!(
        s.next().await.expect("item").expect("ok"),
        StreamItem::Heartbeat
    );
    let mut s2 = b.subscribe("ghost", None, Duration::from_millis(10));
    assert_eq!(
        s2.next().await.expect("item").expect("ok"),
        StreamItem::Heartbeat
    );
    assert_eq!(b.tracked_runs(), 1);
    drop(s);
    assert_eq!(b.tracked_runs(), 1, "still waited on");
    drop(s2);
    assert_eq!(b.tracked_runs(), 0);
    // A published run stays after its subscribers leave.
    b.publish("kept", "x", &Value::Null).await.expect("publish");
    let mut s = b.subscribe("kept", None, Duration::from_millis(10));
    assert!(matches!(s.next().await, Some(Ok(StreamItem::Event(_)))));
    drop(s);
    assert_eq!(b.tracked_runs(), 1);
}
