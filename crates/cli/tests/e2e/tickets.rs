//! Stream tickets (ADR 0260) over HTTP, without a browser.

use std::time::Duration;

use serde_json::json;

use crate::common::{Gateway, start_body};
use crate::security::token_file;

fn ticket_body(run: &str, namespace: &str) -> String {
    json!({"run_id": run, "session": "s", "namespace": namespace}).to_string()
}

#[tokio::test]
async fn a_ticket_opens_one_runs_stream_as_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, ro, _]) = token_file(dir.path());
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let ha = gw.http().with_token(&a);
    let mut body: serde_json::Value = serde_json::from_str(&start_body("r1", "s")).expect("json");
    body["namespace"] = json!("tenant-a");
    assert_eq!(ha.post("/v1/runs", &body.to_string()).await.code(), 201);

    // A read-only token may ask: a ticket is a read.
    let hro = gw.http().with_token(&ro);
    let issued = hro
        .post("/v1/stream-tickets", &ticket_body("r1", "tenant-a"))
        .await;
    assert_eq!(issued.code(), 201, "{}", issued.text);
    assert_eq!(issued.json()["expires_in"], 60);
    let ticket = issued.json()["ticket"]
        .as_str()
        .expect("ticket")
        .to_string();
    assert_eq!(ticket.len(), 64);

    let plain = gw.http();
    let path = format!("/v1/runs/r1/stream?session=s&namespace=tenant-a&ticket={ticket}");
    let mut sse = plain.sse(&path, None).await;
    assert_eq!(sse.take(1).await[0].event, "run.started");
    drop(sse);
    // Reusable while it lives (the browser reconnects with the same URL).
    drop(plain.sse(&path, None).await);

    // Only for the run, session and namespace it was issued for; never a bearer secret.
    for other in [
        format!("/v1/runs/r2/stream?session=s&namespace=tenant-a&ticket={ticket}"),
        format!("/v1/runs/r1/stream?session=t&namespace=tenant-a&ticket={ticket}"),
        format!("/v1/runs/r1/stream?session=s&namespace=tenant-ab&ticket={ticket}"),
        format!(
            "/v1/runs/r1/stream?session=s&namespace=tenant-a&namespace=tenant-a&ticket={ticket}"
        ),
        format!("/v1/runs/r1/stream?session=s&namespace=tenant-a&ticket={ro}"),
        "/v1/runs/r1/stream?session=s&namespace=tenant-a".to_string(),
    ] {
        let refused = plain.get(&other).await;
        assert_eq!(refused.code(), 401, "{other}: {}", refused.text);
    }
    // A ticket opens streams only: other routes still need the bearer header.
    assert_eq!(
        plain
            .get(&format!(
                "/v1/runs/r1?session=s&namespace=tenant-a&ticket={ticket}"
            ))
            .await
            .code(),
        401
    );
    // Out of the token's namespaces: no ticket; no token: no ticket.
    assert_eq!(
        hro.post("/v1/stream-tickets", &ticket_body("r1", "tenant-b"))
            .await
            .code(),
        403
    );
    assert_eq!(
        plain
            .post("/v1/stream-tickets", &ticket_body("r1", "tenant-a"))
            .await
            .code(),
        401
    );

    // The token leaves the file (SIGHUP): its tickets stop working.
    std::fs::write(&file, "").expect("empty the token file");
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    // The reload is asynchronous: wait until the token itself is refused (a plain read, which
    // cannot hang like a stream that is let in would).
    let mut code = 0;
    for _ in 0..200 {
        code = hro.get("/v1/runs?namespace=tenant-a").await.code();
        if code == 401 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(code, 401, "the token file was never re-read");
    let refused = plain.get(&path).await;
    assert_eq!(
        refused.code(),
        401,
        "the removed token's ticket still opened the stream"
    );
}

#[tokio::test]
async fn without_auth_there_are_no_tickets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let r = gw
        .http()
        .post("/v1/stream-tickets", &ticket_body("r1", "ns"))
        .await;
    assert_eq!(r.code(), 404, "{}", r.text);
    assert_eq!(r.json()["error"], "no_auth");
}
