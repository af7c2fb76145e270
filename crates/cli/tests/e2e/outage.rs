//! A gateway whose Redis is down answers at once: a queue push (the fleet backend) and a run
//! start (the event store) get `503 unavailable` with `Retry-After: 1` within about two seconds,
//! instead of waiting out command timeouts (a run start used to wait its whole 30 s request
//! deadline); once Redis is back both succeed again without a restart (ADR 0355).

use std::time::{Duration, Instant};

use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, Http, Resp, eventually, start_body};

/// Far under the 10 s command timeout of the fleet and the 30 s request deadline, with room for
/// a slow machine.
const FAST: Duration = Duration::from_secs(2);

const PUSH: &str = "/v1/queues/q/tasks";
const TASK: &str = r#"{"payload":{}}"#;

/// POSTs `body` to `path`, timing the answer.
async fn timed_post(http: &Http, path: &str, body: &str) -> (Resp, Duration) {
    let began = Instant::now();
    let resp = http.post(path, body).await;
    (resp, began.elapsed())
}

fn assert_fast_503(what: &str, resp: &Resp, took: Duration) {
    assert_eq!(resp.code(), 503, "{what}: {}", resp.text);
    assert_eq!(resp.json()["error"], "unavailable", "{what}: {}", resp.text);
    assert_eq!(
        resp.headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1"),
        "{what}: {:?}",
        resp.headers
    );
    assert!(took < FAST, "{what} answered after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_gets_503_at_once_and_the_gateway_recovers_after_restart() {
    let mut redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::start_in(dir.path(), &["--redis", &redis.url()]);
    let http = gw.http();
    assert_eq!(http.post(PUSH, TASK).await.code(), 201);
    assert_eq!(
        http.post("/v1/runs", &start_body("before", "s-before"))
            .await
            .code(),
        201
    );

    redis.kill();
    // Each request twice: the first may meet connections that have not seen the kill yet.
    for round in 0..2 {
        let (resp, took) = timed_post(&http, PUSH, TASK).await;
        assert_fast_503(&format!("push {round}"), &resp, took);
        let run = format!("down-{round}");
        let (resp, took) = timed_post(&http, "/v1/runs", &start_body(&run, &run)).await;
        assert_fast_503(&format!("run start {round}"), &resp, took);
    }

    redis.restart().expect("restart redis");
    eventually("a push succeeds after the restart", || async {
        http.post(PUSH, TASK).await.code() == 201
    })
    .await;
    let mut attempt = 0;
    eventually("a run starts after the restart", || {
        attempt += 1;
        // A fresh run each time: a failed attempt's outcome is unknown.
        let body = start_body(&format!("after-{attempt}"), &format!("s-after-{attempt}"));
        let http = http.clone();
        async move { http.post("/v1/runs", &body).await.code() == 201 }
    })
    .await;
}
