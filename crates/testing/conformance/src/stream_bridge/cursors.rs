//! Guarantee `stream.no_cursor` to 10: where a subscriber starts (no cursor, a retained, evicted or
//! malformed cursor) and the gaps it gets when it starts or falls behind the retained window.

use serde_json::json;
use switchyard_core::StreamItem;
use switchyard_core::stream::parse_stream_id;

use crate::stream_bridge::common::{
    HB, SLOW_HB, drain, ev, gap, make, make_fixture, names, next, park, publish_n, run,
};
use crate::stream_bridge::{AfterEnd, CursorWithoutSeq, Factory, LiveGap, MalformedCursor};

/// Guarantee `stream.no_cursor`: without a cursor the retained window is replayed, with no gap even
/// if events were trimmed.
pub async fn no_cursor_replays_retained_window(factory: Factory<'_>) {
    let b = make(factory, 2).await;
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

/// Guarantee `stream.retained_cursor`: a retained cursor resumes right after it.
pub async fn resumes_after_last_event_id(factory: Factory<'_>) {
    let b = make(factory, 16).await;
    let r = run("resume");
    let ids = publish_n(&*b, &r, 3).await;
    b.publish_end(&r).await.expect("publish_end");
    let mut s = b.subscribe(&r, Some(&ids[0]), SLOW_HB);
    assert_eq!(names(&drain(&mut s).await), ["e2", "e3", "END"]);
    let mut s = b.subscribe(&r, Some(&ids[2]), SLOW_HB);
    assert_eq!(drain(&mut s).await, vec![StreamItem::End]);
}

/// Guarantee `stream.evicted_cursor`: a cursor just below the oldest retained event yields exactly
/// one gap and nothing else.
pub async fn evicted_cursor_yields_gap_before_any_data(factory: Factory<'_>) {
    let b = make(factory, 2).await;
    let r = run("evicted");
    let ids = publish_n(&*b, &r, 3).await;
    let mut s = b.subscribe(&r, Some(&ids[0]), SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![gap(Some(&ids[0]), &ids[1], &ids[2])]
    );
}

/// Guarantee `stream.evicted_cursor`: a well-formed foreign id below the watermark is
/// conservatively a gap.
pub async fn numeric_cursor_below_watermark_yields_gap(factory: Factory<'_>) {
    let b = make(factory, 2).await;
    let r = run("foreign");
    let ids = publish_n(&*b, &r, 3).await;
    let mut s = b.subscribe(&r, Some("1-0"), SLOW_HB);
    assert_eq!(
        drain(&mut s).await,
        vec![gap(Some("1-0"), &ids[1], &ids[2])]
    );
}

/// Guarantee `stream.falling_behind`: a live subscriber that lost an event gets one gap naming its
/// last delivered id, then ends.
pub async fn slow_subscriber_gets_gap(factory: Factory<'_>) {
    let b = make(factory, 2).await;
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

/// Guarantee `stream.falling_behind`: the boundary case (next needed event is the oldest retained)
/// per backend.
pub async fn live_gap_boundary(factory: Factory<'_>) {
    let fixture = make_fixture(factory, 2).await;
    let (b, caps) = (fixture.bridge, fixture.capabilities);
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

/// Guarantee `stream.first_delivery_outrun`: cursor-less subscribers parked on empty runs whose
/// first events are trimmed before they are given them get a gap with `requested: None` (four runs
/// at once), never a partial replay.
pub async fn first_delivery_outrun_yields_gap_without_cursor(factory: Factory<'_>) {
    let b = make(factory, 4).await;
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

/// Guarantee `stream.gap_beats_end`: a subscriber behind the watermark of an ended run gets a gap,
/// not an end.
pub async fn gap_beats_end(factory: Factory<'_>) {
    let fixture = make_fixture(factory, 2).await;
    let (b, caps) = (fixture.bridge, fixture.capabilities);
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

/// Guarantee `stream.gap_beats_end`: events published after the end, per backend.
pub async fn events_after_end(factory: Factory<'_>) {
    let fixture = make_fixture(factory, 16).await;
    let (b, caps) = (fixture.bridge, fixture.capabilities);
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

/// Guarantee `stream.malformed_cursor`: malformed cursors never yield a gap; on a finished run both
/// backends replay and end.
pub async fn malformed_cursor_never_gaps(factory: Factory<'_>) {
    let b = make(factory, 2).await;
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

/// Guarantee `stream.malformed_cursor`: a malformed cursor on a live run, and `123` without a seq,
/// per backend.
pub async fn malformed_cursor_on_live_run(factory: Factory<'_>) {
    let fixture = make_fixture(factory, 8).await;
    let (b, caps) = (fixture.bridge, fixture.capabilities);
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
