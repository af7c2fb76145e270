//! Many SSE clients on one embedded-default gateway, with events appended through it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use super::append::{delta, start_runs};
use super::http::Http;
use super::{Gateway, SSE, failed, open_files_limit};
use crate::Ctx;
use crate::measure::Sample;
use crate::report::Case;
use crate::suites::case;

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
pub(super) async fn sse(ctx: &Ctx, bin: &Path) -> Case {
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
    // Close every stream, then read what the gateway still holds 10 s later: it should hand the
    // streams' memory back once idle (ADR 0357), measured against its RSS before they opened.
    for t in tasks {
        t.abort();
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after_close = match (rss0, gw.rss()) {
        (Some(a), Some(b)) if a > 0 => Some(b as f64 / a as f64),
        _ => None,
    };
    drop(gw);
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
             SSE stream: {} (gateway RSS delta); gateway RSS 10 s after the streams closed: {} \
             of its RSS before they opened; one client per run, events spread over the runs, \
             appended through the gateway by {PUBLISHERS} keep-alive clients; offered \
             {offered:.0} events/s, {published} published, {} delivered; latency = POST sent to \
             SSE frame read",
            fd_limit.map_or("unknown".into(), |l| l.to_string()),
            per_stream.map_or("unknown".into(), |b| format!("{:.1} KiB", b / 1024.0)),
            after_close.map_or("unknown".into(), |r| format!("{r:.2}×")),
            s.ops
        ))
}
