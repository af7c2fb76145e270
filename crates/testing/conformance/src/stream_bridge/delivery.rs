//! Guarantee `stream.order_and_end` to 3: events reach subscribers in order with heartbeats while
//! idle, and a run retains its newest events.

use serde_json::{Value, json};
use switchyard_core::stream::parse_stream_id;
use switchyard_core::{Error, StreamItem};

use crate::stream_bridge::common::{
    HB, SLOW_HB, drain, ev, make, names, next_raw, park, publish_n, run,
};
use crate::stream_bridge::{Factory, StreamBridgeSetup};

/// Guarantee `stream.order_and_end`: events in publish order with name and data, then End, then the
/// stream ends.
pub async fn publish_subscribe_in_order_then_end(factory: Factory<'_>) {
    let b = make(factory, 16).await;
    let r = run("order");
    let a = b
        .publish(&r, "metadata", &json!({"run_id": r}))
        .await
        .expect("publish");
    let v = b
        .publish(&r, "values", &json!({"messages": []}))
        .await
        .expect("publish");
    let u = b
        .publish(&r, "updates", &json!({"n": 1}))
        .await
        .expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![
            ev(&a, "metadata", json!({"run_id": r})),
            ev(&v, "values", json!({"messages": []})),
            ev(&u, "updates", json!({"n": 1})),
            StreamItem::End
        ]
    );
}

/// Guarantee `stream.order_and_end`: ids are `<digits>-<digits>`, strictly increasing, and what
/// `publish` returned.
pub async fn event_ids_are_ordered(factory: Factory<'_>) {
    let b = make(factory, 64).await;
    let r = run("ids");
    let ids = publish_n(&*b, &r, 20).await;
    b.publish_end(&r).await.expect("publish_end");
    let mut prev = None;
    for id in &ids {
        let (ms, seq) = id.split_once('-').expect("id has a dash");
        assert!(
            !ms.is_empty()
                && ms.bytes().all(|c| c.is_ascii_digit())
                && !seq.is_empty()
                && seq.bytes().all(|c| c.is_ascii_digit()),
            "{id}"
        );
        let parsed = parse_stream_id(id).expect("fits u64").expect("is an id");
        if let Some(p) = prev {
            assert!(parsed > p, "{id} not after {p:?}");
        }
        prev = Some(parsed);
    }
    let mut s = b.subscribe(&r, None, SLOW_HB);
    let delivered: Vec<String> = drain(&mut s)
        .await
        .into_iter()
        .filter_map(|i| match i {
            StreamItem::Event(e) => Some(e.id),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, ids);
}

/// Guarantee `stream.order_and_end`: an event named `__end__` is an ordinary event; JSON data
/// round-trips.
pub async fn event_named_end_is_ordinary(factory: Factory<'_>) {
    let b = make(factory, 16).await;
    let r = run("named-end");
    let data = json!({"z": [1, 2.5, -3, null, true], "é": "✓ \"q\"\n", "big": 12345678901234567u64, "a": {}});
    let x = b
        .publish(&r, "__end__", &Value::Null)
        .await
        .expect("publish");
    let y = b.publish(&r, "after", &data).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![
            ev(&x, "__end__", Value::Null),
            ev(&y, "after", data),
            StreamItem::End
        ]
    );
}

/// Guarantee `stream.heartbeats`: an idle subscriber gets heartbeats, on an empty run and after the
/// last event.
pub async fn idle_subscriber_gets_heartbeat(factory: Factory<'_>) {
    let b = make(factory, 16).await;
    let r = run("hb");
    let mut empty = b.subscribe(&r, None, HB);
    park(&mut empty).await;
    park(&mut empty).await;
    let id = b.publish(&r, "init", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&r, None, HB);
    assert_eq!(
        next_raw(&mut s).await.expect("item").expect("ok"),
        ev(&id, "init", json!(1))
    );
    assert_eq!(
        next_raw(&mut s).await.expect("item").expect("ok"),
        StreamItem::Heartbeat
    );
}

/// Guarantee `stream.heartbeats`: a subscriber that starts before the first publish waits for it;
/// no premature end.
pub async fn subscriber_waits_for_first_publish(factory: Factory<'_>) {
    let b = make(factory, 16).await;
    let r = run("first");
    let mut s = b.subscribe(&r, None, HB);
    park(&mut s).await;
    let id = b
        .publish(&r, "metadata", &json!({"run_id": r}))
        .await
        .expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    assert_eq!(
        drain(&mut s).await,
        vec![ev(&id, "metadata", json!({"run_id": r})), StreamItem::End]
    );
}

/// Guarantee `stream.bounded_retention`: only the newest `queue_maxsize` events are retained.
pub async fn retention_keeps_newest_events(factory: Factory<'_>) {
    let b = make(factory, 1).await;
    let r = run("bounded");
    b.publish(&r, "first", &json!(1)).await.expect("publish");
    let second = b.publish(&r, "second", &json!(2)).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![ev(&second, "second", json!(2)), StreamItem::End]
    );
}

/// Guarantee `stream.bounded_retention`: the end mark never evicts an event.
pub async fn end_takes_no_retention_slot(factory: Factory<'_>) {
    let b = make(factory, 2).await;
    let r = run("full");
    b.publish(&r, "a", &json!(1)).await.expect("publish");
    b.publish(&r, "b", &json!(2)).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(names(&drain(&mut s).await), ["a", "b", "END"]);
}

/// Guarantee `stream.bounded_retention`: a run with only an end yields exactly End.
pub async fn end_only_run_yields_end(factory: Factory<'_>) {
    let b = make(factory, 2).await;
    let r = run("end-only");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(drain(&mut s).await, vec![StreamItem::End]);
}

/// Guarantee `stream.bounded_retention`: a retention of zero is refused when the bridge is built.
pub async fn zero_retention_is_refused(factory: Factory<'_>) {
    let r = factory(StreamBridgeSetup { retention: 0 }).await;
    assert!(matches!(r, Err(Error::Config { .. })), "got {r:?}");
}
