//! SIGTERM: live SSE streams end cleanly (no end frame, so clients reconnect), the process exits 0
//! and every acknowledged write is still there after a restart.

use crate::common::{Gateway, delta, start_body};

#[tokio::test]
async fn sigterm_ends_live_streams_cleanly_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s")).await.code(),
        201
    );
    let mut sse = http.sse("/v1/runs/r/stream?session=s", None).await;
    assert_eq!(
        sse.next().await.map(|f| f.event),
        Some("run.started".into())
    );
    let appended = http
        .post("/v1/runs/r/events?session=s", &delta("acked"))
        .await;
    assert_eq!(appended.code(), 201);
    assert_eq!(sse.next().await.map(|f| f.event), Some("text.delta".into()));

    let status = gw.terminate();
    assert!(status.success(), "exit status {status:?}");
    // The body ends cleanly (no transport error), and without an end frame: the run is not over.
    assert_eq!(sse.next().await, None);

    let gw = Gateway::embedded(dir.path(), &[]);
    let read = gw.http().get("/v1/runs/r?session=s").await;
    assert_eq!(read.code(), 200);
    let events = read.json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1]["payload"]["text"], "acked");
    assert_eq!(read.json()["status"], "running");
}
