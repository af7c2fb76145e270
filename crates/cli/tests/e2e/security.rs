//! The gateway on a network: tokens and scopes, protected mode, browser safety, clean errors
//! (ADRs 0180–0182, 0184).

use std::path::Path;
use std::time::Duration;

use hyper::Method;
use serde_json::json;

use crate::common::{Gateway, Http, command, start_body};

/// The hex SHA-256 a token file stores, computed by the binary's own command.
pub fn token_entry(dir: &Path, name: &str, args: &[&str]) -> (String, String) {
    let out = command(dir)
        .args(["token", "new", name])
        .args(args)
        .output()
        .expect("token new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let secret = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("# "))
        .expect("the secret line")
        .to_string();
    let entry: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    (secret, entry)
}

/// Tokens `a` (tenant-a*, jobs-*, read+write), `ro` (tenant-a, read) and `ops` (metrics).
pub fn token_file(dir: &Path) -> (std::path::PathBuf, [String; 3]) {
    let (a, ea) = token_entry(dir, "a", &["--namespace", "tenant-a*", "--queue", "jobs-*"]);
    let (ro, ero) = token_entry(
        dir,
        "ro",
        &["--namespace", "tenant-a", "--queue", "*", "--right", "read"],
    );
    let (ops, eops) = token_entry(dir, "ops", &["--right", "metrics"]);
    let path = dir.join("tokens.toml");
    std::fs::write(&path, format!("{ea}{ero}{eops}")).expect("write tokens");
    (path, [a, ro, ops])
}

fn start_in(namespace: &str, run: &str) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&start_body(run, "s")).expect("json");
    body["namespace"] = json!(namespace);
    body.to_string()
}

#[tokio::test]
async fn tokens_guard_every_v1_route_by_right_and_scope() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, ro, ops]) = token_file(dir.path());
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let anon = gw.http();
    let (ha, hro, hops) = (
        anon.with_token(&a),
        anon.with_token(&ro),
        anon.with_token(&ops),
    );

    // Open: health. Everything under /v1 needs a known token.
    assert_eq!(anon.get("/healthz").await.code(), 200);
    for (path, method) in [
        ("/v1/runs", Method::GET),
        ("/v1/runs", Method::POST),
        ("/v1/queues/jobs-1", Method::GET),
        ("/v1/workers", Method::GET),
        ("/v1/runs/r/stream", Method::GET),
    ] {
        let r = anon.request(method.clone(), path, Some("{}")).await;
        assert_eq!(r.code(), 401, "{method} {path}: {}", r.text);
        assert_eq!(r.json()["error"], "unauthenticated");
        assert_eq!(
            r.headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
    }
    let wrong = anon.with_token("sy_not-a-token");
    assert_eq!(wrong.get("/v1/runs?namespace=tenant-a").await.code(), 401);

    // In scope: start and read in tenant-a.
    let started = ha.post("/v1/runs", &start_in("tenant-a", "r1")).await;
    assert_eq!(started.code(), 201, "{}", started.text);
    let read = hro.get("/v1/runs/r1?session=s&namespace=tenant-a").await;
    assert_eq!(read.code(), 200, "{}", read.text);

    // Outside the namespaces: 403, and nothing written.
    let other = ha.post("/v1/runs", &start_in("tenant-b", "r2")).await;
    assert_eq!(other.code(), 403, "{}", other.text);
    assert_eq!(other.json()["error"], "forbidden");
    let default_ns = ha.post("/v1/runs", &start_body("r3", "s3")).await;
    assert_eq!(default_ns.code(), 403, "{}", default_ns.text);
    assert_eq!(ha.get("/v1/runs?namespace=tenant-b").await.code(), 403);
    assert_eq!(
        ha.get("/v1/runs/r1?session=s&namespace=tenant-b")
            .await
            .code(),
        403
    );
    let listed = ha.get("/v1/runs?namespace=tenant-a").await;
    assert_eq!(listed.json()["runs"].as_array().map(Vec::len), Some(1));

    // A read-only token cannot write, even in its namespace.
    let ro_write = hro
        .post(
            "/v1/runs/r1/events?session=s&namespace=tenant-a",
            &crate::common::delta("x"),
        )
        .await;
    assert_eq!(ro_write.code(), 403, "{}", ro_write.text);

    // Queues by glob; workers by automation type against the queues; all workers only with `*`.
    assert_eq!(
        ha.post("/v1/queues/jobs-1/tasks", r#"{"payload": 1}"#)
            .await
            .code(),
        201
    );
    assert_eq!(
        ha.post("/v1/queues/mail/tasks", r#"{"payload": 1}"#)
            .await
            .code(),
        403
    );
    assert_eq!(hro.get("/v1/queues/mail").await.code(), 200);
    assert_eq!(ha.get("/v1/queues/jobs-1").await.json()["waiting"], 1);
    assert_eq!(
        ha.get("/v1/workers?automation_type=jobs-x").await.code(),
        200
    );
    assert_eq!(ha.get("/v1/workers").await.code(), 403);
    assert_eq!(hro.get("/v1/workers").await.code(), 200);

    // /metrics needs the metrics right and shows token names, never secrets.
    assert_eq!(anon.get("/metrics").await.code(), 401);
    assert_eq!(ha.get("/metrics").await.code(), 403);
    let metrics = hops.get("/metrics").await;
    assert_eq!(metrics.code(), 200);
    assert!(
        metrics
            .text
            .contains("switchyard_auth_requests_total{token=\"a\",outcome=\"forbidden\"}"),
        "{}",
        metrics.text
    );
    assert!(!metrics.text.contains(&a) && !metrics.text.contains(&ops));
}

#[tokio::test]
async fn sighup_rereads_the_token_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, _, _]) = token_file(dir.path());
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let (new, entry) = token_entry(dir.path(), "new", &["--namespace", "*"]);
    let hnew = gw.http().with_token(&new);
    assert_eq!(hnew.get("/v1/runs").await.code(), 401);
    std::fs::write(&file, entry).expect("rewrite");
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    // The reload is asynchronous: poll until it took effect (bounded by the test's patience).
    let mut code = 0;
    for _ in 0..200 {
        code = hnew.get("/v1/runs").await.code();
        if code == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(code, 200, "the new token never worked");
    // The old file's token is gone with it.
    assert_eq!(
        gw.http()
            .with_token(&a)
            .get("/v1/runs?namespace=tenant-a")
            .await
            .code(),
        401
    );
}

#[test]
fn non_loopback_listen_without_auth_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = command(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0", "--sqlite"])
        .arg(dir.path().join("db.sqlite"))
        .output()
        .expect("serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--auth FILE") && stderr.contains("--insecure-no-auth"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "it must not have listened");
}

#[tokio::test]
async fn non_loopback_listen_with_auth_or_the_explicit_opt_out_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, _, _]) = token_file(dir.path());
    let db = dir.path().join("db.sqlite");
    let db = db.to_str().expect("path");
    let gw = Gateway::start_listening(
        dir.path(),
        "0.0.0.0:0",
        &["--sqlite", db, "--auth", file.to_str().expect("path")],
    );
    let base = gw.base.replace("0.0.0.0", "127.0.0.1");
    assert_eq!(Http::new(&base).get("/v1/runs").await.code(), 401);
    assert_eq!(
        Http::new(&base)
            .with_token(&a)
            .get("/v1/runs?namespace=tenant-a")
            .await
            .code(),
        200
    );
    let open = Gateway::start_listening(
        dir.path(),
        "0.0.0.0:0",
        &["--sqlite", db, "--insecure-no-auth"],
    );
    let base = open.base.replace("0.0.0.0", "127.0.0.1");
    assert_eq!(Http::new(&base).get("/v1/runs").await.code(), 200);
}

#[tokio::test]
async fn cross_site_writes_without_json_content_type_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    // What a cross-site form or `fetch(..., {mode: "no-cors"})` can send without a preflight.
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|c| vec![("content-type", c)])
            .unwrap_or_default();
        let r = http
            .request_with(
                Method::POST,
                "/v1/runs",
                Some(&start_body("csrf", "s")),
                &headers,
            )
            .await;
        assert_eq!(r.code(), 415, "{content_type:?}: {}", r.text);
        assert_eq!(r.json()["error"], "unsupported_media_type");
    }
    assert_eq!(http.get("/v1/runs/csrf?session=s").await.code(), 404);
    let ok = http
        .request_with(
            Method::POST,
            "/v1/runs",
            Some(&start_body("json", "s")),
            &[("content-type", "application/json; charset=utf-8")],
        )
        .await;
    assert_eq!(ok.code(), 201, "{}", ok.text);
    // No CORS by default: a preflight gets no allow-origin.
    let pre = http
        .request_with(
            Method::OPTIONS,
            "/v1/runs",
            None,
            &[
                ("origin", "https://evil.example"),
                ("access-control-request-method", "POST"),
            ],
        )
        .await;
    assert!(pre.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, "cors_origins = [\"https://app.example\"]\n").expect("config");
    let gw = Gateway::embedded(dir.path(), &["--config", config.to_str().expect("path")]);
    let preflight = |origin: &'static str| {
        let http = gw.http();
        async move {
            http.request_with(
                Method::OPTIONS,
                "/v1/runs",
                None,
                &[
                    ("origin", origin),
                    ("access-control-request-method", "POST"),
                    (
                        "access-control-request-headers",
                        "content-type,authorization",
                    ),
                ],
            )
            .await
        }
    };
    let ok = preflight("https://app.example").await;
    assert_eq!(
        ok.headers
            .get("access-control-allow-origin")
            .and_then(|v| v.to_str().ok()),
        Some("https://app.example")
    );
    let evil = preflight("https://evil.example").await;
    assert!(evil.headers.get("access-control-allow-origin").is_none());
    // A page's stop button cancels a task with DELETE; its rate-limit form PUTs.
    let delete = gw
        .http()
        .request_with(
            Method::OPTIONS,
            "/v1/queues/jobs/tasks/t1",
            None,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "DELETE"),
            ],
        )
        .await;
    let methods = delete
        .headers
        .get("access-control-allow-methods")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    for method in ["GET", "POST", "PUT", "DELETE"] {
        assert!(methods.contains(method), "{method} not in {methods:?}");
    }
}

#[tokio::test]
async fn dns_rebinding_hosts_are_refused_on_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let port = gw.base.rsplit(':').next().expect("port").to_string();
    let evil = format!("evil.example:{port}");
    let r = http
        .request_with(Method::GET, "/v1/runs", None, &[("host", &evil)])
        .await;
    assert_eq!(r.code(), 421, "{}", r.text);
    assert_eq!(r.json()["error"], "host_not_allowed");
    let w = http
        .request_with(
            Method::POST,
            "/v1/runs",
            Some(&start_body("rebound", "s")),
            &[("host", &evil), ("content-type", "application/json")],
        )
        .await;
    assert_eq!(w.code(), 421);
    assert_eq!(http.get("/v1/runs/rebound?session=s").await.code(), 404);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let r = http
            .request_with(Method::GET, "/v1/runs", None, &[("host", &host)])
            .await;
        assert_eq!(r.code(), 200, "{host}: {}", r.text);
    }
}

#[tokio::test]
async fn errors_carry_a_request_id_and_no_panic_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    // An id the client sent is echoed in the header and the body.
    let r = http
        .request_with(
            Method::GET,
            "/v1/runs/nope",
            None,
            &[("x-request-id", "client-42")],
        )
        .await;
    assert_eq!(r.code(), 404);
    assert_eq!(
        r.headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        Some("client-42")
    );
    assert_eq!(r.json()["request_id"], "client-42");
    // A hostile one is replaced.
    let r = http
        .request_with(
            Method::GET,
            "/v1/runs/nope",
            None,
            &[("x-request-id", "a b\"c")],
        )
        .await;
    let id = r.json()["request_id"].as_str().expect("id").to_string();
    assert!(!id.is_empty() && id != "a b\"c");
    // A stale window far past any date: a clean 4xx or 500, never panic text.
    let mut body: serde_json::Value = serde_json::from_str(&start_body("huge", "s")).expect("json");
    body["stale_after_secs"] = json!(10_000_000_000_000u64);
    let r = http.post("/v1/runs", &body.to_string()).await;
    let text = r.text.to_lowercase();
    assert!(r.code() == 500 || r.code() == 422, "{}", r.text);
    for leak in ["overflow", "panick", "timedelta", "task"] {
        assert!(!text.contains(leak), "{leak} in {}", r.text);
    }
    assert!(r.json()["request_id"].is_string());
}

#[tokio::test]
async fn metrics_public_opens_only_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, _) = token_file(dir.path());
    let gw = Gateway::embedded(
        dir.path(),
        &["--auth", file.to_str().expect("path"), "--metrics-public"],
    );
    let anon = gw.http();
    assert_eq!(anon.get("/metrics").await.code(), 200);
    assert_eq!(anon.get("/v1/runs").await.code(), 401);
}
