//! Limits and timeouts of the listener (ADR 0183): silent sockets are closed and capped, slow
//! bodies time out, large bodies get a JSON 413, the stream cap answers 503; and TLS.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Gateway, PATIENCE, start_body};

fn with_limits(dir: &Path, limits: &str) -> Gateway {
    let config = dir.join("switchyard.toml");
    std::fs::write(&config, format!("[limits]\n{limits}")).expect("config");
    Gateway::embedded(dir, &["--config", config.to_str().expect("path")])
}

fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_string()
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
async fn silent_sockets_are_capped_and_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Four connections and one of the health reserve (ADR 0354), all taken by silent sockets.
    let gw = with_limits(
        dir.path(),
        "max_connections = 4\nhealth_connections = 1\nheader_read_secs = 1\n",
    );
    let mut silent = Vec::new();
    for _ in 0..5 {
        silent.push(TcpStream::connect(addr(&gw)).await.expect("connect"));
    }
    // Wait until all five hold a slot: a sixth connection is then refused with a JSON 503.
    let mut refused = String::new();
    for _ in 0..100 {
        let mut sixth = TcpStream::connect(addr(&gw)).await.expect("connect");
        let _ = sixth
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await;
        refused = read_to_close(&mut sixth).await;
        if refused.starts_with("HTTP/1.1 503") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    assert!(refused.contains("too_many_connections"), "{refused}");
    // The silent sockets are closed by the server (header-read timeout), freeing the slots.
    for s in &mut silent {
        assert_eq!(read_to_close(s).await, "");
    }
    assert_eq!(gw.http().get("/healthz").await.code(), 200);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = with_limits(dir.path(), "idle_secs = 1\nheader_read_secs = 600\n");
    let mut s = TcpStream::connect(addr(&gw)).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("write");
    // The answer, then the server closes the kept-alive connection once it sat idle (long before
    // the head timeout).
    let text = read_to_close(&mut s).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"ok\""), "{text}");
}

#[tokio::test]
async fn slow_bodies_time_out_with_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = with_limits(dir.path(), "request_secs = 1\n");
    let mut s = TcpStream::connect(addr(&gw)).await.expect("connect");
    s.write_all(
        b"POST /v1/runs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 100000\r\n\r\n{\"run_id\": ",
    )
    .await
    .expect("write");
    // The client stalls; the server answers and does not wait for the rest.
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(PATIENCE, s.read(&mut buf))
        .await
        .expect("no answer to a stalled body")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("\"timed_out\""), "{text}");
    assert!(text.contains("request_secs"), "{text}");
}

#[tokio::test]
async fn bodies_over_the_limit_get_a_json_413_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let big = format!("{{\"payload\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let r = http.post("/v1/queues/q/tasks", &big).await;
    assert_eq!(r.code(), 413);
    assert_eq!(r.json()["error"], "body_too_large");
    assert_eq!(r.json()["limit"], 2 * 1024 * 1024);
    assert!(
        r.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("2097152"))
    );
    assert_eq!(http.get("/v1/queues/q").await.json()["waiting"], 0);
}

#[tokio::test]
async fn streams_past_the_cap_get_503() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = with_limits(dir.path(), "max_streams = 1\n");
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r", "s")).await.code(),
        201
    );
    let open = http.sse("/v1/runs/r/stream?session=s", None).await;
    let second = http.get("/v1/runs/r/stream?session=s").await;
    assert_eq!(second.code(), 503, "{}", second.text);
    assert_eq!(second.json()["error"], "too_many_streams");
    assert!(second.headers.get("retry-after").is_some());
    drop(open);
    // Once the first stream is gone (its connection closed), a new one is admitted.
    let mut admitted = false;
    for _ in 0..100 {
        // A refused stream answers at once; an admitted one never ends by itself.
        match tokio::time::timeout(
            Duration::from_millis(500),
            http.get("/v1/runs/r/stream?session=s"),
        )
        .await
        {
            Ok(r) => assert_eq!(r.code(), 503, "{}", r.text),
            Err(_) => {
                admitted = true;
                break;
            }
        }
    }
    assert!(admitted, "the closed stream's slot was never freed");
}

#[tokio::test]
async fn tls_listener_serves_https() {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;
    use rustls_pki_types::ServerName;
    use tokio_rustls::rustls;

    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let (cert_pem, key_pem) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_pem, cert.cert.pem()).expect("write cert");
    std::fs::write(&key_pem, cert.signing_key.serialize_pem()).expect("write key");
    let gw = Gateway::embedded(
        dir.path(),
        &[
            "--tls-cert",
            cert_pem.to_str().expect("path"),
            "--tls-key",
            key_pem.to_str().expect("path"),
        ],
    );
    assert!(gw.base.starts_with("https://"), "{}", gw.base);
    let addr = gw.base.trim_start_matches("https://").to_string();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = TcpStream::connect(&addr).await.expect("connect");
    let tls = connector
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get("/healthz")
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("\"ok\""));

    // Plain HTTP on the TLS port gets no answer it could mistake for ours.
    let mut plain = TcpStream::connect(&addr).await.expect("connect");
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("write");
    let text = read_to_close(&mut plain).await;
    assert!(!text.contains("\"ok\""), "{text}");
}
