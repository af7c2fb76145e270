//! What one client can do to the others at the gateway's edge (ADR 0354): a revoked token's
//! held requests end, one token's stream tickets and streams are capped per token, one peer's
//! silent sockets cannot starve `/healthz` or other clients, and SIGHUP never ends a gateway.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::common::{Gateway, PATIENCE, delta, eventually, start_body};
use crate::security::{token_entry, token_file};

fn start_in(namespace: &str, run: &str) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&start_body(run, "s")).expect("json");
    body["namespace"] = json!(namespace);
    body.to_string()
}

fn ticket_body(run: &str) -> String {
    json!({"run_id": run, "session": "s", "namespace": "tenant-a"}).to_string()
}

fn hup(gw: &Gateway) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success(), "kill -HUP failed");
}

/// A token-file entry of `token new` with one line replaced (same name, same secret).
fn with_line(entry: &str, key: &str, line: &str) -> String {
    let mut replaced = false;
    let out: String = entry
        .lines()
        .map(|l| {
            if l.starts_with(key) {
                replaced = true;
                format!("{line}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(replaced, "no {key} line in {entry}");
    out
}

fn with_limits(dir: &Path, limits: &str, extra: &[&str]) -> Gateway {
    let config = dir.join("switchyard.toml");
    std::fs::write(&config, format!("[limits]\n{limits}")).expect("config");
    let mut args = vec!["--config", config.to_str().expect("path")];
    args.extend_from_slice(extra);
    Gateway::embedded(dir, &args)
}

#[tokio::test]
async fn revoking_a_token_ends_its_streams_tickets_and_long_polls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, ea) = token_entry(
        dir.path(),
        "a",
        &["--namespace", "tenant-a*", "--queue", "jobs-*"],
    );
    let (ro, ero) = token_entry(
        dir.path(),
        "ro",
        &["--namespace", "tenant-a", "--queue", "*", "--right", "read"],
    );
    let (b, eb) = token_entry(
        dir.path(),
        "b",
        &["--namespace", "tenant-a*", "--queue", "jobs-*"],
    );
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, format!("{ea}{ero}{eb}")).expect("tokens");
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let plain = gw.http();
    let (ha, hro, hb) = (
        plain.with_token(&a),
        plain.with_token(&ro),
        plain.with_token(&b),
    );
    assert_eq!(
        hb.post("/v1/runs", &start_in("tenant-a", "r1"))
            .await
            .code(),
        201
    );
    let stream = "/v1/runs/r1/stream?session=s&namespace=tenant-a";

    // Held before the reload: a bearer stream of `ro`, a ticket stream of `a`, a stream of `b`
    // (which stays in force), and a long poll of `a`.
    let mut by_ro = hro.sse(stream, None).await;
    assert_eq!(by_ro.take(1).await[0].event, "run.started");
    let issued = ha.post("/v1/stream-tickets", &ticket_body("r1")).await;
    assert_eq!(issued.code(), 201, "{}", issued.text);
    let ticket = issued.json()["ticket"]
        .as_str()
        .expect("ticket")
        .to_string();
    let mut by_ticket = plain.sse(&format!("{stream}&ticket={ticket}"), None).await;
    assert_eq!(by_ticket.take(1).await[0].event, "run.started");
    let mut by_b = hb.sse(stream, None).await;
    assert_eq!(by_b.take(1).await[0].event, "run.started");
    let poll = {
        let ha = ha.clone();
        tokio::spawn(async move {
            ha.post("/v1/queues/jobs-1/reservations", r#"{"wait_seconds": 30}"#)
                .await
        })
    };
    // Give the poll time to reach its wait (an ordering guard, not a timing assertion).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !poll.is_finished(),
        "the long poll answered with nothing due"
    );

    // The reload: `ro` leaves the file; `a` keeps its name and secret but loses `write` and
    // its namespaces no longer cover tenant-a, so it admits neither its ticket nor its poll.
    let a_after = with_line(&ea, "namespaces", r#"namespaces = ["tenant-b"]"#);
    let a_after = with_line(&a_after, "rights", r#"rights = ["read"]"#);
    std::fs::write(&file, format!("{a_after}{eb}")).expect("tokens");
    hup(&gw);
    let mut code = 0;
    for _ in 0..400 {
        code = hro.get("/v1/runs?namespace=tenant-a").await.code();
        if code == 401 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(code, 401, "the token file was never re-read");

    // The poll answers 401 as soon as the reload lands, and a task submitted after the
    // revocation stays for a token in force.
    let answered = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the revoked token's long poll is still waiting")
        .expect("poll task");
    assert_eq!(answered.code(), 401, "{}", answered.text);
    let body = answered.json();
    assert_eq!(body["error"], "unauthenticated", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("revoked"))
    );
    assert_eq!(
        answered
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    let submitted = hb
        .post("/v1/queues/jobs-1/tasks", r#"{"payload": {"n": 1}}"#)
        .await;
    assert_eq!(submitted.code(), 201, "{}", submitted.text);
    let reserved = hb
        .post("/v1/queues/jobs-1/reservations", r#"{"wait_seconds": 0}"#)
        .await;
    assert_eq!(reserved.code(), 200, "{}", reserved.text);
    assert_eq!(
        reserved.json()["tasks"].as_array().map(Vec::len),
        Some(1),
        "the task went elsewhere: {}",
        reserved.text
    );

    // An event appended after the reload reaches `b` only; the revoked streams read an end
    // frame with the reason instead, then end.
    let appended = hb
        .post(
            "/v1/runs/r1/events?session=s&namespace=tenant-a",
            &delta("after"),
        )
        .await;
    assert_eq!(appended.code(), 201, "{}", appended.text);
    for (who, sse) in [("bearer", &mut by_ro), ("ticket", &mut by_ticket)] {
        let end = sse.next().await.expect("an end frame");
        assert_eq!(end.event, "end", "{who} stream: {end:?}");
        assert_eq!(end.json(), json!({"reason": "token_revoked"}), "{who}");
        assert!(end.id.is_none());
        assert_eq!(sse.next().await, None, "{who} stream went on");
    }
    let event = by_b.next().await.expect("b's stream goes on");
    assert_eq!(event.event, "text.delta", "{event:?}");

    // The revoked ones cannot come back: no stream (the ticket's token no longer covers the
    // run's namespace), no reservation.
    assert_eq!(hro.get(stream).await.code(), 401);
    assert_eq!(
        plain.get(&format!("{stream}&ticket={ticket}")).await.code(),
        403
    );
    assert_eq!(
        ha.post("/v1/queues/jobs-1/reservations", "{}").await.code(),
        403
    );
}

#[tokio::test]
async fn one_token_at_its_ticket_and_stream_quota_leaves_the_others_theirs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, ro, _]) = token_file(dir.path());
    // The defaults: 100 live tickets and 64 open streams per token.
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let plain = gw.http();
    let (ha, hro) = (plain.with_token(&a), plain.with_token(&ro));
    assert_eq!(
        ha.post("/v1/runs", &start_in("tenant-a", "r1"))
            .await
            .code(),
        201
    );

    for i in 0..100 {
        let r = hro.post("/v1/stream-tickets", &ticket_body("r1")).await;
        assert_eq!(r.code(), 201, "ticket {i}: {}", r.text);
    }
    let refused = hro.post("/v1/stream-tickets", &ticket_body("r1")).await;
    assert_eq!(refused.code(), 429, "{}", refused.text);
    let body = refused.json();
    assert_eq!(body["error"], "ticket_quota_exceeded", "{body}");
    assert_eq!(body["limit"], 100, "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_tickets_per_token"))
    );
    let retry: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    // Another token is not affected.
    let other = ha.post("/v1/stream-tickets", &ticket_body("r1")).await;
    assert_eq!(other.code(), 201, "{}", other.text);

    let stream = "/v1/runs/r1/stream?session=s&namespace=tenant-a";
    let mut open = Vec::new();
    for _ in 0..64 {
        open.push(hro.sse(stream, None).await);
    }
    let refused = hro.get(stream).await;
    assert_eq!(refused.code(), 429, "{}", refused.text);
    assert_eq!(refused.json()["error"], "stream_quota_exceeded");
    assert_eq!(refused.json()["limit"], 64);
    assert!(refused.headers.get("retry-after").is_some());
    let mut by_a = ha.sse(stream, None).await;
    assert_eq!(by_a.take(1).await[0].event, "run.started");
    // A stream closed gives its place back to its token.
    open.truncate(63);
    let mut admitted = false;
    for _ in 0..100 {
        // A refused stream answers at once; an admitted one never ends by itself.
        match tokio::time::timeout(Duration::from_millis(500), hro.get(stream)).await {
            Ok(r) => assert_eq!(r.code(), 429, "{}", r.text),
            Err(_) => {
                admitted = true;
                break;
            }
        }
    }
    assert!(admitted, "a closed stream never gave its place back");
    drop(by_a);
}

/// Everything the server sends until it closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut out))
        .await
        .expect("the server never closed the connection")
        .ok();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn silent_sockets_of_one_peer_cannot_starve_health_or_other_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Silent sockets would be held for a minute; the cap is 16.
    let gw = with_limits(
        dir.path(),
        "max_connections = 16\nmax_pending_per_ip = 4\nheader_read_secs = 60\n",
        &[],
    );
    let addr = gw.base.trim_start_matches("http://").to_string();
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    let http = gw.http();
    // The gateway takes the flood off its accept queue at its own pace (slowly on a loaded
    // machine): until it has, a new connection may still meet the cap. Once it has, the flood
    // holds at most its per-peer share and everything else is served; without the per-peer cap
    // the silent sockets would hold every slot for the whole 60 s head deadline.
    eventually("/healthz served beside the flood", || async {
        http.get("/healthz").await.code() == 200
    })
    .await;
    eventually("a run started beside the flood", || async {
        http.post("/v1/runs", &start_body("r1", "s")).await.code() == 201
    })
    .await;
    assert_eq!(http.get("/v1/runs/r1?session=s").await.code(), 200);
    // The flood only churned its own sockets: the oldest were closed without an answer.
    assert_eq!(read_to_close(&mut silent[0]).await, "");
}

#[tokio::test]
async fn a_full_gateway_still_answers_its_probes_from_the_health_reserve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = with_limits(
        dir.path(),
        "max_connections = 2\nhealth_connections = 1\n",
        &[],
    );
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r1", "s")).await.code(),
        201
    );
    // Two streams in progress take both connections.
    let streams = [
        http.sse("/v1/runs/r1/stream?session=s", None).await,
        http.sse("/v1/runs/r1/stream?session=s", None).await,
    ];
    let health = http.get("/healthz").await;
    assert_eq!(health.code(), 200, "{}", health.text);
    // A reserve connection closes after its answer; the next probe may come before its place
    // is given back (then it reads the listener's own 503), as a prober's retry would.
    let mut ready = 0;
    for _ in 0..50 {
        ready = http.get("/readyz").await.code();
        if ready == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ready, 200);
    let busy = http.get("/v1/runs/r1?session=s").await;
    assert_eq!(busy.code(), 503, "{}", busy.text);
    assert_eq!(busy.json()["error"], "too_many_connections");
    assert!(busy.headers.get("retry-after").is_some());
    drop(streams);
}

#[tokio::test]
async fn sighup_without_auth_leaves_the_gateway_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let addr = gw.base.trim_start_matches("http://").to_string();
    hup(&gw);
    hup(&gw);
    // The signal is handled asynchronously: give a default action the time it would need.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        TcpStream::connect(&addr).await.is_ok(),
        "the gateway died of SIGHUP"
    );
    assert_eq!(gw.http().get("/healthz").await.code(), 200);
    assert_eq!(
        gw.http()
            .post("/v1/runs", &start_body("r1", "s"))
            .await
            .code(),
        201
    );
}
