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
    // The session line's refresh failed while the gateway was away and reads again now.
    b.text_when("#line-runs", |t| t == "No run waits for this session.")
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
    // Chromium logs the stream's broken and refused connections while the gateway is away, and
    // the session line's refreshes refused meanwhile.
    b.assert_clean_console(&["/stream", "/line"]).await;
}

/// Events the page missed are trimmed from the stream while its gateway is away (retention 3;
/// they are appended through another gateway on the same Redis). When the page comes back with
/// its last id, the gateway sends a gap frame: the page reads the missing events from the store,
/// opens a new stream and goes on live, every event shown once.
pub async fn gap_reloads_from_the_store(b: Arc<Browser>) {
    let redis = RedisServer::start()
        .expect("redis-server (see docs/testing.md: `apt-get install -y redis-server`)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let args = ["--redis", url.as_str(), "--stream-retention", "3"];
    let first = Gateway::start_in(dir.path(), &args);
    let listen = first
        .base
        .strip_prefix("http://")
        .expect("http base")
        .to_string();
    let helper = Gateway::start_in(dir.path(), &args);
    let http = helper.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-gap", "s-gap"))
            .await
            .code(),
        201
    );
    let text = |t: &str| serde_json::from_str(&delta(t)).expect("json");
    append(&http, "r-gap", "s-gap", text("a")).await;
    b.goto(&format!("{}/#/run/r-gap?session=s-gap", first.base))
        .await;
    b.text_when("#live", |t| t == "live").await;
    b.text_when("#timeline .message", |t| t == "a").await;

    assert!(first.terminate().success());
    b.text_when("#live", |t| t == "reconnecting…").await;
    for t in ["b", "c", "d", "e"] {
        append(&http, "r-gap", "s-gap", text(t)).await;
    }
    let second = Gateway::start_listening(dir.path(), &listen, &args);
    b.text_when("#timeline .message", |t| t == "abcde").await;
    b.text_when("#live", |t| t == "live").await;
    append(&second.http(), "r-gap", "s-gap", text("f")).await;
    b.text_when("#timeline .message", |t| t == "abcdef").await;
    let seen = b
        .client
        .execute(
            "const t = document.getElementById('timeline'); \
             return [[...t.children].map(li => +li.dataset.seq), t.dataset.streams];",
            vec![],
        )
        .await
        .expect("timeline");
    assert_eq!(
        seen,
        json!([[0, 1], "2"]),
        "one entry per message, a second stream after the gap"
    );
    // A refresh of the session line may also meet the stopped gateway.
    b.assert_clean_console(&["/stream", "/line"]).await;
}
