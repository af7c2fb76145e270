//! `/readyz` answers 200 when every backend answers, 503 naming the ones that do not.

use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, PATIENCE};

#[tokio::test]
async fn readyz_is_200_on_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let r = gw.http().get("/readyz").await;
    assert_eq!(r.code(), 200, "{}", r.text);
    assert_eq!(r.json()["status"], "ready");
}

#[tokio::test]
async fn readyz_names_the_backends_that_do_not_answer() {
    let mut redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    // Every port on this one Redis.
    let gw = Gateway::start_in(dir.path(), &["--redis", &url, "--ready-timeout-ms", "500"]);
    let http = gw.http();
    let r = http.get("/readyz").await;
    assert_eq!(r.code(), 200, "{}", r.text);

    redis.kill();
    let r = http.get("/readyz").await;
    assert_eq!(r.code(), 503, "{}", r.text);
    let body = r.json();
    assert_eq!(body["status"], "not_ready");
    let failed = body["failed"].as_object().expect("failed ports");
    let mut names: Vec<&str> = failed.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["event_store", "fleet", "stream_bridge"]);
    assert!(
        !r.text.contains(&redis.port().to_string()) && !r.text.contains("redis://"),
        "no address or credentials in the body: {}",
        r.text
    );
    // Liveness is not readiness.
    assert_eq!(http.get("/healthz").await.code(), 200);

    redis.restart().expect("restart redis");
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let r = http.get("/readyz").await;
        if r.code() == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never ready again: {}",
            r.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
