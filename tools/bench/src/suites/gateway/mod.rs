//! The gateway itself (ADR 0321): HTTP appends through a real `switchyard serve` process on the
//! embedded default and on Redis, against the library's own append rate on the same backend in
//! the same run; many SSE clients on one gateway; and HTTP workers on the job queue (ADR 0340),
//! draining a backlog with batch acks against per-task acks (ADR 0387); and webhook deliveries
//! to a local receiver (ADR 0395).
//!
//! The bench cannot link the gateway (the `switchyard` binary depends on this crate for
//! `switchyard bench`), so it starts the built binary: `SWITCHYARD_BIN`, else `switchyard` next
//! to the running executable (`target/release/switchyard` after
//! `cargo build --release -p switchyard-cli`). The HTTP client is a few lines of HTTP/1.1 over
//! tokio sockets, so 10,000 SSE clients cost one socket and a small buffer each.

mod append;
mod batch_acks;
mod http;
mod sse;
mod webhooks;
mod workers;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::case;
use crate::Ctx;
use crate::measure::{Sample, err};
use crate::report::Case;
use http::Http;

pub(crate) const APPEND: &str = "gateway: HTTP append, 64 keep-alive clients on 64 runs";
pub(crate) const SSE: &str = "gateway: 10,000 SSE clients, 1,000 events/s";
pub(crate) const WORKER_API: &str =
    "gateway: HTTP worker API, 32 workers (long-poll reserve → ack)";
pub(crate) const BATCH_ACKS: &str =
    "gateway: HTTP worker API draining a backlog, 4 workers (reserve 100 → one batch ack)";
pub(crate) const WEBHOOKS: &str =
    "gateway: webhook deliveries of run ends to a local receiver, 8 clients ending runs";

/// Writers of the append case, on the gateway and on the library alike.
const WRITERS: usize = 64;

pub(crate) async fn run(ctx: &Ctx) -> Vec<Case> {
    let mut out = Vec::new();
    let bin = match binary() {
        Ok(b) => b,
        Err(e) => {
            let name = [APPEND, SSE, WORKER_API, BATCH_ACKS, WEBHOOKS]
                .into_iter()
                .find(|n| ctx.wants(n))
                .unwrap_or(APPEND);
            return vec![failed("sqlite", name, e)];
        }
    };
    if ctx.wants(APPEND) {
        out.push(append::append_sqlite(ctx, &bin).await);
        out.push(append::append_redis(ctx, &bin).await);
    }
    if ctx.wants(SSE) {
        out.push(sse::sse(ctx, &bin).await);
    }
    if ctx.wants(WORKER_API) {
        out.push(workers::sqlite(ctx, &bin).await);
        out.push(workers::redis(ctx, &bin).await);
    }
    if ctx.wants(BATCH_ACKS) {
        out.push(batch_acks::sqlite(ctx, &bin).await);
        out.push(batch_acks::redis(ctx, &bin).await);
    }
    if ctx.wants(WEBHOOKS) {
        out.push(webhooks::sqlite(ctx, &bin).await);
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

/// The backend flags of a gateway on the run's Redis, its keys under a prefix of its own.
fn redis_args(ctx: &Ctx, tag: &str) -> Vec<String> {
    vec![
        "--redis".to_string(),
        ctx.redis().to_string(),
        "--event-store-prefix".into(),
        format!("{}:{tag}:events", ctx.prefix),
        "--stream-bridge-prefix".into(),
        format!("{}:{tag}:stream", ctx.prefix),
        "--fleet-prefix".into(),
        format!("{}:{tag}", ctx.prefix),
    ]
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
        Self::start_with(bin, dir, backend, streams, "").await
    }

    /// [`start`](Self::start) with `extra` appended to its configuration file (TOML sections).
    async fn start_with(
        bin: &Path,
        dir: &Path,
        backend: &[String],
        streams: usize,
        extra: &str,
    ) -> Result<Self, String> {
        let config = dir.join(format!("gateway-{:08x}.toml", rand::random::<u32>()));
        let mut f = std::fs::File::create(&config).map_err(err)?;
        writeln!(
            f,
            "[limits]\nmax_connections = {}\nmax_streams = {}\nidle_secs = 600\n{extra}",
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
                // The gateway's log filter is SWITCHYARD_LOG (it reads no RUST_LOG): quiet, so
                // request spans are not formatted for a log nobody reads.
                .env("SWITCHYARD_LOG", "error")
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
        crate::measure::rss_of(&format!("/proc/{}/status", self.child.id()))
    }
}

/// CPU time (user + system) a process has used, from `/proc/<pid>/stat`, in seconds: the
/// per-request CPU of gateway and client says where a 2-core machine's time goes.
fn cpu_secs_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (u64, u64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // Linux reports clock ticks of USER_HZ, 100 on every architecture it runs on.
    Some((utime + stime) as f64 / 100.0)
}

/// Runs the library's side of a case; with its CPU per operation (this process: the library and
/// its driver; a Redis server's own time is not in it).
async fn library_cpu(work: impl std::future::Future<Output = Sample>) -> (Sample, String) {
    let before = cpu_secs_of("self");
    let s = work.await;
    let cpu = match (before, cpu_secs_of("self")) {
        (Some(b), Some(a)) if s.ops > 0 => {
            format!(
                "library CPU {:.0} µs per operation",
                (a - b) * 1e6 / s.ops as f64
            )
        }
        _ => "library CPU unknown".into(),
    };
    (s, cpu)
}

/// CPU seconds of the gateway and of this (client) process over a stretch of work.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    gateway: f64,
    client: f64,
}

impl Cpu {
    fn now(gw: &Gateway) -> Option<Self> {
        Some(Self {
            gateway: cpu_secs_of(&gw.child.id().to_string())?,
            client: cpu_secs_of("self")?,
        })
    }

    /// "gateway N µs, client M µs of CPU per request" since `before`.
    fn per_request(before: Option<Self>, after: Option<Self>, requests: u64) -> String {
        match (before, after) {
            (Some(b), Some(a)) if requests > 0 => format!(
                "CPU per request: gateway {:.0} µs, bench client {:.0} µs",
                (a.gateway - b.gateway) * 1e6 / requests as f64,
                (a.client - b.client) * 1e6 / requests as f64
            ),
            _ => "CPU per request: unknown".into(),
        }
    }
}

/// The gateway's no-op route (`GET /healthz`: every layer, no backend) with `clients` keep-alive
/// clients: the HTTP ceiling the other cases are read against; with its CPU per request.
async fn noop(ctx: &Ctx, gw: &Gateway, clients: usize) -> (Sample, String) {
    let before = Cpu::now(gw);
    let s = noop_sample(ctx, gw.port, clients).await;
    let cpu = Cpu::per_request(before, Cpu::now(gw), s.ops);
    (s, cpu)
}

async fn noop_sample(ctx: &Ctx, port: u16, clients: usize) -> Sample {
    let conns = match Http::pool(port, clients).await {
        Ok(conns) => conns,
        Err(failed) => return failed,
    };
    let conns = std::sync::Arc::new(conns);
    crate::measure::closed_loop(clients, ctx.case_time, move |w, _| {
        let conns = conns.clone();
        async move {
            match conns[w].lock().await.request("GET", "/healthz", None).await {
                Ok((200, _)) => Ok(()),
                Ok((status, body)) => Err(format!("{status}: {}", String::from_utf8_lossy(&body))),
                Err(e) => Err(err(e)),
            }
        }
    })
    .await
}

/// The soft limit on open files of this process (the gateway inherits it).
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
