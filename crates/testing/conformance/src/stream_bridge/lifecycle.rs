//! Guarantee `stream.existence_and_cleanup` to 15: a run's existence and cleanup, removal under a
//! subscriber, independent runs, bad input and close.

use std::time::Duration;

use serde_json::json;
use switchyard_core::{Error, Result, StreamItem};

use crate::stream_bridge::common::{
    HB, SLOW_HB, assert_invalid, drain, ev, make, make_fixture, names, next, next_raw, park,
    publish_n, run,
};
use crate::stream_bridge::{Factory, Removal};

/// Guarantee `stream.existence_and_cleanup`: `stream_exists` follows publish and cleanup; a run
/// published after cleanup starts fresh.
pub async fn stream_exists_follows_publish_and_cleanup(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let r = run("exists");
    assert!(!b.stream_exists(&r).await.expect("exists"));
    b.publish(&r, "old", &json!(1)).await.expect("publish");
    assert!(b.stream_exists(&r).await.expect("exists"));
    b.publish_end(&r).await.expect("publish_end");
    assert!(b.stream_exists(&r).await.expect("exists"));
    b.cleanup(&r, Duration::ZERO).await.expect("cleanup");
    assert!(!b.stream_exists(&r).await.expect("exists"));
    b.cleanup(&r, Duration::ZERO)
        .await
        .expect("cleanup of an absent run");
    b.publish(&r, "new", &json!(2)).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(names(&drain(&mut s).await), ["new", "END"]);
    let r2 = run("end-exists");
    b.publish_end(&r2).await.expect("publish_end");
    assert!(b.stream_exists(&r2).await.expect("exists"));
}

/// Guarantee `stream.existence_and_cleanup`: `cleanup(delay)` waits, then removes.
pub async fn cleanup_waits_for_delay(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let r = run("delay");
    b.publish(&r, "x", &json!(1)).await.expect("publish");
    let (b2, r2) = (b.clone(), r.clone());
    let task = tokio::spawn(async move { b2.cleanup(&r2, Duration::from_secs(2)).await });
    assert!(
        b.stream_exists(&r).await.expect("exists"),
        "removed before the delay"
    );
    task.await.expect("join").expect("cleanup");
    assert!(!b.stream_exists(&r).await.expect("exists"));
}

/// Guarantee `stream.existence_and_cleanup`: subscribing alone creates no run.
pub async fn subscribing_creates_no_stream(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let r = run("ghost");
    let mut s = b.subscribe(&r, None, HB);
    park(&mut s).await;
    assert!(!b.stream_exists(&r).await.expect("exists"));
    drop(s);
    assert!(!b.stream_exists(&r).await.expect("exists"));
    let mut s = b.subscribe(&r, None, HB);
    park(&mut s).await;
    let id = b.publish(&r, "x", &json!(1)).await.expect("publish");
    assert_eq!(next(&mut s).await, Some(ev(&id, "x", json!(1))));
    assert!(b.stream_exists(&r).await.expect("exists"));
}

/// Guarantee `stream.removal_under_subscriber`: a subscriber whose run is removed mid-stream
/// terminates with End.
pub async fn cleanup_under_subscriber_terminates_it(factory: Factory<'_>) {
    let fixture = make_fixture(factory, 8).await;
    let (b, caps) = (fixture.bridge, fixture.capabilities);
    let r = run("removed");
    publish_n(&*b, &r, 2).await;
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, HB);
    assert_eq!(names(&[next(&mut s).await.expect("e1")]), ["e1"]);
    b.cleanup(&r, Duration::ZERO).await.expect("cleanup");
    let got = names(&drain(&mut s).await);
    match caps.removal {
        Removal::DrainsThenEnds => assert_eq!(got, ["e2", "END"]),
        Removal::EndsAtOnce => assert_eq!(got.last().map(String::as_str), Some("END")),
    }
    // Also without an end: a live subscriber of a run removed under it ends (Redis) or keeps
    // waiting on what it holds (memory, heartbeats).
    let r = run("removed-live");
    publish_n(&*b, &r, 1).await;
    let mut s = b.subscribe(&r, None, HB);
    assert_eq!(names(&[next(&mut s).await.expect("e1")]), ["e1"]);
    b.cleanup(&r, Duration::ZERO).await.expect("cleanup");
    match caps.removal {
        Removal::EndsAtOnce => assert_eq!(drain(&mut s).await, vec![StreamItem::End]),
        Removal::DrainsThenEnds => park(&mut s).await,
    }
}

/// Guarantee `stream.independent_runs`: runs are independent.
pub async fn runs_are_independent(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let (r1, r2) = (run("one"), run("two"));
    b.publish(&r1, "a", &json!("one")).await.expect("publish");
    b.publish(&r2, "b", &json!("two")).await.expect("publish");
    b.publish_end(&r1).await.expect("publish_end");
    let mut s1 = b.subscribe(&r1, None, SLOW_HB);
    let got = drain(&mut s1).await;
    assert_eq!(names(&got), ["a", "END"]);
    let StreamItem::Event(e) = &got[0] else {
        panic!()
    };
    assert_eq!(e.data, json!("one"));
    let mut s2 = b.subscribe(&r2, None, HB);
    assert_eq!(names(&[next(&mut s2).await.expect("b")]), ["b"]);
    park(&mut s2).await;
}

/// Guarantee `stream.bad_input`: bad input is a typed error, never a panic.
pub async fn bad_input_is_rejected(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let r = run("bad");
    assert_invalid(b.publish("", "x", &json!(1)).await, "empty run id");
    assert_invalid(b.publish(&r, "a\nb", &json!(1)).await, "LF in event");
    assert_invalid(b.publish(&r, "a\rb", &json!(1)).await, "CR in event");
    assert_invalid(b.publish_end("").await, "publish_end empty run id");
    assert_invalid(b.stream_exists("").await, "stream_exists empty run id");
    assert_invalid(b.cleanup("", Duration::ZERO).await, "cleanup empty run id");
    for (run_id, hb) in [("", SLOW_HB), (r.as_str(), Duration::ZERO)] {
        let mut s = b.subscribe(run_id, None, hb);
        let first = next_raw(&mut s).await.expect("an error item");
        assert_invalid(first, "subscribe");
        assert!(next_raw(&mut s).await.is_none());
    }
    // Hostile but valid run ids work.
    for hostile in ["a:b", "{tag}", "100%", "é✓", " ", "-1"] {
        let id = b
            .publish(hostile, "x", &json!(hostile))
            .await
            .expect("publish hostile id");
        b.publish_end(hostile).await.expect("publish_end");
        let mut s = b.subscribe(hostile, None, SLOW_HB);
        assert_eq!(
            drain(&mut s).await,
            vec![ev(&id, "x", json!(hostile)), StreamItem::End]
        );
        b.cleanup(hostile, Duration::ZERO).await.expect("cleanup");
    }
}

/// Guarantee `stream.close`: after close every operation is refused and live subscriptions end with
/// `Closed`.
pub async fn closed_bridge_refuses_work(factory: Factory<'_>) {
    let b = make(factory, 8).await;
    let r = run("close");
    let mut live = b.subscribe(&r, None, HB);
    park(&mut live).await;
    b.close().await.expect("close");
    let closed = |r: &Result<_>| matches!(r, Err(Error::Closed { .. }));
    assert!(closed(&b.publish(&r, "x", &json!(1)).await.map(|_| ())));
    assert!(closed(&b.publish_end(&r).await));
    assert!(closed(&b.stream_exists(&r).await.map(|_| ())));
    assert!(closed(&b.cleanup(&r, Duration::ZERO).await));
    let mut s = b.subscribe(&r, None, HB);
    assert!(closed(&next_raw(&mut s).await.expect("item").map(|_| ())));
    assert!(next_raw(&mut s).await.is_none());
    loop {
        match next_raw(&mut live).await.expect("an item before the end") {
            Ok(StreamItem::Heartbeat) => continue,
            other => {
                assert!(
                    closed(&other.map(|_| ())),
                    "live subscription must end with Closed"
                );
                break;
            }
        }
    }
    assert!(next_raw(&mut live).await.is_none());
}
