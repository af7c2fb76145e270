//! Webhook deliveries (ADR 0395): a gateway on the embedded default with one subscription to
//! `run.completed` pointing at a local receiver (a few lines of HTTP/1.1 answering 200), and
//! clients that start and end runs through the gateway. Each end becomes a delivery task on the
//! gateway's own queue, signed and sent by its webhook worker. Measured: deliveries per second
//! from the first end to the last delivery received, and each delivery's delay from the end's
//! answer to its arrival at the receiver.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::http::Http;
use super::{Gateway, WEBHOOKS, failed};
use crate::Ctx;
use crate::measure::Sample;
use crate::report::Case;
use crate::suites::case;

/// Clients starting and ending runs.
const CLIENTS: usize = 8;
/// How long the last deliveries may take to arrive once the runs stopped.
const DRAIN: Duration = Duration::from_secs(60);

/// When each run's delivery arrived, by run id.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// A receiver on a free loopback port: answers every request 200 and notes when the delivery of
/// each run arrived (the run id read from the signed body).
async fn receiver() -> Result<(u16, Arrivals), String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("receiver: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut io = BufReader::new(socket);
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    // The head: until the empty line.
                    loop {
                        line.clear();
                        match io.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = l.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len.min(1 << 20)];
                    if io.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    if let Some(run) = run_of(&body) {
                        seen.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(run)
                            .or_insert_with(Instant::now);
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if io.get_mut().write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((port, arrivals))
}

/// The run a delivery's body names, wherever the payload puts it.
fn run_of(body: &[u8]) -> Option<String> {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::Object(m) => m
                .get("run_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| m.values().find_map(find)),
            _ => None,
        }
    }
    find(&serde_json::from_slice(body).ok()?)
}

/// The case on the embedded default.
pub(super) async fn sqlite(ctx: &Ctx, bin: &Path) -> Case {
    match run(ctx, bin).await {
        Ok(case) => case,
        Err(e) => failed("sqlite", WEBHOOKS, e),
    }
}

async fn run(ctx: &Ctx, bin: &Path) -> Result<Case, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("gateway.db");
    let db = db.to_str().ok_or("the temporary path is not UTF-8")?;
    let backend = vec!["--sqlite".to_string(), db.to_string()];
    // The receiver is on loopback, which a gateway refuses by default.
    let extra = "[webhooks]\nallowed_cidrs = [\"127.0.0.1\"]\n";
    let gw = Gateway::start_with(bin, dir.path(), &backend, 0, extra).await?;
    let (port, arrivals) = receiver().await?;
    let mut admin = Http::connect(gw.port).await.map_err(|e| e.to_string())?;
    admin
        .post(
            "/v1/webhooks",
            &json!({"url": format!("http://127.0.0.1:{port}/hook"), "events": ["run.completed"]}),
        )
        .await?;

    let ended: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let until = Instant::now() + ctx.case_time;
    let first = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let ended = ended.clone();
            let gw_port = gw.port;
            tokio::spawn(async move {
                let mut http = Http::connect(gw_port).await.map_err(|e| e.to_string())?;
                let mut n = 0u64;
                while Instant::now() < until {
                    let run = format!("wh-{c}-{n}");
                    n += 1;
                    http.post(
                        "/v1/runs",
                        &json!({"run_id": run, "invocable": "bench", "kind_of_invocable": "agent", "input": []}),
                    )
                    .await?;
                    let done = json!({"kind": "run.completed", "output": [],
                        "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}});
                    http.post(&format!("/v1/runs/{run}/events"), &done).await?;
                    ended
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(run, Instant::now());
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for c in clients {
        c.await.map_err(|e| format!("client panicked: {e}"))??;
    }
    let sent = ended.lock().unwrap_or_else(|e| e.into_inner()).len();
    let drain_until = Instant::now() + DRAIN;
    while arrivals.lock().unwrap_or_else(|e| e.into_inner()).len() < sent
        && Instant::now() < drain_until
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ended = ended.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let arrived = arrivals.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let last = arrived.values().max().copied().unwrap_or(first);
    let mut lat: Vec<Duration> = ended
        .iter()
        .filter_map(|(run, end)| Some(arrived.get(run)?.saturating_duration_since(*end)))
        .collect();
    lat.sort();
    let missing = sent.saturating_sub(lat.len());
    let s = Sample {
        ops: lat.len() as u64,
        errors: missing as u64,
        first_error: (missing > 0)
            .then(|| format!("{missing} of {sent} deliveries did not arrive within {DRAIN:?}")),
        elapsed: last.saturating_duration_since(first),
        lat,
    };
    Ok(
        case("gateway", "sqlite", WEBHOOKS, "deliveries/s", &s, 1.0).note(format!(
            "{sent} runs ended by {CLIENTS} clients; p50/p99: a run end's answer → its delivery at \
         the receiver; every delivery signed and sent by the gateway's webhook worker"
        )),
    )
}
