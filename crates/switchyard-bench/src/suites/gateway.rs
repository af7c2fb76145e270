//! The gateway itself (ADR 0321): HTTP appends through a real `switchyard serve` process on the
//! embedded default and on Redis, against the library's own append rate on the same backend in
//! the same run, and many SSE clients on one gateway.
//!
//! The bench cannot link the gateway (the `switchyard` binary depends on this crate for
//! `switchyard bench`), so it starts the built binary: `SWITCHYARD_BIN`, else `switchyard` next
//! to the running executable (`target/release/switchyard` after
//! `cargo build --release -p switchyard-cli`). The HTTP client is a few lines of HTTP/1.1 over
//! tokio sockets, so 10,000 SSE clients cost one socket and a small buffer each.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_kit::core::event::{Block, InvocableKind, MessageText, Payload, RunStarted};
use switchyard_kit::core::{EventStore, RunContext};
use switchyard_kit::store_redis::{RedisEventStore, RedisStoreOptions};
use switchyard_kit::store_sqlite::SqliteEventStore;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{at_least, case};
use crate::Ctx;
use crate::measure::{Sample, closed_loop, err};
use crate::report::Case;

pub(crate) const APPEND: &str = "gateway: HTTP append, 64 keep-alive clients on 64 runs";
pub(crate) const SSE: &str = "gateway: 10,000 SSE clients, 1,000 events/s";

/// Writers of the append case, on the gateway and on the library alike.
const WRITERS: usize = 64;

pub(crate) async fn run(ctx: &Ctx) -> Vec<Case> {
    let mut out = Vec::new();
    let bin = match binary() {
        Ok(b) => b,
        Err(e) => {
            let name = if ctx.wants(APPEND) { APPEND } else { SSE };
            return vec![failed("sqlite", name, e)];
        }
    };
    if ctx.wants(APPEND) {
        out.push(append_sqlite(ctx, &bin).await);
        out.push(append_redis(ctx, &bin).await);
    }
    if ctx.wants(SSE) {
        out.push(sse(ctx, &bin).await);
    }
    out
}

fn failed(adapter: &str, name: &str, e: impl std::fmt::Display) -> Case {
    let s = Sample {
        errors: 1,
        first_error: Some(e.to_string()),
        ..Sample::default()
    };
    case("gateway", adapter, name, "", &s, 1.0)
}

/// The `switchyard` binary to start.
fn binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SWITCHYARD_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let dir = exe.parent().ok_or("the executable has no directory")?;
    // Test binaries live one level further down (`target/<profile>/deps`).
    for d in [dir, dir.parent().unwrap_or(dir)] {
        let p = d.join("switchyard");
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!(
        "no `switchyard` binary next to {}: run `cargo build --release -p switchyard-cli` first \
         (or set SWITCHYARD_BIN)",
        dir.display()
    ))
}

/// A running `switchyard serve`, killed when dropped.
struct Gateway {
    child: Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    /// Starts `switchyard <backend args> serve` on a free loopback port with limits raised for
    /// `streams` SSE clients, and waits for `/healthz`.
    async fn start(
        bin: &Path,
        dir: &Path,
        backend: &[String],
        streams: usize,
    ) -> Result<Self, String> {
        let config = dir.join(format!("gateway-{:08x}.toml", rand::random::<u32>()));
        let mut f = std::fs::File::create(&config).map_err(err)?;
        writeln!(
            f,
            "[limits]\nmax_connections = {}\nmax_streams = {}\nidle_secs = 600",
            streams + 1_000,
            streams + 100
        )
        .map_err(err)?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("free port: {e}"))?
                .port();
            let child = Command::new(bin)
                .args(backend)
                .arg("--config")
                .arg(&config)
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--heartbeat-secs", "300"])
                .env("RUST_LOG", "error")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
            let mut gw = Gateway { child, port };
            let until = Instant::now() + Duration::from_secs(30);
            while Instant::now() < until {
                if let Ok(Some(status)) = gw.child.try_wait() {
                    last = format!("the gateway exited with {status}");
                    break;
                }
                if let Ok(mut c) = Http::connect(port).await
                    && let Ok((200, _)) = c.request("GET", "/healthz", None).await
                {
                    return Ok(gw);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if last.is_empty() {
                last = "the gateway did not answer /healthz within 30 s".into();
            }
        }
        Err(last)
    }

    /// The gateway's resident memory, bytes.
    fn rss(&self) -> Option<u64> {
        rss_of(&format!("/proc/{}/status", self.child.id()))
    }
}

fn rss_of(path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The soft limit on open files of this process (the gateway inherits it).
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// One keep-alive HTTP/1.1 connection.
struct Http {
    io: BufReader<TcpStream>,
}

impl Http {
    async fn connect(port: u16) -> std::io::Result<Self> {
        let s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.set_nodelay(true)?;
        // A small buffer: SSE clients are many and their frames are short.
        Ok(Self {
            io: BufReader::with_capacity(2048, s),
        })
    }

    async fn send_head(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<()> {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: bench\r\n");
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        self.io.get_mut().write_all(&bytes).await
    }

    /// Reads a response head; returns the status and the body length (`None`: chunked).
    async fn read_head(&mut self) -> std::io::Result<(u16, Option<usize>)> {
        let mut line = String::new();
        if self.io.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut len = Some(0);
        loop {
            line.clear();
            if self.io.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                return Ok((status, len));
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = Some(v.trim().parse().map_err(std::io::Error::other)?);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                len = None;
            }
        }
    }

    async fn read_body(&mut self, len: Option<usize>) -> std::io::Result<Vec<u8>> {
        match len {
            Some(n) => {
                let mut body = vec![0; n];
                self.io.read_exact(&mut body).await?;
                Ok(body)
            }
            None => {
                let mut body = Vec::new();
                let mut line = String::new();
                loop {
                    line.clear();
                    self.io.read_line(&mut line).await?;
                    let n =
                        usize::from_str_radix(line.trim(), 16).map_err(std::io::Error::other)?;
                    let mut chunk = vec![0; n + 2];
                    self.io.read_exact(&mut chunk).await?;
                    chunk.truncate(n);
                    body.extend(chunk);
                    if n == 0 {
                        return Ok(body);
                    }
                }
            }
        }
    }

    async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        self.send_head(method, path, body).await?;
        let (status, len) = self.read_head().await?;
        let body = self.read_body(len).await?;
        Ok((status, body))
    }

    /// Sends a `GET` and reads the response head (an SSE stream's body follows).
    async fn open_stream(&mut self, path: &str) -> std::io::Result<(u16, Option<usize>)> {
        self.send_head("GET", path, None).await?;
        self.read_head().await
    }

    /// `POST` with a JSON body; any status but 2xx is an error naming the body.
    async fn post(&mut self, path: &str, body: &Value) -> Result<(), String> {
        let bytes = serde_json::to_vec(body).map_err(err)?;
        let (status, body) = self
            .request("POST", path, Some(&bytes))
            .await
            .map_err(err)?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
        }
    }
}

fn start_body(run_id: &str) -> Value {
    let started = Payload::RunStarted(RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    });
    let mut v = serde_json::to_value(&started).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        map.remove("kind");
        map.insert("run_id".into(), json!(run_id));
    }
    v
}

fn delta(text: String) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text,
    })
}

/// Starts `runs` through the gateway, `WRITERS` at a time.
async fn start_runs(port: u16, runs: Arc<Vec<String>>) -> Result<(), String> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..WRITERS.min(runs.len()))
        .map(|_| {
            let (runs, next) = (runs.clone(), next.clone());
            tokio::spawn(async move {
                let mut c = Http::connect(port).await.map_err(err)?;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(run) = runs.get(i) else {
                        return Ok::<(), String>(());
                    };
                    c.post("/v1/runs", &start_body(run)).await?;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(err)??;
    }
    Ok(())
}

/// 64 keep-alive clients, each appending one event per request to its own run, back to back.
async fn http_appends(ctx: &Ctx, port: u16, tag: &str) -> Sample {
    let runs: Vec<String> = (0..WRITERS).map(|i| format!("{tag}-{i}")).collect();
    if let Err(e) = start_runs(port, Arc::new(runs.clone())).await {
        return Sample {
            errors: 1,
            first_error: Some(format!("starting runs: {e}")),
            ..Sample::default()
        };
    }
    let mut conns = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        match Http::connect(port).await {
            Ok(c) => conns.push(tokio::sync::Mutex::new(c)),
            Err(e) => {
                return Sample {
                    errors: 1,
                    first_error: Some(format!("connect: {e}")),
                    ..Sample::default()
                };
            }
        }
    }
    let conns = Arc::new(conns);
    let paths: Arc<Vec<String>> = Arc::new(
        runs.iter()
            .map(|r| format!("/v1/runs/{r}/events"))
            .collect(),
    );
    closed_loop(WRITERS, ctx.case_time, move |w, i| {
        let (conns, paths) = (conns.clone(), paths.clone());
        async move {
            let body = serde_json::to_value(delta(format!("a chunk of streamed text, number {i}")))
                .map_err(err)?;
            conns[w].lock().await.post(&paths[w], &body).await
        }
    })
    .await
}

/// The library's rate on the same backend: 64 writers on 64 runs through the port.
async fn library_appends(ctx: &Ctx, store: Arc<dyn EventStore>, tag: &str) -> Sample {
    let tag = tag.to_owned();
    closed_loop(WRITERS, ctx.case_time, move |w, i| {
        let st = store.clone();
        let run = format!("{tag}-{w}");
        async move {
            let rc = RunContext::new(run);
            st.append(
                rc.log_key(),
                vec![delta(format!("a chunk of streamed text, number {i}"))],
                &rc,
                "bench",
            )
            .await
            .map(drop)
            .map_err(err)
        }
    })
    .await
}

fn append_case(adapter: &str, gw: Sample, lib: Sample) -> Case {
    let lib_rate = lib.rate();
    let lib_p99 = lib.pct_ms(99.0);
    let c = case("gateway", adapter, APPEND, "events/s", &gw, 1.0);
    let p99_ratio = match (c.p99_ms, lib_p99) {
        (Some(g), Some(l)) if l > 0.0 => format!("{:.1}×", g / l),
        _ => "unknown".into(),
    };
    let c = c.against(
        &format!("library append, 64 writers on 64 runs ({adapter})"),
        (lib.errors == 0).then_some(lib_rate),
    );
    let met = at_least(c.ratio, 0.5) && c.errors == 0;
    c.target("≥ 0.5× the library's append rate", met).note(format!(
        "library in the same run: {lib_rate:.0} events/s, p99 {} ms; gateway p99 / library p99 = \
         {p99_ratio}; each request also publishes to the gateway's stream bridge",
        lib_p99.map_or("?".into(), |p| format!("{p:.2}"))
    ))
}

async fn append_sqlite(ctx: &Ctx, bin: &Path) -> Case {
    let lib = match SqliteEventStore::open(ctx.sqlite_dir.join("gateway-library.db")).await {
        Ok(s) => s,
        Err(e) => return failed("sqlite", APPEND, e),
    };
    let lib: Arc<dyn EventStore> = Arc::new(lib);
    let lib_sample = library_appends(ctx, lib.clone(), "lib").await;
    drop(lib);
    let db = ctx.sqlite_dir.join("gateway.db");
    let backend = vec!["--sqlite".to_string(), db.display().to_string()];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, 0).await {
        Ok(g) => g,
        Err(e) => return failed("sqlite", APPEND, e),
    };
    let gw_sample = http_appends(ctx, gw.port, "gw").await;
    drop(gw);
    append_case("sqlite", gw_sample, lib_sample)
}

async fn append_redis(ctx: &Ctx, bin: &Path) -> Case {
    let prefix = format!("{}:gwlib", ctx.prefix);
    let lib = match RedisEventStore::connect_with(
        ctx.redis(),
        RedisStoreOptions::default().prefix(prefix),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => return failed("redis", APPEND, e),
    };
    let lib: Arc<dyn EventStore> = Arc::new(lib);
    let lib_sample = library_appends(ctx, lib.clone(), "lib").await;
    drop(lib);
    let backend = vec![
        "--redis".to_string(),
        ctx.redis().to_string(),
        "--event-store-prefix".into(),
        format!("{}:gw:events", ctx.prefix),
        "--stream-bridge-prefix".into(),
        format!("{}:gw:stream", ctx.prefix),
        "--fleet-prefix".into(),
        format!("{}:gw", ctx.prefix),
    ];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, 0).await {
        Ok(g) => g,
        Err(e) => return failed("redis", APPEND, e),
    };
    let gw_sample = http_appends(ctx, gw.port, "gw").await;
    drop(gw);
    append_case("redis", gw_sample, lib_sample)
}

/// Microseconds since `base`, carried in an event's text as `t=<µs>;`.
fn stamp(text: &[u8]) -> Option<u64> {
    let at = text.windows(2).position(|w| w == b"t=")?;
    let digits: String = text[at + 2..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|b| char::from(*b))
        .collect();
    digits.parse().ok()
}

/// `streams` SSE clients on one embedded-default gateway, one per run; 1,000 events/s spread
/// over the runs, appended through the gateway by 16 keep-alive clients (open loop).
async fn sse(ctx: &Ctx, bin: &Path) -> Case {
    const RATE: f64 = 1_000.0;
    const PUBLISHERS: u64 = 16;
    let wanted: usize = ctx.pick(500, 10_000);
    // Each client is one socket here and one in the gateway; keep room for everything else.
    let fd_limit = open_files_limit();
    let streams = match fd_limit {
        Some(l) if l < wanted + 512 => l.saturating_sub(512).max(1),
        _ => wanted,
    };
    let db = ctx.sqlite_dir.join("gateway-sse.db");
    let backend = vec!["--sqlite".to_string(), db.display().to_string()];
    let gw = match Gateway::start(bin, &ctx.sqlite_dir, &backend, streams).await {
        Ok(g) => g,
        Err(e) => return failed("sqlite", SSE, e),
    };
    let runs: Arc<Vec<String>> = Arc::new((0..streams).map(|i| format!("sse-{i}")).collect());
    if let Err(e) = start_runs(gw.port, runs.clone()).await {
        return failed("sqlite", SSE, format!("starting runs: {e}"));
    }
    let base = Instant::now();
    let lat = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let rss0 = gw.rss();
    let mut opened = 0usize;
    let mut first_error = None;
    let mut tasks = Vec::with_capacity(streams);
    for run in runs.iter() {
        let mut c = match Http::connect(gw.port).await {
            Ok(c) => c,
            Err(e) => {
                first_error.get_or_insert(format!("connect #{opened}: {e}"));
                break;
            }
        };
        match c.open_stream(&format!("/v1/runs/{run}/stream")).await {
            Ok((200, _)) => {}
            Ok((status, len)) => {
                let body = c.read_body(len).await.unwrap_or_default();
                first_error.get_or_insert(format!(
                    "stream #{opened}: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
                break;
            }
            Err(e) => {
                first_error.get_or_insert(format!("stream #{opened}: {e}"));
                break;
            }
        }
        opened += 1;
        let lat = lat.clone();
        tasks.push(tokio::spawn(async move {
            let mut line = Vec::with_capacity(256);
            loop {
                line.clear();
                match c.io.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if line.starts_with(b"data:")
                    && let Some(t) = stamp(&line)
                {
                    let now = base.elapsed().as_micros() as u64;
                    let d = Duration::from_micros(now.saturating_sub(t));
                    lat.lock().unwrap_or_else(|p| p.into_inner()).push(d);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let per_stream = match (rss0, gw.rss()) {
        (Some(a), Some(b)) if opened > 0 => Some(b.saturating_sub(a) as f64 / opened as f64),
        _ => None,
    };

    // Open loop: event k is due at start + k ms, sent by publisher k mod PUBLISHERS.
    let span = ctx.case_time.max(Duration::from_secs(2));
    let due = (span.as_secs_f64() * RATE) as u64;
    let start = tokio::time::Instant::now();
    let targets = opened.max(1);
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|w| {
            let runs = runs.clone();
            let port = gw.port;
            tokio::spawn(async move {
                let (mut published, mut errors, mut first) = (0u64, 0u64, None);
                let mut c = match Http::connect(port).await {
                    Ok(c) => c,
                    Err(e) => return (0, 1, Some(e.to_string())),
                };
                let mut k = w;
                while k < due {
                    tokio::time::sleep_until(start + Duration::from_secs_f64(k as f64 / RATE))
                        .await;
                    let run = &runs[k as usize % targets];
                    let t = base.elapsed().as_micros() as u64;
                    let body = serde_json::to_value(delta(format!("t={t};"))).unwrap_or_default();
                    if let Err(e) = c.post(&format!("/v1/runs/{run}/events"), &body).await {
                        errors += 1;
                        first.get_or_insert(e);
                    }
                    published += 1;
                    k += PUBLISHERS;
                }
                (published, errors, first)
            })
        })
        .collect();
    let (mut published, mut publish_errors) = (0u64, 0u64);
    for p in publishers {
        match p.await {
            Ok((n, e, f)) => {
                published += n;
                publish_errors += e;
                if let Some(f) = f {
                    first_error.get_or_insert(f);
                }
            }
            Err(_) => publish_errors += 1,
        }
    }
    let publishing = start.elapsed();
    // Let the last deliveries land (generously: no timing is judged by this wait).
    let until = Instant::now() + Duration::from_secs(10);
    let expected = published.saturating_sub(publish_errors) as usize;
    while lat.lock().unwrap_or_else(|p| p.into_inner()).len() < expected && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(gw);
    for t in tasks {
        t.abort();
    }
    let mut lat = std::mem::take(&mut *lat.lock().unwrap_or_else(|p| p.into_inner()));
    lat.sort_unstable();
    let s = Sample {
        ops: lat.len() as u64,
        errors: publish_errors + u64::from(opened < wanted),
        first_error,
        elapsed: publishing,
        lat,
    };
    let c = case("gateway", "sqlite", SSE, "deliveries/s", &s, 1.0);
    let offered = published as f64 / publishing.as_secs_f64().max(1e-9);
    let met = c.p99_ms.is_some_and(|p| p < 100.0)
        && c.errors == 0
        && s.ops == published
        && offered >= 0.95 * RATE;
    c.target("p99 publish-to-client < 100 ms, 10,000 clients", met)
        .note(format!(
            "{opened} of {wanted} SSE streams open (open-files limit {}); gateway memory per open \
             SSE stream: {} (gateway RSS delta); one client per run, events spread over the runs, \
             appended through the gateway by {PUBLISHERS} keep-alive clients; offered \
             {offered:.0} events/s, {published} published, {} delivered; latency = POST sent to \
             SSE frame read",
            fd_limit.map_or("unknown".into(), |l| l.to_string()),
            per_stream.map_or("unknown".into(), |b| format!("{:.1} KiB", b / 1024.0)),
            s.ops
        ))
}
