//! Starts the real `switchyard` binary and talks HTTP to it.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Guards against a hung read; never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The `SWITCHYARD_…` variables a developer's shell might set; the tests control every backend.
const ENV_VARS: &[&str] = &[
    "SWITCHYARD_LISTEN",
    "SWITCHYARD_SQLITE_PATH",
    "SWITCHYARD_REDIS_URL",
    "SWITCHYARD_POSTGRES_URL",
    "SWITCHYARD_EVENT_STORE_URL",
    "SWITCHYARD_STREAM_BRIDGE_URL",
    "SWITCHYARD_CHECKPOINT_CACHE_URL",
    "SWITCHYARD_FLEET_URL",
    "SWITCHYARD_CONFIG",
    "SWITCHYARD_EVENT_STORE_PREFIX",
    "SWITCHYARD_STREAM_BRIDGE_PREFIX",
    "SWITCHYARD_FLEET_PREFIX",
    "SWITCHYARD_WATCH_QUEUES",
    "SWITCHYARD_AUTH_FILE",
    "SWITCHYARD_STREAM_GRACE_SECS",
    "SWITCHYARD_STREAM_RUN_BYTES",
    "SWITCHYARD_STREAM_TOTAL_BYTES",
    "SWITCHYARD_READY_TIMEOUT_MS",
    "SWITCHYARD_SERVER",
    "SWITCHYARD_TOKEN",
];

/// A `switchyard` command with a clean environment, run in `dir`.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    for var in ENV_VARS {
        cmd.env_remove(var);
    }
    cmd.env("SWITCHYARD_LOG", "warn").current_dir(dir);
    cmd
}

/// One gateway process.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    pub base: String,
}

impl Gateway {
    /// `switchyard serve --listen 127.0.0.1:0 <args>` in `dir`; waits for its listening line.
    pub fn start_in(dir: &Path, args: &[&str]) -> Gateway {
        Gateway::start_listening(dir, "127.0.0.1:0", args)
    }

    /// `switchyard serve --listen <listen> <args>` in `dir`; waits for its listening line.
    pub fn start_listening(dir: &Path, listen: &str, args: &[&str]) -> Gateway {
        let mut cmd = command(dir);
        cmd.args(["serve", "--listen", listen])
            .args(args)
            .stderr(Stdio::inherit());
        Gateway::spawn(cmd)
    }

    /// Spawns `cmd`, a `serve` command, with its stdout piped, and waits for its listening line.
    pub fn spawn(mut cmd: Command) -> Gateway {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn switchyard");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let base = line
            .trim()
            .strip_prefix("switchyard listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Gateway { child, base }
    }

    /// The embedded default on `db` (a SQLite file).
    pub fn embedded(dir: &Path, extra: &[&str]) -> Gateway {
        let db = dir.join("switchyard.db");
        let db = db.to_str().expect("utf-8 path").to_string();
        let mut args = vec!["--sqlite", db.as_str()];
        args.extend_from_slice(extra);
        Gateway::start_in(dir, &args)
    }

    pub fn http(&self) -> Http {
        Http::new(&self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process and returns what it wrote to stderr (which the caller piped).
    pub fn kill_and_read_stderr(mut self) -> String {
        let _ = self.child.kill();
        let mut log = String::new();
        self.child
            .stderr
            .take()
            .expect("stderr piped")
            .read_to_string(&mut log)
            .expect("the log");
        log
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success(), "kill failed");
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gateway did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn code(&self) -> u16 {
        self.status.as_u16()
    }
}

/// A tiny HTTP/1 client. Writes say `Content-Type: application/json`, as the gateway requires.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    /// Sent with every request (e.g. `authorization`).
    always: Vec<(String, String)>,
}

impl Http {
    pub fn new(base: &str) -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: base.to_string(),
            always: Vec::new(),
        }
    }

    /// The same client sending `Authorization: Bearer <secret>`.
    pub fn with_token(&self, secret: &str) -> Http {
        let mut http = self.clone();
        http.always
            .push(("authorization".into(), format!("Bearer {secret}")));
        http
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> hyper::Response<Incoming> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (k, v) in &self.always {
            req = req.header(k.as_str(), v.as_str());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let body = Full::new(Bytes::from(body.unwrap_or("").to_string()));
        let req = req.body(body).expect("request");
        tokio::time::timeout(PATIENCE, self.client.request(req))
            .await
            .expect("request timed out")
            .expect("request failed")
    }

    pub async fn request(&self, method: Method, path: &str, body: Option<&str>) -> Resp {
        let json = [("content-type", "application/json")];
        let headers: &[(&str, &str)] = if method == Method::GET { &[] } else { &json };
        self.request_with(method, path, body, headers).await
    }

    /// A request with exactly these extra headers (no implicit content type).
    pub async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let resp = self.send(method, path, body, headers).await;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = tokio::time::timeout(PATIENCE, resp.into_body().collect())
            .await
            .expect("body timed out")
            .expect("body failed")
            .to_bytes();
        Resp {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// As [`request_with`](Self::request_with), except that an open event stream (a 2xx
    /// `text/event-stream`, which never ends by itself) is answered with its head only.
    pub async fn request_unless_stream(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let resp = self.send(method, path, body, headers).await;
        let status = resp.status();
        let headers = resp.headers().clone();
        let streaming = status.is_success()
            && headers
                .get("content-type")
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if streaming {
            return Resp {
                status,
                headers,
                text: String::new(),
            };
        }
        let bytes = tokio::time::timeout(PATIENCE, resp.into_body().collect())
            .await
            .expect("body timed out")
            .expect("body failed")
            .to_bytes();
        Resp {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// A JSON POST that may fail to connect or be cut off (the gateway is being killed): `None`.
    pub async fn try_post(&self, path: &str, body: &str) -> Option<Resp> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json");
        for (k, v) in &self.always {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).ok()?;
        let resp = tokio::time::timeout(PATIENCE, self.client.request(req))
            .await
            .ok()?
            .ok()?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = tokio::time::timeout(PATIENCE, resp.into_body().collect())
            .await
            .ok()?
            .ok()?
            .to_bytes();
        Some(Resp {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.request(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &str) -> Resp {
        self.request(Method::POST, path, Some(body)).await
    }

    /// Opens an SSE stream; `last_event_id` becomes the `Last-Event-ID` header.
    pub async fn sse(&self, path: &str, last_event_id: Option<&str>) -> Sse {
        let mut headers = vec![("accept", "text/event-stream")];
        if let Some(id) = last_event_id {
            headers.push(("last-event-id", id));
        }
        let resp = self.send(Method::GET, path, None, &headers).await;
        assert_eq!(resp.status(), StatusCode::OK, "stream {path}");
        assert_eq!(
            resp.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        Sse {
            body: resp.into_body(),
            buf: String::new(),
        }
    }
}

/// One SSE frame (comments are skipped by [`Sse::next`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

impl Frame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("frame data is JSON")
    }
}

/// An open SSE response body. Dropping it disconnects.
#[derive(Debug)]
pub struct Sse {
    body: Incoming,
    buf: String,
}

impl Sse {
    /// The next data, end or gap frame; `None` when the server ended the body cleanly.
    /// Panics if the body fails (an unclean end).
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(at) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..at + 2).collect();
                let mut frame = Frame {
                    event: String::new(),
                    data: String::new(),
                    id: None,
                };
                let mut comment_only = true;
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        frame.event = v.to_string();
                        comment_only = false;
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        frame.data = v.to_string();
                        comment_only = false;
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        frame.id = Some(v.to_string());
                    }
                }
                if comment_only {
                    continue;
                }
                return Some(frame);
            }
            let next = tokio::time::timeout(PATIENCE, self.body.frame())
                .await
                .expect("SSE read timed out");
            match next {
                None => {
                    assert!(self.buf.trim().is_empty(), "partial frame {:?}", self.buf);
                    return None;
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                Some(Err(e)) => panic!("the SSE body failed: {e}"),
            }
        }
    }

    /// Waits for the next heartbeat comment; panics if a frame or the end comes first.
    pub async fn heartbeat(&mut self) {
        loop {
            if let Some(at) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..at + 2).collect();
                assert_eq!(raw, ": heartbeat\n\n", "a frame before the heartbeat");
                return;
            }
            let next = tokio::time::timeout(PATIENCE, self.body.frame())
                .await
                .expect("no heartbeat");
            match next {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                other => panic!("the stream ended before a heartbeat: {other:?}"),
            }
        }
    }

    /// The next `n` frames.
    pub async fn take(&mut self, n: usize) -> Vec<Frame> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.next().await.expect("stream ended early"));
        }
        out
    }
}

/// Polls `check` until it holds; panics after [`PATIENCE`] (a guard, never a timing assertion).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `run.started` body of the README walkthrough.
pub fn start_body(run_id: &str, session: &str) -> String {
    serde_json::json!({
        "run_id": run_id,
        "session_id": session,
        "invocable": "helper",
        "kind_of_invocable": "agent",
        "input": [{"type": "text", "text": "hello"}],
    })
    .to_string()
}

/// A `text.delta` payload.
pub fn delta(text: &str) -> String {
    serde_json::json!({"kind": "text.delta", "message_id": "m1", "text": text}).to_string()
}

/// Runs the binary with `args` in `dir` to completion.
pub fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    command(dir).args(args).output().expect("run switchyard")
}

/// The JSON a successful `--json` command printed.
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

/// The Python the plain-client tests run (`PYTHON`, else `python3`); a missing one fails with
/// what to install.
pub fn python() -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "this test runs plain Python HTTP clients: install python3 (Debian: apt-get install \
         python3) or set PYTHON to one"
    );
    python
}

/// A fixture of the plain-client tests, `tests/e2e/fixtures/NAME`.
pub fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/fixtures")
        .join(name)
}
