//! The gateway restarted mid-stream on Redis: the page reconnects with `Last-Event-ID`.

use std::sync::Arc;

use serde_json::json;
use switchyard_conformance::harness::RedisServer;

use crate::browser::Browser;
use crate::common::{Gateway, delta, start_body};
use crate::runs::append;

/// The page follows a run; its gateway stops (SIGTERM ends the stream without an end frame) and
/// a new one starts on the same port and Redis. An event appended while the page is away and
/// one appended after it is back both show, every event exactly once, and the page never had
/// to drop a replayed duplicate: the browser resumed after its last id.
pub async fn gateway_restart_mid_stream(b: Arc<Browser>) {
    let redis = RedisServer::start()
        .expect("redis-server (see docs/testing.md: `apt-get install -y redis-server`)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Gateway::start_in(dir.path(), &["--redis", &url]);
    let listen = first
        .base
        .strip_prefix("http://")
        .expect("http base")
        .to_string();
    let http = first.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-rs", "s-rs"))
            .await
            .code(),
        201
    );
    let text = |t: &str| serde_json::from_str(&delta(t)).expect("json");
    append(&http, "r-rs", "s-rs", text("one")).await;
    b.goto(&format!("{}/#/run/r-rs?session=s-rs", first.base))
        .await;
    b.text_when("#live", |t| t == "live").await;
    append(&http, "r-rs", "s-rs", text(" two")).await;
    b.text_when("#timeline .message", |t| t == "one two").await;
    // The first stream replays what the page had already read from the store; those are dropped
    // by seq. A Last-Event-ID resume adds no more.
    let duplicates = b
        .client
        .execute(
            "return document.getElementById('timeline').dataset.duplicates || '0';",
            vec![],
        )
        .await
        .expect("duplicates");

    let status = first.terminate();
    assert!(status.success(), "the gateway exits cleanly: {status:?}");
    b.text_when("#live", |t| t == "reconnecting…").await;
    let second = Gateway::start_listening(dir.path(), &listen, &["--redis", &url]);
    let http = second.http();
    append(&http, "r-rs", "s-rs", text(" three")).await;
    b.text_when("#timeline .message", |t| t == "one two three")
        .await;
    b.text_when("#live", |t| t == "live").await;
    append(&http, "r-rs", "s-rs", text(" four")).await;
    append(
        &http,
        "r-rs",
        "s-rs",
        json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1,
               "output_tokens": 4, "usd": null}}),
    )
    .await;
    b.text_when("#run-status", |t| t == "completed").await;
    b.text_when("#timeline .message", |t| t == "one two three four")
        .await;
    let seen = b
        .client
        .execute(
            "const t = document.getElementById('timeline'); \
             return [[...t.children].map(li => +li.dataset.seq), t.dataset.duplicates || '0', t.dataset.streams];",
            vec![],
        )
        .await
        .expect("timeline");
    assert_eq!(
        seen,
        json!([[0, 1, 5], duplicates, "1"]),
        "each event once, one EventSource that resumed after its last id"
    );
    // Chromium logs the stream's broken and refused connections while the gateway is away.
    b.assert_clean_console(&["/stream"]).await;
}
