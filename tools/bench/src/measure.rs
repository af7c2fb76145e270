//! Closed-loop timing: N tasks run an operation back to back for a while, each recording its own
//! latencies; the merged sample gives throughput and percentiles.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a measured loop did.
#[derive(Debug, Default)]
pub(crate) struct Sample {
    /// Operations that completed (with or without error).
    pub ops: u64,
    /// Operations that returned an error.
    pub errors: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
    /// Wall time of the loop.
    pub elapsed: Duration,
    /// Every operation's latency, sorted.
    pub lat: Vec<Duration>,
}

impl Sample {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The `p`th percentile latency in milliseconds (`p` in 0..=100), if anything was timed.
    pub fn pct_ms(&self, p: f64) -> Option<f64> {
        pct(&self.lat, p).map(|d| d.as_secs_f64() * 1e3)
    }

    /// Adds `other`'s counts and latencies (measured over the same wall time); sort afterwards.
    pub fn merge(&mut self, other: Sample) {
        self.ops += other.ops;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.lat.extend(other.lat);
    }
}

/// The `p`th percentile (nearest rank) of sorted latencies.
pub(crate) fn pct(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Runs `op(worker, i)` in `concurrency` tasks, each back to back, until `duration` has passed.
/// Each operation's latency is recorded; errors are counted, not fatal.
pub(crate) async fn closed_loop<F, Fut>(concurrency: usize, duration: Duration, op: F) -> Sample
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let until = Instant::now() + duration;
    workers(concurrency, op, move |_| Instant::now() < until).await
}

/// Runs `op(worker, i)` for `i` in `0..per_worker` in each of `concurrency` tasks (a fixed amount
/// of work, for cases that count errors rather than time).
pub(crate) async fn fixed_work<F, Fut>(concurrency: usize, per_worker: u64, op: F) -> Sample
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    workers(concurrency, op, move |i| i < per_worker).await
}

/// `concurrency` tasks each run `op(worker, i)` for `i = 0, 1, …` while `more(i)`; the merged,
/// sorted sample of every call.
async fn workers<F, Fut>(
    concurrency: usize,
    op: F,
    more: impl Fn(u64) -> bool + Send + Sync + 'static,
) -> Sample
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let op = Arc::new(op);
    let more = Arc::new(more);
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|w| {
            let (op, more) = (op.clone(), more.clone());
            tokio::spawn(async move {
                let mut s = Sample::default();
                let mut i = 0u64;
                while more(i) {
                    let t = Instant::now();
                    let r = op(w, i).await;
                    s.lat.push(t.elapsed());
                    s.ops += 1;
                    if let Err(e) = r {
                        s.errors += 1;
                        s.first_error.get_or_insert(e);
                    }
                    i += 1;
                }
                s
            })
        })
        .collect();
    let mut total = join_samples(tasks, "worker").await;
    total.elapsed = start.elapsed();
    total.lat.sort_unstable();
    total
}

/// Stringifies any error for a [`Sample`].
pub(crate) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Resident memory of the process whose `/proc/<pid>/status` is at `path`, in bytes.
pub(crate) fn rss_of(path: &str) -> Option<u64> {
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

/// Waits for every task and merges their samples; a task that panicked is an error of `who`.
pub(crate) async fn join_samples(
    tasks: impl IntoIterator<Item = tokio::task::JoinHandle<Sample>>,
    who: &str,
) -> Sample {
    let mut total = Sample::default();
    for t in tasks {
        match t.await {
            Ok(s) => total.merge(s),
            Err(e) => {
                total.errors += 1;
                total
                    .first_error
                    .get_or_insert(format!("{who} panicked: {e}"));
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(pct(&v, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(pct(&v, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(pct(&v, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(pct(&v, 0.0), Some(Duration::from_millis(1)));
        assert_eq!(pct(&[], 50.0), None);
    }
}
