//! Nothing acknowledged is lost with tokens and limits on: the gateway SIGKILLed under load (SQLite),
//! and Redis killed and restarted under load. Error bodies during the outage leak no internals.

use std::path::Path;

use serde_json::{Value, json};
use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, Http, delta, eventually, start_body};
use crate::security::token_entry;

const WRITERS: usize = 4;

/// A token file with one read+write token on the default namespace and every queue; its secret.
fn tokens(dir: &Path) -> String {
    let (secret, entry) = token_entry(dir, "load", &["--namespace", "", "--queue", "*"]);
    std::fs::write(dir.join("tokens.toml"), entry).expect("tokens");
    secret
}

/// A gateway with the token file of [`tokens`] and small limits.
fn guarded(dir: &Path, backend: &[&str]) -> Gateway {
    let tokens = dir.join("tokens.toml");
    let config = dir.join("switchyard.toml");
    std::fs::write(
        &config,
        "[limits]\nmax_body_bytes = 65536\nrequest_secs = 10\nmax_connections = 64\nmax_streams = 8\n",
    )
    .expect("config");
    let mut args = vec![
        "--config",
        config.to_str().expect("path"),
        "--auth",
        tokens.to_str().expect("path"),
    ];
    args.extend_from_slice(backend);
    Gateway::start_in(dir, &args)
}

/// Appends to `run` until `stop` flips; returns the texts acknowledged with 201 and every error
/// body seen.
async fn write_until(
    http: Http,
    run: String,
    stop: tokio::sync::watch::Receiver<bool>,
) -> (Vec<String>, Vec<String>) {
    let (mut acked, mut errors) = (Vec::new(), Vec::new());
    let mut i = 0u64;
    while !*stop.borrow() {
        let text = format!("{run}-{i}");
        i += 1;
        match http
            .try_post(
                &format!("/v1/runs/{run}/events?session={run}"),
                &delta(&text),
            )
            .await
        {
            Some(r) if r.code() == 201 => acked.push(text),
            Some(r) => errors.push(r.text),
            None => {}
        }
    }
    (acked, errors)
}

fn texts(read: &Value) -> Vec<String> {
    read["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e["payload"]["text"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_sigkill_under_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("switchyard.db");
    let db = db.to_str().expect("path").to_string();
    let secret = tokens(dir.path());
    let gw = guarded(dir.path(), &["--sqlite", &db]);
    let http = gw.http().with_token(&secret);
    for w in 0..WRITERS {
        let run = format!("w{w}");
        assert_eq!(
            http.post("/v1/runs", &start_body(&run, &run)).await.code(),
            201
        );
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write_until(http.clone(), format!("w{w}"), rx.clone())))
        .collect();
    // Let some writes land, then kill the gateway mid-flight.
    eventually("20 events on w0", || async {
        http.get("/v1/runs/w0?session=w0").await.json()["events"]
            .as_array()
            .map_or(0, Vec::len)
            >= 20
    })
    .await;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &gw.pid().to_string()])
        .status()
        .expect("kill -KILL");
    assert!(status.success());
    tx.send(true).expect("stop");
    let mut acked = Vec::new();
    for w in writers {
        acked.push(w.await.expect("writer").0);
    }
    drop(gw);
    let again = guarded(dir.path(), &["--sqlite", &db]);
    let http = again.http().with_token(&secret);
    for (w, acked) in acked.iter().enumerate() {
        assert!(!acked.is_empty());
        let stored = texts(
            &http
                .get(&format!("/v1/runs/w{w}?session=w{w}"))
                .await
                .json(),
        );
        for text in acked {
            assert!(stored.contains(text), "acknowledged {text} was lost");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restart_under_load_loses_nothing_and_leaks_nothing() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = tokens(dir.path());
    let gw = guarded(dir.path(), &["--redis", &url]);
    let http = gw.http().with_token(&secret);
    for w in 0..WRITERS {
        let run = format!("w{w}");
        assert_eq!(
            http.post("/v1/runs", &start_body(&run, &run)).await.code(),
            201
        );
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write_until(http.clone(), format!("w{w}"), rx.clone())))
        .collect();
    redis.kill();
    // While Redis is down, every write fails cleanly.
    let down = http
        .post("/v1/runs/w0/events?session=w0", &delta("down"))
        .await;
    assert_eq!(down.code(), 503, "{}", down.text);
    redis.restart().expect("restart redis");
    // Until writes land again.
    eventually("writes land after the restart", || async {
        http.post("/v1/runs/w0/events?session=w0", &delta("up"))
            .await
            .code()
            == 201
    })
    .await;
    tx.send(true).expect("stop");
    let mut errors = vec![down.text];
    let mut acked = Vec::new();
    for w in writers {
        let (a, e) = w.await.expect("writer");
        acked.push(a);
        errors.extend(e);
    }
    for (w, acked) in acked.iter().enumerate() {
        let stored = texts(
            &http
                .get(&format!("/v1/runs/w{w}?session=w{w}"))
                .await
                .json(),
        );
        for text in acked {
            assert!(stored.contains(text), "acknowledged {text} was lost");
        }
    }
    // Error bodies name the kind and a request id, never keys, scripts or addresses.
    let port = redis.port().to_string();
    for body in &errors {
        let e: Value = serde_json::from_str(body).unwrap_or_else(|_| json!({"raw": body}));
        assert!(
            e["error"].is_string() && e["request_id"].is_string(),
            "{body}"
        );
        for leak in [
            "agentdeck",
            "deerflow",
            "fleet:",
            "user_script",
            "redis://",
            "NOSCRIPT",
            &port,
        ] {
            assert!(!body.contains(leak), "{leak} leaked in {body}");
        }
    }
}
