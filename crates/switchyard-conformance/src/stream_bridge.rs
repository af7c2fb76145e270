//! The `StreamBridge` conformance suite: one case per guarantee of
//! [`switchyard_core::StreamBridge`]'s contract.
//!
//! Run it with [`stream_bridge_suite!`](crate::stream_bridge_suite). The factory builds a fresh
//! bridge (own key prefix) retaining the given number of events per run; [`Capabilities`] names the
//! behaviours on which the memory and Redis backends differ on purpose (reference §a.6).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_core::stream::parse_stream_id;
use switchyard_core::{
    Error, ItemStream, Result, StreamBridge, StreamEvent, StreamGap, StreamItem,
};

/// How a backend resolves the points where the two seed backends differ on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether subscribers in other processes see the events.
    pub cross_process: bool,
    /// When a live subscriber whose next needed event is exactly the oldest retained one gets a gap.
    pub live_gap: LiveGap,
    /// What a malformed `Last-Event-ID` does on a run that has not ended.
    pub malformed_cursor: MalformedCursor,
    /// Whether `123` (no `-seq`) is a cursor.
    pub cursor_without_seq: CursorWithoutSeq,
    /// Whether events published after the end reach a subscriber that has not seen the end yet.
    pub after_end: AfterEnd,
    /// What a subscriber whose run is removed mid-stream gets.
    pub removal: Removal,
    /// Whether a gap's `latest` may name the end mark (true on Redis, where END is an entry).
    pub end_is_an_entry: bool,
}

/// Live fell-behind rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveGap {
    /// Gap only when the next needed event is gone (memory).
    Exact,
    /// Gap when the last delivered id is below the oldest retained (Redis).
    ConservativeByOne,
}

/// Malformed cursor on a live run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedCursor {
    /// Replay the retained window (memory).
    ReplayRetained,
    /// Only events published after the subscription started (Redis live tail).
    TailNew,
}

/// `123` as a cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorWithoutSeq {
    /// Malformed: replay (memory).
    Malformed,
    /// The id `123-0` (Redis).
    SeqZero,
}

/// Events after the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEnd {
    /// Delivered before the end (memory: END is a flag).
    Delivered,
    /// Never delivered (Redis: the END entry precedes them).
    NeverDelivered,
}

/// Removal under a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The subscriber drains what it holds, then ends (memory).
    DrainsThenEnds,
    /// The subscriber ends at its next poll (Redis).
    EndsAtOnce,
}

impl Capabilities {
    /// The memory bridge.
    pub const MEMORY: Capabilities = Capabilities {
        cross_process: false,
        live_gap: LiveGap::Exact,
        malformed_cursor: MalformedCursor::ReplayRetained,
        cursor_without_seq: CursorWithoutSeq::Malformed,
        after_end: AfterEnd::Delivered,
        removal: Removal::DrainsThenEnds,
        end_is_an_entry: false,
    };

    /// The Redis Streams bridge.
    pub const REDIS_STREAMS: Capabilities = Capabilities {
        cross_process: true,
        live_gap: LiveGap::ConservativeByOne,
        malformed_cursor: MalformedCursor::TailNew,
        cursor_without_seq: CursorWithoutSeq::SeqZero,
        after_end: AfterEnd::NeverDelivered,
        removal: Removal::EndsAtOnce,
        end_is_an_entry: true,
    };
}

/// Heartbeat used where a case waits for one.
const HB: Duration = Duration::from_millis(100);
/// Heartbeat used where heartbeats are noise.
const SLOW_HB: Duration = Duration::from_secs(5);
/// A safety net against hangs, never a timing assertion.
const HANG: Duration = Duration::from_secs(30);

async fn make<F, Fut>(factory: &F, maxsize: usize) -> Arc<dyn StreamBridge>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    factory(maxsize).await.expect("factory builds a bridge")
}

fn run(tag: &str) -> String {
    crate::harness::unique_id(tag)
}

/// The next item, including heartbeats; `None` when the stream ended.
async fn next_raw(s: &mut ItemStream) -> Option<Result<StreamItem>> {
    tokio::time::timeout(HANG, s.next())
        .await
        .expect("subscription hung")
}

/// The next non-heartbeat item.
async fn next(s: &mut ItemStream) -> Option<StreamItem> {
    loop {
        match next_raw(s).await {
            Some(Ok(StreamItem::Heartbeat)) => continue,
            Some(Ok(item)) => return Some(item),
            Some(Err(e)) => panic!("subscription failed: {e}"),
            None => return None,
        }
    }
}

/// Every non-heartbeat item up to and including the terminal one; asserts the stream then ends.
async fn drain(s: &mut ItemStream) -> Vec<StreamItem> {
    let mut items = Vec::new();
    while let Some(item) = next(s).await {
        let terminal = item.is_terminal();
        items.push(item);
        if terminal {
            assert!(
                next_raw(s).await.is_none(),
                "stream must end after {:?}",
                items.last()
            );
            return items;
        }
    }
    panic!("stream ended without a terminal item after {items:?}");
}

/// Polls until the subscriber has parked (its first heartbeat).
async fn park(s: &mut ItemStream) {
    match next_raw(s).await {
        Some(Ok(StreamItem::Heartbeat)) => {}
        other => panic!("expected a heartbeat from a parked subscriber, got {other:?}"),
    }
}

fn names(items: &[StreamItem]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            StreamItem::Event(e) => e.event.clone(),
            StreamItem::End => "END".into(),
            StreamItem::Heartbeat => "HB".into(),
            StreamItem::Gap(_) => "GAP".into(),
        })
        .collect()
}

fn ev(id: &str, event: &str, data: Value) -> StreamItem {
    StreamItem::Event(StreamEvent {
        id: id.into(),
        event: event.into(),
        data,
    })
}

fn gap(requested: Option<&str>, earliest: &str, latest: &str) -> StreamItem {
    StreamItem::Gap(StreamGap {
        requested: requested.map(str::to_owned),
        earliest: earliest.into(),
        latest: latest.into(),
    })
}

async fn publish_n(b: &dyn StreamBridge, run: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 1..=n {
        ids.push(
            b.publish(run, &format!("e{i}"), &json!({ "i": i }))
                .await
                .expect("publish"),
        );
    }
    ids
}

fn assert_invalid<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    assert!(
        matches!(r, Err(Error::InvalidInput { .. })),
        "{what}: expected InvalidInput, got {r:?}"
    );
}

/// G1: events in publish order with name and data, then End, then the stream ends.
pub async fn publish_subscribe_in_order_then_end<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
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

/// G1: ids are `<digits>-<digits>`, strictly increasing, and what `publish` returned.
pub async fn event_ids_are_ordered<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 64).await;
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

/// G1: an event named `__end__` is an ordinary event; JSON data round-trips.
pub async fn event_named_end_is_ordinary<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
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

/// G2: an idle subscriber gets heartbeats, on an empty run and after the last event.
pub async fn idle_subscriber_gets_heartbeat<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
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

/// G2: a subscriber that starts before the first publish waits for it; no premature end.
pub async fn subscriber_waits_for_first_publish<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
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

/// G3: only the newest `queue_maxsize` events are retained.
pub async fn retention_keeps_newest_events<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 1).await;
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

/// G3: the end mark never evicts an event.
pub async fn end_takes_no_retention_slot<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("full");
    b.publish(&r, "a", &json!(1)).await.expect("publish");
    b.publish(&r, "b", &json!(2)).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(names(&drain(&mut s).await), ["a", "b", "END"]);
}

/// G3: a run with only an end yields exactly End.
pub async fn end_only_run_yields_end<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("end-only");
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(drain(&mut s).await, vec![StreamItem::End]);
}

/// G3: a retention of zero is refused when the bridge is built.
pub async fn zero_retention_is_refused<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let r = factory(0).await;
    assert!(matches!(r, Err(Error::Config { .. })), "got {r:?}");
}

/// G4: without a cursor the retained window is replayed, with no gap even if events were trimmed.
pub async fn no_cursor_replays_retained_window<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("late");
    let ids = publish_n(&*b, &r, 4).await;
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![
            ev(&ids[2], "e3", json!({"i": 3})),
            ev(&ids[3], "e4", json!({"i": 4})),
            StreamItem::End
        ]
    );
}

/// G5: a retained cursor resumes right after it.
pub async fn resumes_after_last_event_id<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
    let r = run("resume");
    let ids = publish_n(&*b, &r, 3).await;
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, Some(&ids[0]), SLOW_HB);
    assert_eq!(names(&drain(&mut s).await), ["e2", "e3", "END"]);
    let mut s = b.subscribe(&r, Some(&ids[2]), SLOW_HB);
    assert_eq!(drain(&mut s).await, vec![StreamItem::End]);
}

/// G6: a cursor just below the oldest retained event yields exactly one gap and nothing else.
pub async fn evicted_cursor_yields_gap_before_any_data<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("evicted");
    let ids = publish_n(&*b, &r, 3).await;
    let mut s = b.subscribe(&r, Some(&ids[0]), SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![gap(Some(&ids[0]), &ids[1], &ids[2])]
    );
}

/// G6: a well-formed foreign id below the watermark is conservatively a gap.
pub async fn numeric_cursor_below_watermark_yields_gap<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("foreign");
    let ids = publish_n(&*b, &r, 3).await;
    let mut s = b.subscribe(&r, Some("1-0"), SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![gap(Some("1-0"), &ids[1], &ids[2])]
    );
}

/// G7: a live subscriber that lost an event gets one gap naming its last delivered id, then ends.
pub async fn slow_subscriber_gets_gap<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("slow");
    let e1 = b.publish(&r, "e1", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(next(&mut s).await, Some(ev(&e1, "e1", json!(1))));
    let more = publish_n(&*b, &r, 3).await;
    assert_eq!(
        drain(&mut s).await,
        vec![gap(Some(&e1), &more[1], &more[2])]
    );
}

/// G7: the boundary case (next needed event is the oldest retained) per backend.
pub async fn live_gap_boundary<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r2 = run("boundary2");
    let f1 = b.publish(&r2, "f1", &json!(1)).await.expect("publish");
    let mut s2 = b.subscribe(&r2, None, SLOW_HB);
    assert_eq!(next(&mut s2).await, Some(ev(&f1, "f1", json!(1))));
    let f2 = b.publish(&r2, "f2", &json!(2)).await.expect("publish");
    let f3 = b.publish(&r2, "f3", &json!(3)).await.expect("publish");
    b.publish_end(&r2).await.expect("publish_end");
    let items = drain(&mut s2).await;
    match caps.live_gap {
        LiveGap::Exact => assert_eq!(
            items,
            vec![
                ev(&f2, "f2", json!(2)),
                ev(&f3, "f3", json!(3)),
                StreamItem::End
            ]
        ),
        LiveGap::ConservativeByOne => {
            assert_eq!(items.len(), 1, "{items:?}");
            let StreamItem::Gap(g) = &items[0] else {
                panic!("expected a gap, got {items:?}")
            };
            assert_eq!(g.requested.as_deref(), Some(f1.as_str()));
            assert_eq!(g.earliest, f2);
        }
    }
}

/// G8: cursor-less subscribers parked on empty runs whose first events are trimmed before they are
/// given them get a gap with `requested: None` (four runs at once), never a partial replay.
pub async fn first_delivery_outrun_yields_gap_without_cursor<F, Fut>(
    factory: F,
    _caps: Capabilities,
) where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 4).await;
    let runs: Vec<String> = (0..4).map(|_| run("outrun")).collect();
    let mut subs = Vec::new();
    for r in &runs {
        let mut s = b.subscribe(r, None, HB);
        park(&mut s).await;
        subs.push(s);
    }
    let mut retained = Vec::new();
    for r in &runs {
        let ids = publish_n(&*b, r, 10).await;
        b.publish_end(r).await.expect("publish_end");
        retained.push((ids[6].clone(), ids[9].clone()));
    }
    for (s, (earliest, latest)) in subs.iter_mut().zip(&retained) {
        let items = drain(s).await;
        assert_eq!(items.len(), 1, "{items:?}");
        let StreamItem::Gap(g) = &items[0] else {
            panic!("expected a gap, got {items:?}")
        };
        assert_eq!(g.requested, None);
        assert_eq!(&g.earliest, earliest);
        // On Redis the newest retained entry is the end mark.
        assert!(&g.latest == latest || parse_stream_id(&g.latest) > parse_stream_id(latest));
    }
}

/// G9: a subscriber behind the watermark of an ended run gets a gap, not an end.
pub async fn gap_beats_end<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("gap-end");
    let e1 = b.publish(&r, "e1", &json!(1)).await.expect("publish");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    assert_eq!(next(&mut s).await, Some(ev(&e1, "e1", json!(1))));
    let more = publish_n(&*b, &r, 3).await;
    b.publish_end(&r).await.expect("publish_end");
    let items = drain(&mut s).await;
    assert_eq!(items.len(), 1, "{items:?}");
    let StreamItem::Gap(g) = &items[0] else {
        panic!("expected a gap, got {items:?}")
    };
    assert_eq!(g.requested.as_deref(), Some(e1.as_str()));
    assert_eq!(g.earliest, more[1]);
    if caps.end_is_an_entry {
        assert!(
            parse_stream_id(&g.latest) > parse_stream_id(&more[2]),
            "{g:?}"
        );
    } else {
        assert_eq!(g.latest, more[2]);
    }
}

/// G9: events published after the end, per backend.
pub async fn events_after_end<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 16).await;
    let r = run("after-end");
    b.publish(&r, "a", &json!(1)).await.expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    b.publish(&r, "b", &json!(2)).await.expect("publish");
    let mut s = b.subscribe(&r, None, SLOW_HB);
    let got = names(&drain(&mut s).await);
    match caps.after_end {
        AfterEnd::Delivered => assert_eq!(got, ["a", "b", "END"]),
        AfterEnd::NeverDelivered => assert_eq!(got, ["a", "END"]),
    }
}

/// G10: malformed cursors never yield a gap; on a finished run both backends replay and end.
pub async fn malformed_cursor_never_gaps<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 2).await;
    let r = run("malformed");
    publish_n(&*b, &r, 3).await;
    b.publish_end(&r).await.expect("publish_end");
    for cursor in [
        "-1",
        "garbage",
        "",
        "1-2-3",
        "1-x",
        "not-a-valid-id",
        "١٢٣-٤",
    ] {
        let mut s = b.subscribe(&r, Some(cursor), SLOW_HB);
        assert_eq!(
            names(&drain(&mut s).await),
            ["e2", "e3", "END"],
            "cursor {cursor:?}"
        );
    }
}

/// G10: a malformed cursor on a live run, and `123` without a seq, per backend.
pub async fn malformed_cursor_on_live_run<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
    let r = run("tail");
    let ids = publish_n(&*b, &r, 2).await;
    let mut s = b.subscribe(&r, Some("-1"), HB);
    if caps.malformed_cursor == MalformedCursor::TailNew {
        // Fix the position before publishing more.
        park(&mut s).await;
    }
    b.publish(&r, "e3", &json!({"i": 3}))
        .await
        .expect("publish");
    b.publish_end(&r).await.expect("publish_end");
    let got = names(&drain(&mut s).await);
    match caps.malformed_cursor {
        MalformedCursor::ReplayRetained => assert_eq!(got, ["e1", "e2", "e3", "END"]),
        MalformedCursor::TailNew => assert_eq!(got, ["e3", "END"]),
    }

    let mut s = b.subscribe(&r, Some("123"), SLOW_HB);
    let items = drain(&mut s).await;
    match caps.cursor_without_seq {
        CursorWithoutSeq::Malformed => assert_eq!(names(&items), ["e1", "e2", "e3", "END"]),
        CursorWithoutSeq::SeqZero => {
            let StreamItem::Gap(g) = &items[0] else {
                panic!("expected a gap, got {items:?}")
            };
            assert_eq!(
                (g.requested.as_deref(), g.earliest.as_str()),
                (Some("123"), ids[0].as_str())
            );
        }
    }
}

/// G11: `stream_exists` follows publish and cleanup; a run published after cleanup starts fresh.
pub async fn stream_exists_follows_publish_and_cleanup<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G11: `cleanup(delay)` waits, then removes.
pub async fn cleanup_waits_for_delay<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G11: subscribing alone creates no run.
pub async fn subscribing_creates_no_stream<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G12: a subscriber whose run is removed mid-stream terminates with End.
pub async fn cleanup_under_subscriber_terminates_it<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G13: runs are independent.
pub async fn runs_are_independent<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G14: bad input is a typed error, never a panic.
pub async fn bad_input_is_rejected<F, Fut>(factory: F, _caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
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

/// G15: after close every operation is refused and live subscriptions end with `Closed`.
pub async fn closed_bridge_refuses_work<F, Fut>(factory: F, caps: Capabilities)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Arc<dyn StreamBridge>>>,
{
    let b = make(&factory, 8).await;
    assert_eq!(b.supports_cross_process(), caps.cross_process);
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

/// Stamps one `#[tokio::test]` per guarantee of the `StreamBridge` contract.
///
/// `$factory` is an expression of type `Fn(usize) -> impl Future<Output =
/// switchyard_core::Result<Arc<dyn StreamBridge>>>` building a fresh bridge retaining that many
/// events per run; `$caps` a [`Capabilities`].
#[macro_export]
macro_rules! stream_bridge_suite {
    ($factory:expr, $caps:expr) => {
        $crate::stream_bridge_suite!(@cases $factory, $caps;
            publish_subscribe_in_order_then_end,
            event_ids_are_ordered,
            event_named_end_is_ordinary,
            idle_subscriber_gets_heartbeat,
            subscriber_waits_for_first_publish,
            retention_keeps_newest_events,
            end_takes_no_retention_slot,
            end_only_run_yields_end,
            zero_retention_is_refused,
            no_cursor_replays_retained_window,
            resumes_after_last_event_id,
            evicted_cursor_yields_gap_before_any_data,
            numeric_cursor_below_watermark_yields_gap,
            slow_subscriber_gets_gap,
            live_gap_boundary,
            first_delivery_outrun_yields_gap_without_cursor,
            gap_beats_end,
            events_after_end,
            malformed_cursor_never_gaps,
            malformed_cursor_on_live_run,
            stream_exists_follows_publish_and_cleanup,
            cleanup_waits_for_delay,
            subscribing_creates_no_stream,
            cleanup_under_subscriber_terminates_it,
            runs_are_independent,
            bad_input_is_rejected,
            closed_bridge_refuses_work,
        );
    };
    (@cases $factory:expr, $caps:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::stream_bridge::$case($factory, $caps).await;
            }
        )*
    };
}
