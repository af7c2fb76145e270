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
