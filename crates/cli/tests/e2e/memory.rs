//! The gateway gives memory back after a burst of SSE streams (ADR 0357): its resident memory 10 s
//! after 5,000 streams close is at most twice what it was after start-up.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::common::{Gateway, PATIENCE, command, delta, start_body};

/// Streams of the burst: enough that the memory they leave behind, if kept, is several times a
/// fresh gateway's (about 18 KiB each against a start-up RSS of about 30 MB).
const STREAMS: usize = 5_000;
/// Events published while every stream is open, so each one has carried data.
const EVENTS: usize = 5;

/// The resident memory of process `pid`, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// The soft limit on open files of this process (each stream is one socket here).
fn open_files_limit() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Sends one request on a fresh connection and reads the status line and head.
async fn open_stream(addr: &str, path: &str) -> BufReader<TcpStream> {
    let mut io = TcpStream::connect(addr).await.expect("connect");
    let head = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\r\n");
    io.write_all(head.as_bytes()).await.expect("send");
    let mut io = BufReader::new(io);
    let mut line = String::new();
    io.read_line(&mut line).await.expect("status line");
    assert!(line.starts_with("HTTP/1.1 200"), "stream refused: {line:?}");
    loop {
        line.clear();
        io.read_line(&mut line).await.expect("head");
        if line == "\r\n" {
            return io;
        }
    }
}

/// Reads frames until `n` `data:` lines have arrived.
async fn read_data(io: &mut BufReader<TcpStream>, n: usize) {
    let mut seen = 0;
    let mut line = Vec::new();
    while seen < n {
        line.clear();
        let read = io.read_until(b'\n', &mut line).await.expect("stream read");
        assert!(read > 0, "the stream ended after {seen} of {n} events");
        if line.starts_with(b"data:") {
            seen += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_returns_near_baseline_after_a_burst_of_sse_streams() {
    let limit = open_files_limit();
    assert!(
        limit >= STREAMS + 512,
        "this test opens {STREAMS} sockets: raise the open-files limit (ulimit -n {}), it is {limit}",
        STREAMS + 1_024
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("limits.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nmax_connections = {}\nmax_streams = {}\nmax_pending_per_ip = {}\n\
             idle_secs = 600\n",
            STREAMS + 100,
            STREAMS + 10,
            STREAMS + 10
        ),
    )
    .expect("config");
    let db = dir.path().join("x.db");
    let mut cmd = command(dir.path());
    cmd.arg("--config")
        .arg(&config)
        .args(["serve", "--listen", "127.0.0.1:0", "--sqlite"])
        .arg(&db);
    let gw = Gateway::spawn(cmd);
    let http = gw.http();
    let addr = gw.base.trim_start_matches("http://").to_string();

    let started = http.post("/v1/runs", &start_body("run-1", "s1")).await;
    assert_eq!(started.code(), 201, "{}", started.text);
    for _ in 0..5 {
        assert_eq!(http.get("/healthz").await.code(), 200);
    }
    // Let start-up work (migrations, first connections) settle before the baseline.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline = rss(gw.pid());

    let path = "/v1/runs/run-1/stream?session=s1";
    let opening = futures::stream::iter(0..STREAMS)
        .map(|_| open_stream(&addr, path))
        .buffer_unordered(200);
    let mut streams: Vec<_> = tokio::time::timeout(Duration::from_secs(60), opening.collect())
        .await
        .expect("opening the streams timed out");
    for i in 0..EVENTS {
        let text = format!("{i}{}", "x".repeat(200));
        let appended = http
            .post("/v1/runs/run-1/events?session=s1", &delta(&text))
            .await;
        assert_eq!(appended.code(), 201, "{}", appended.text);
    }
    // run.started (replayed on open) and every event published since, on every stream.
    let reading = futures::stream::iter(streams.iter_mut())
        .for_each_concurrent(None, |io| read_data(io, 1 + EVENTS));
    tokio::time::timeout(PATIENCE * 3, reading)
        .await
        .expect("reading the events timed out");
    let open = rss(gw.pid());
    drop(streams);
    let closed = Instant::now();

    // The gateway notices each close and drops that stream; 10 s later its memory is back.
    tokio::time::sleep_until((closed + Duration::from_secs(10)).into()).await;
    let after = rss(gw.pid());
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    assert!(
        after <= 2 * baseline,
        "RSS 10 s after {STREAMS} SSE streams closed: {:.1} MiB, more than twice the {:.1} MiB \
         after start-up (it was {:.1} MiB with them open)",
        mib(after),
        mib(baseline),
        mib(open)
    );
}
