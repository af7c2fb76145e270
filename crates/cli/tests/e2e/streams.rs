//! SSE: reconnecting with `Last-Event-ID` gets exactly the missing events; an evicted cursor gets
//! the gap frame.

use serde_json::{Value, json};

use crate::common::{Gateway, delta, start_body};

fn seqs(frames: &[crate::common::Frame]) -> Vec<Value> {
    frames.iter().map(|f| f.json()["seq"].clone()).collect()
}

fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').expect("<ms>-<seq>");
    (ms.parse().expect("ms"), seq.parse().expect("seq"))
}

#[tokio::test]
async fn reconnect_with_last_event_id_gets_exactly_the_missing_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s")).await.code(),
        201
    );
    for i in 0..4 {
        let r = http
            .post("/v1/runs/r/events?session=s", &delta(&format!("a{i}")))
            .await;
        assert_eq!(r.code(), 201, "{}", r.text);
    }

    let mut sse = http.sse("/v1/runs/r/stream?session=s", None).await;
    let seen = sse.take(3).await;
    assert_eq!(seqs(&seen), vec![json!(0), json!(1), json!(2)]);
    let cursor = seen[2].id.clone().expect("id");
    drop(sse); // the client goes away

    // Events keep arriving while it is disconnected.
    for i in 0..3 {
        let r = http
            .post("/v1/runs/r/events?session=s", &delta(&format!("b{i}")))
            .await;
        assert_eq!(r.code(), 201);
    }
    let done = json!({"kind": "run.cancelled", "reason": "enough"}).to_string();
    assert_eq!(
        http.post("/v1/runs/r/events?session=s", &done).await.code(),
        201
    );

    let mut sse = http.sse("/v1/runs/r/stream?session=s", Some(&cursor)).await;
    let mut rest = Vec::new();
    while let Some(frame) = sse.next().await {
        rest.push(frame);
    }
    let (end, data) = rest.split_last().expect("frames");
    assert_eq!(end.event, "end");
    assert_eq!(
        seqs(data),
        (3..=8).map(|n| json!(n)).collect::<Vec<_>>(),
        "exactly the events after the cursor, in order"
    );
    assert_eq!(data.last().map(|f| f.event.as_str()), Some("run.cancelled"));
    // Ids strictly increase.
    let mut ids = vec![parse_id(&cursor)];
    ids.extend(data.iter().map(|f| parse_id(f.id.as_deref().expect("id"))));
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[tokio::test]
async fn cursor_older_than_retention_gets_the_gap_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &["--stream-retention", "3"]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s")).await.code(),
        201
    );
    let mut sse = http.sse("/v1/runs/r/stream?session=s", None).await;
    let first = sse.next().await.expect("run.started");
    let cursor = first.id.clone().expect("id");
    drop(sse);
    for i in 0..6 {
        let r = http
            .post("/v1/runs/r/events?session=s", &delta(&format!("{i}")))
            .await;
        assert_eq!(r.code(), 201);
    }

    let mut sse = http.sse("/v1/runs/r/stream?session=s", Some(&cursor)).await;
    let gap = sse.next().await.expect("gap frame");
    assert_eq!(gap.event, "gap");
    assert_eq!(gap.id, None, "the gap frame carries no id");
    let data = gap.json();
    assert_eq!(data["code"], "stream_replay_gap");
    assert_eq!(data["run_id"], "r");
    assert_eq!(data["requested_event_id"], json!(cursor));
    assert_eq!(data["recovery"], "reload_durable_state");
    assert_eq!(sse.next().await, None, "nothing after the gap");

    // The durable state the gap frame points to is complete.
    let read = http.get("/v1/runs/r?session=s").await;
    assert_eq!(read.json()["events"].as_array().map(Vec::len), Some(7));

    // Without a cursor the retained window replays (no gap).
    let mut sse = http.sse("/v1/runs/r/stream?session=s", None).await;
    let window = sse.take(3).await;
    assert_eq!(seqs(&window), vec![json!(4), json!(5), json!(6)]);
}

/// A `Last-Event-ID` that is not an event id (`banana`, LangGraph's `-1`, empty, a bare number,
/// numbers past 64 bits) cannot be placed in the stream: it gets the one gap frame an evicted
/// cursor gets, naming the retained window, never a silent replay (ADR 0356). Reconnecting with
/// the window's latest id then follows the stream from there.
#[tokio::test]
async fn a_malformed_last_event_id_gets_the_gap_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s")).await.code(),
        201
    );
    for i in 0..2 {
        let r = http
            .post("/v1/runs/r/events?session=s", &delta(&format!("{i}")))
            .await;
        assert_eq!(r.code(), 201);
    }
    let mut sse = http.sse("/v1/runs/r/stream?session=s", None).await;
    let window = sse.take(3).await;
    drop(sse);
    let earliest = window[0].id.clone().expect("id");
    let latest = window[2].id.clone().expect("id");

    for cursor in [
        "banana",
        "-1",
        "",
        "123",
        "1-2-3",
        "99999999999999999999999-0",
    ] {
        let mut sse = http.sse("/v1/runs/r/stream?session=s", Some(cursor)).await;
        let gap = sse.next().await.expect("a frame");
        assert_eq!(gap.event, "gap", "{cursor:?}: {gap:?}");
        assert_eq!(gap.id, None);
        assert_eq!(
            gap.json(),
            json!({"code": "stream_replay_gap", "run_id": "r", "requested_event_id": cursor,
                   "earliest_available_event_id": earliest,
                   "latest_available_event_id": latest,
                   "recovery": "reload_durable_state"}),
            "{cursor:?}"
        );
        assert_eq!(sse.next().await, None, "{cursor:?}: nothing after the gap");
    }

    // What the gap frame tells a client to do works: from the latest id, the next event.
    let mut sse = http.sse("/v1/runs/r/stream?session=s", Some(&latest)).await;
    let r = http.post("/v1/runs/r/events?session=s", &delta("2")).await;
    assert_eq!(r.code(), 201);
    assert_eq!(seqs(&sse.take(1).await), vec![json!(3)]);
}

/// A run the store knows whose stream holds nothing (here: the memory bridge restarted with the
/// gateway) is followed like an open stream: the subscriber waits with heartbeats and gets the
/// run's next event, as deer-flow's does. A malformed cursor there has nothing to miss and
/// follows too. An unknown run is still 404.
#[tokio::test]
async fn a_stream_of_a_known_run_with_nothing_published_waits_for_its_first_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Gateway::embedded(dir.path(), &[]);
    assert_eq!(
        first
            .http()
            .post("/v1/runs", &start_body("r", "s"))
            .await
            .code(),
        201
    );
    assert!(first.terminate().success());
    let gw = Gateway::embedded(dir.path(), &["--heartbeat-secs", "1"]);
    let http = gw.http();

    let mut plain = http.sse("/v1/runs/r/stream?session=s", None).await;
    let mut malformed = http
        .sse("/v1/runs/r/stream?session=s", Some("banana"))
        .await;
    plain.heartbeat().await;
    let r = http.post("/v1/runs/r/events?session=s", &delta("hi")).await;
    assert_eq!(r.code(), 201, "{}", r.text);
    for sse in [&mut plain, &mut malformed] {
        let frame = sse.next().await.expect("the run's next event");
        assert_eq!(frame.event, "text.delta");
        assert_eq!(frame.json()["seq"], 1);
    }

    for path in ["/v1/runs/ghost/stream", "/v1/runs/r/stream"] {
        let unknown = http.get(path).await;
        assert_eq!(unknown.code(), 404, "{path}: {}", unknown.text);
        assert_eq!(unknown.json()["error"], "unknown_run", "{path}");
    }
}
