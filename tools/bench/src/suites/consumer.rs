//! The typed `Consumer` at concurrency 64 with and without its prefetch buffer and batched acks
//! (ADR 0376), on every backend the queue suites run: draining a backlog submitted beforehand,
//! and 64 producers feeding one consumer. Each is reported against the backend's floor of the
//! same run, and the prefetching row's note gives its ratio to the row without.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_kit::core::FleetBackend;
use switchyard_kit::fleet::typed::{Batching, Consumer, ConsumerConfig, PushOptions, Queue};

use super::{at_least, case};
use crate::Ctx;
use crate::measure::{Sample, err, fixed_work};
use crate::report::Case;

pub(crate) const DRAIN_OFF: &str = "consumer drains a backlog, concurrency 64, prefetch off";
pub(crate) const DRAIN_ON: &str = "consumer drains a backlog, concurrency 64, prefetch on";
pub(crate) const FEED_OFF: &str = "64 producers + 1 consumer of concurrency 64, prefetch off";
pub(crate) const FEED_ON: &str = "64 producers + 1 consumer of concurrency 64, prefetch on";

/// The longest a case may take before it is reported with what it did not finish as errors.
const LIMIT: Duration = Duration::from_secs(300);

/// The backend's floor for these cases and the drain target the issue sets against it.
pub(crate) struct Floor {
    pub name: &'static str,
    pub rate: Option<f64>,
    pub drain_min: f64,
    pub drain_target: &'static str,
}

/// The four cases on one backend: drain and producers, each without and with prefetching.
pub(crate) async fn cases(
    ctx: &Ctx,
    adapter: &str,
    backend: Arc<dyn FleetBackend>,
    floor: Floor,
) -> Vec<Case> {
    let n: u64 = ctx.pick(2_000, 20_000);
    let mut out = Vec::new();
    for (off_name, on_name, feed) in [(DRAIN_OFF, DRAIN_ON, false), (FEED_OFF, FEED_ON, true)] {
        if !ctx.wants(off_name) && !ctx.wants(on_name) {
            continue;
        }
        let mut off_rate = None;
        for (name, batching) in [(off_name, Batching::off()), (on_name, Batching::default())] {
            let queue: Queue<Value> = Queue::new(backend.clone(), format!("bench-{}", slug(name)));
            let s = if feed {
                producers_and_consumer(&queue, n, batching).await
            } else {
                drain(&queue, n, batching).await
            };
            let mut c = case("consumer", adapter, name, "tasks/s", &s, 1.0)
                .note(format!("{n} no-op tasks"))
                .against(floor.name, floor.rate);
            if name == on_name {
                if let Some(off) = off_rate.filter(|r: &f64| *r > 0.0) {
                    let ratio = c.rate / off;
                    c = c.note(format!("{ratio:.2}× prefetch off"));
                }
                if !feed {
                    let met = at_least(c.ratio, floor.drain_min) && c.errors == 0;
                    c = c.target(floor.drain_target, met);
                }
            } else {
                off_rate = Some(c.rate);
            }
            out.push(c);
        }
    }
    out
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn config() -> ConsumerConfig {
    ConsumerConfig {
        concurrency: 64,
        visibility: Duration::from_secs(60),
        poll: Duration::from_millis(100),
        sweep_every: None,
        ..ConsumerConfig::default()
    }
}

/// Submits `n` tasks (not timed), then times one consumer taking them all.
async fn drain(queue: &Queue<Value>, n: u64, batching: Batching) -> Sample {
    let mut s = Sample::default();
    let mut pushed = 0u64;
    while pushed < n {
        let k = (n - pushed).min(1000);
        let jobs: Vec<Value> = (pushed..pushed + k).map(|i| json!({ "i": i })).collect();
        if let Err(e) = queue.push_many(&jobs, PushOptions::default()).await {
            s.errors = n;
            s.first_error = Some(format!("submitting the backlog failed: {e}"));
            return s;
        }
        pushed += k;
    }
    let started = Instant::now();
    let handle = Consumer::spawn_with(queue.clone(), config(), batching, |_task| async { Ok(()) });
    finish(handle, n, started, s).await
}

/// 64 producers push `n` tasks between them, one at a time, while one consumer takes them;
/// timed from the first push to the last ack.
async fn producers_and_consumer(queue: &Queue<Value>, n: u64, batching: Batching) -> Sample {
    let started = Instant::now();
    let handle = Consumer::spawn_with(queue.clone(), config(), batching, |_task| async { Ok(()) });
    let per = n.div_ceil(64);
    let q = queue.clone();
    let pushing = tokio::spawn(fixed_work(64, per, move |w, i| {
        let q = q.clone();
        async move {
            q.push(&json!({ "w": w, "i": i }))
                .await
                .map(|_| ())
                .map_err(err)
        }
    }));
    let mut s = finish(handle, per * 64, started, Sample::default()).await;
    match pushing.await {
        Ok(p) => {
            s.errors += p.errors;
            if s.first_error.is_none() {
                s.first_error = p.first_error;
            }
        }
        Err(e) => {
            s.errors += 1;
            s.first_error
                .get_or_insert(format!("producers panicked: {e}"));
        }
    }
    s
}

/// Waits until the consumer has acked `n` tasks (or [`LIMIT`] passes), shuts it down and makes
/// the sample: `n` operations over the time from `started`, what did not finish as errors.
async fn finish(
    handle: switchyard_kit::fleet::typed::ConsumerHandle,
    n: u64,
    started: Instant,
    mut s: Sample,
) -> Sample {
    while handle.stats().acked < n && started.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    s.elapsed = started.elapsed();
    let stats = handle.shutdown().await;
    s.ops = n;
    let missing = n.saturating_sub(stats.acked);
    s.errors += missing + stats.errors + stats.lost;
    if s.errors > 0 && s.first_error.is_none() {
        s.first_error = Some(format!(
            "{missing} not acked in time; consumer stats {stats:?}"
        ));
    }
    s
}
