//! `switchyard-chaos-consumer URL PREFIX QUEUE RUNLOG FINISH`: a typed [`Consumer`] with prefetch
//! and batched acks on (the defaults) draining `QUEUE` until the process is killed. The fault
//! suite's consumer-kill check (`tests/consumer_kill.rs`) runs it as a child and SIGKILLs it
//! while it holds a prefetched batch.
//!
//! `URL` is `sqlite://PATH`, `redis://…` (keys under `PREFIX`) or `postgres://…?schema=NAME`.
//! Each handler appends its task's id and a newline to `RUNLOG` (one `write` on a file opened
//! for appending, so lines of concurrent handlers never interleave and every line written before
//! the kill is there after it). The first `FINISH` handlers wait a little and return `"child"` as
//! the task's result; every later one holds its task until the process dies. With every slot
//! held, the feeder refills the prefetch buffer and nothing takes from it, so the check can wait
//! until the data shows reservations beyond the running handlers and know the kill catches tasks
//! that were reserved and never started, however slow the machine is.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_fleet::{Consumer, ConsumerConfig, Output, Queue};

const USAGE: &str = "usage: switchyard-chaos-consumer URL PREFIX QUEUE RUNLOG FINISH";

/// Handlers at once, and how long each of the first `FINISH` takes.
const CONCURRENCY: usize = 4;
const HANDLER_TAKES: Duration = Duration::from_millis(150);

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, prefix, queue, runlog, finish] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(finish) = finish.parse::<usize>() else {
        eprintln!("FINISH must be a count of runs, not {finish:?}; {USAGE}");
        return ExitCode::from(2);
    };
    let log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(runlog)
    {
        Ok(f) => Arc::new(Mutex::new(f)),
        Err(e) => {
            eprintln!("cannot open {runlog}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let backend = match switchyard_chaos::children::open_fleet(url, prefix).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot open {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let q: Queue<serde_json::Value> = Queue::new(backend, queue.clone());
    let config = ConsumerConfig {
        concurrency: CONCURRENCY,
        visibility: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        ..ConsumerConfig::default()
    };
    let started = Arc::new(AtomicUsize::new(0));
    let _handle = Consumer::spawn(q, config, move |task| {
        let log = log.clone();
        let run = started.fetch_add(1, Ordering::Relaxed) + 1;
        async move {
            let line = format!("{}\n", task.id);
            // A poisoned lock still holds a usable file: write through it.
            let written = log
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .write_all(line.as_bytes());
            written.map_err(|e| format!("run log: {e}"))?;
            if run > finish {
                // Held until the kill: its slot stays busy and its ack never goes out.
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(HANDLER_TAKES).await;
            Ok(Output("child"))
        }
    });
    // Runs until killed.
    std::future::pending::<ExitCode>().await
}
