//! The in-process stream bridge (deer-flow's `MemoryStreamBridge`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;

use super::limits::event_bytes;
use super::{
    Capabilities, ItemStream, MemoryLimits, Retained, StreamBridge, StreamEvent, StreamGap,
    StreamItem, validate_event_name, validate_heartbeat, validate_run_id,
};
use crate::{Clock, Error, Result, SystemClock};

const WHAT: &str = "memory stream bridge";

/// Per-run logs in this process's memory. Ids are `<wall-clock ms>-<seq>` with `seq` the event's
/// absolute 0-based offset in the run, so only `seq` is ever compared.
///
/// Differences from the seed (ADR 0041): `queue_maxsize == 0` is refused, and a subscriber does
/// not create a run: the state it needs while waiting is dropped with its last subscriber unless
/// something was published, so `stream_exists` stays false and nothing leaks.
///
/// Memory is bounded (ADR 0192, [`MemoryLimits`]): besides `queue_maxsize` events, a run keeps
/// its newest events within `max_run_bytes` (always at least the newest one), and when all runs
/// together hold more than `max_total_bytes` the oldest runs are evicted whole. Trimmed events
/// behave like events trimmed by `queue_maxsize` (an evicted cursor gets a gap); an evicted run
/// behaves like a cleaned-up one, except that a run evicted before its end keeps counting its
/// ids if it publishes again, so reconnecting subscribers get a gap, never a silent restart.
#[derive(Debug, Clone)]
pub struct MemoryStreamBridge {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    runs: Mutex<HashMap<String, Arc<RunStream>>>,
    /// The next offset of each run evicted before its end, so its ids continue if it publishes
    /// again. Dropped by `cleanup` and by the run's next publish.
    evicted: Mutex<HashMap<String, u64>>,
    maxsize: usize,
    limits: MemoryLimits,
    /// Sum of every run's `RunState::bytes`.
    total_bytes: AtomicUsize,
    /// Orders runs by creation for eviction.
    births: AtomicU64,
    clock: Arc<dyn Clock>,
    closed: AtomicBool,
}

#[derive(Debug)]
struct RunStream {
    state: Mutex<RunState>,
    /// Creation order: the smallest is evicted first.
    born: u64,
    /// Bumped on every change; subscribers wait on it.
    version: watch::Sender<u64>,
    /// Set (under the runs lock) once anything was published: the run then exists.
    published: AtomicBool,
    /// Live subscriptions attached to this run (changed under the runs lock).
    subscribers: AtomicUsize,
}

#[derive(Debug, Default)]
struct RunState {
    events: VecDeque<StreamEvent>,
    /// Absolute offset of `events[0]`: how many events were evicted.
    start_offset: u64,
    /// Offset the next publish gets.
    next_seq: u64,
    ended: bool,
    /// Size of `events` (see [`MemoryLimits`]).
    bytes: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave the maps half-updated in a way later readers
    // would misread, so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemoryStreamBridge {
    /// A bridge retaining `queue_maxsize` events per run. Zero is refused.
    pub fn new(queue_maxsize: usize) -> Result<Self> {
        Self::with_clock(queue_maxsize, Arc::new(SystemClock))
    }

    /// As [`MemoryStreamBridge::new`], with the clock that stamps the `<ms>` part of ids.
    pub fn with_clock(queue_maxsize: usize, clock: Arc<dyn Clock>) -> Result<Self> {
        Self::with_limits(queue_maxsize, MemoryLimits::default(), clock)
    }

    /// As [`MemoryStreamBridge::with_clock`], with byte bounds. Zero bounds are refused.
    pub fn with_limits(
        queue_maxsize: usize,
        limits: MemoryLimits,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        if limits.max_run_bytes == 0 || limits.max_total_bytes == 0 {
            return Err(Error::config(
                "stream_bridge.max_run_bytes / max_total_bytes",
                "must be at least 1 byte",
            ));
        }
        if queue_maxsize == 0 {
            return Err(Error::config(
                "stream_bridge.queue_maxsize",
                "must be at least 1 (0 would retain nothing and break gap reports)",
            ));
        }
        Ok(Self {
            shared: Arc::new(Shared {
                runs: Mutex::new(HashMap::new()),
                evicted: Mutex::new(HashMap::new()),
                maxsize: queue_maxsize,
                limits,
                total_bytes: AtomicUsize::new(0),
                births: AtomicU64::new(0),
                clock,
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Runs currently held (published, or waited on by a live subscriber). For leak tests.
    pub fn tracked_runs(&self) -> usize {
        lock(&self.shared.runs).len()
    }

    /// The runs and bytes retained now, for metrics.
    pub fn retained(&self) -> Retained {
        let runs = lock(&self.shared.runs)
            .values()
            .filter(|s| s.published.load(Ordering::Acquire))
            .count();
        Retained {
            runs,
            bytes: self.shared.total_bytes.load(Ordering::Acquire),
        }
    }
}

impl Shared {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed { what: WHAT });
        }
        Ok(())
    }

    /// The run's stream for a producer: created if absent and marked published, atomically with
    /// respect to a departing subscriber's cleanup.
    fn producer_stream(&self, run_id: &str) -> Arc<RunStream> {
        let mut runs = lock(&self.runs);
        let stream = self.entry(&mut runs, run_id);
        stream.published.store(true, Ordering::Release);
        lock(&self.evicted).remove(run_id);
        stream
    }

    /// The run's stream, created if absent (continuing the offsets of an evicted run).
    fn entry(&self, runs: &mut HashMap<String, Arc<RunStream>>, run_id: &str) -> Arc<RunStream> {
        runs.entry(run_id.to_owned())
            .or_insert_with(|| {
                let born = self.births.fetch_add(1, Ordering::Relaxed);
                let stream = RunStream::new(born);
                if let Some(&next) = lock(&self.evicted).get(run_id) {
                    let mut st = lock(&stream.state);
                    st.start_offset = next;
                    st.next_seq = next;
                }
                Arc::new(stream)
            })
            .clone()
    }

    /// Drops a removed run's bytes from the total and wakes its subscribers (they end).
    fn release(&self, stream: &RunStream) {
        let mut st = lock(&stream.state);
        self.total_bytes.fetch_sub(st.bytes, Ordering::AcqRel);
        st.bytes = 0;
        st.start_offset = st.next_seq;
        st.events.clear();
        st.ended = true;
        drop(st);
        stream.bump();
    }

    /// Evicts the oldest published runs while the total is over its bound, never `keep` (the run
    /// just published to, which is within its own bound).
    fn evict_over_total(&self, keep: &str) {
        while self.total_bytes.load(Ordering::Acquire) > self.limits.max_total_bytes {
            let victim = {
                let mut runs = lock(&self.runs);
                let oldest = runs
                    .iter()
                    .filter(|(id, s)| id.as_str() != keep && s.published.load(Ordering::Acquire))
                    .min_by_key(|(_, s)| s.born)
                    .map(|(id, _)| id.clone());
                let Some(id) = oldest else { return };
                runs.remove(&id).map(|s| (id, s))
            };
            let Some((id, stream)) = victim else { return };
            let (ended, next) = {
                let st = lock(&stream.state);
                (st.ended, st.next_seq)
            };
            if !ended {
                lock(&self.evicted).insert(id.clone(), next);
            }
            tracing::debug!(run_id = %id, "memory stream bridge over its byte bound: run evicted");
            self.release(&stream);
        }
    }
}

impl RunStream {
    fn new(born: u64) -> Self {
        Self {
            state: Mutex::new(RunState::default()),
            born,
            version: watch::channel(0).0,
            published: AtomicBool::new(false),
            subscribers: AtomicUsize::new(0),
        }
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }
}

impl RunState {
    fn gap(&self, requested: Option<String>) -> Option<StreamGap> {
        Some(StreamGap {
            requested,
            earliest: self.events.front()?.id.clone(),
            latest: self.events.back()?.id.clone(),
        })
    }

    /// Where a subscription starts (deer-flow's cursor resolution): `Err(gap)` for a
    /// well-formed cursor below the watermark, the offset after an exactly matching retained id,
    /// the start of the retained window otherwise.
    fn resolve(&self, cursor: Option<&str>) -> std::result::Result<u64, StreamGap> {
        let Some(cursor) = cursor else {
            return Ok(self.start_offset);
        };
        if let Some(seq) = memory_seq(cursor) {
            if !self.events.is_empty()
                && seq < self.start_offset
                && let Some(gap) = self.gap(Some(cursor.to_owned()))
            {
                return Err(gap);
            }
            if let Some(idx) = seq.checked_sub(self.start_offset)
                && let Ok(idx) = usize::try_from(idx)
                && self.events.get(idx).is_some_and(|e| e.id == cursor)
            {
                return Ok(seq + 1);
            }
        }
        if !self.events.is_empty() {
            tracing::warn!(
                cursor,
                "Last-Event-ID not retained; replaying from the earliest event"
            );
        }
        Ok(self.start_offset)
    }
}

/// `\d+-(\d+)` (full match) → seq; anything else (or a seq beyond u64) is not an id.
fn memory_seq(id: &str) -> Option<u64> {
    let (ms, seq) = id.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ms) || !digits(seq) {
        return None;
    }
    seq.parse().ok()
}

#[async_trait]
impl StreamBridge for MemoryStreamBridge {
    fn capabilities(&self) -> Capabilities {
        Capabilities::IN_PROCESS
    }

    async fn publish(&self, run_id: &str, event: &str, data: &Value) -> Result<String> {
        self.shared.check_open()?;
        validate_run_id(run_id)?;
        validate_event_name(event)?;
        let stream = self.shared.producer_stream(run_id);
        let ms = self.shared.clock.now().timestamp_millis().max(0);
        let id = {
            let mut st = lock(&stream.state);
            let id = format!("{ms}-{}", st.next_seq);
            st.next_seq += 1;
            let size = event_bytes(&id, event, data);
            st.bytes += size;
            self.shared.total_bytes.fetch_add(size, Ordering::AcqRel);
            st.events.push_back(StreamEvent {
                id: id.clone(),
                event: event.to_owned(),
                data: data.clone(),
            });
            let limit = self.shared.limits.max_run_bytes;
            while st.events.len() > self.shared.maxsize || (st.bytes > limit && st.events.len() > 1)
            {
                if let Some(old) = st.events.pop_front() {
                    // A cleanup racing this publish may have zeroed the count already.
                    let size = event_bytes(&old.id, &old.event, &old.data).min(st.bytes);
                    st.bytes -= size;
                    self.shared.total_bytes.fetch_sub(size, Ordering::AcqRel);
                }
                st.start_offset += 1;
            }
            id
        };
        stream.bump();
        self.shared.evict_over_total(run_id);
        Ok(id)
    }

    async fn publish_end(&self, run_id: &str) -> Result<()> {
        self.shared.check_open()?;
        validate_run_id(run_id)?;
        let stream = self.shared.producer_stream(run_id);
        lock(&stream.state).ended = true;
        stream.bump();
        Ok(())
    }

    fn subscribe(
        &self,
        run_id: &str,
        last_event_id: Option<&str>,
        heartbeat: Duration,
    ) -> ItemStream {
        let sub = Subscription {
            shared: self.shared.clone(),
            run_id: run_id.to_owned(),
            cursor: last_event_id.map(str::to_owned),
            heartbeat,
            attached: None,
            next_offset: 0,
            done: false,
        };
        futures::stream::unfold(sub, |mut sub| async move {
            let item = sub.next_item().await?;
            Some((item, sub))
        })
        .boxed()
    }

    async fn cleanup(&self, run_id: &str, delay: Duration) -> Result<()> {
        self.shared.check_open()?;
        validate_run_id(run_id)?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Subscribers keep their reference to the removed stream and drain it; only its bytes
        // leave the total now.
        let removed = lock(&self.shared.runs).remove(run_id);
        lock(&self.shared.evicted).remove(run_id);
        if let Some(stream) = removed {
            let bytes = std::mem::take(&mut lock(&stream.state).bytes);
            self.shared.total_bytes.fetch_sub(bytes, Ordering::AcqRel);
        }
        Ok(())
    }

    async fn stream_exists(&self, run_id: &str) -> Result<bool> {
        self.shared.check_open()?;
        validate_run_id(run_id)?;
        Ok(lock(&self.shared.runs)
            .get(run_id)
            .is_some_and(|s| s.published.load(Ordering::Acquire)))
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, Ordering::Release);
        let runs: Vec<_> = lock(&self.shared.runs).drain().map(|(_, s)| s).collect();
        for stream in runs {
            stream.bump();
        }
        Ok(())
    }
}

/// A subscriber's attachment to a run; detaching drops a never-published run's state.
#[derive(Debug)]
struct Attached {
    shared: Arc<Shared>,
    run_id: String,
    stream: Arc<RunStream>,
    rx: watch::Receiver<u64>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut runs = lock(&self.shared.runs);
        let left = self.stream.subscribers.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0
            && !self.stream.published.load(Ordering::Acquire)
            && runs
                .get(&self.run_id)
                .is_some_and(|s| Arc::ptr_eq(s, &self.stream))
        {
            runs.remove(&self.run_id);
        }
    }
}

#[derive(Debug)]
struct Subscription {
    shared: Arc<Shared>,
    run_id: String,
    cursor: Option<String>,
    heartbeat: Duration,
    attached: Option<Attached>,
    next_offset: u64,
    done: bool,
}

impl Subscription {
    fn finish(&mut self, item: Result<StreamItem>) -> Option<Result<StreamItem>> {
        self.done = true;
        // Detach now, not when the consumer drops the stream.
        self.attached = None;
        Some(item)
    }

    async fn next_item(&mut self) -> Option<Result<StreamItem>> {
        if self.done {
            return None;
        }
        if let Err(e) = self.shared.check_open() {
            return self.finish(Err(e));
        }
        if self.attached.is_none() {
            if let Err(e) = validate_run_id(&self.run_id).and(validate_heartbeat(self.heartbeat)) {
                return self.finish(Err(e));
            }
            let stream = {
                let mut runs = lock(&self.shared.runs);
                let stream = self.shared.entry(&mut runs, &self.run_id);
                stream.subscribers.fetch_add(1, Ordering::AcqRel);
                stream
            };
            let rx = stream.version.subscribe();
            let start = lock(&stream.state).resolve(self.cursor.as_deref());
            self.attached = Some(Attached {
                shared: self.shared.clone(),
                run_id: self.run_id.clone(),
                stream,
                rx,
            });
            match start {
                Ok(offset) => self.next_offset = offset,
                Err(gap) => return self.finish(Ok(StreamItem::Gap(gap))),
            }
        }
        loop {
            let att = self.attached.as_mut()?;
            att.rx.borrow_and_update();
            let step = {
                let st = lock(&att.stream.state);
                if self.shared.closed.load(Ordering::Acquire) {
                    Some(Err(Error::Closed { what: WHAT }))
                } else if self.next_offset < st.start_offset {
                    // Fell behind: exact check, `next_offset` is the next event it needs.
                    Some(Ok(st
                        .gap(self.cursor.clone())
                        .map_or(StreamItem::End, StreamItem::Gap)))
                } else if let Some(e) = usize::try_from(self.next_offset - st.start_offset)
                    .ok()
                    .and_then(|i| st.events.get(i))
                {
                    Some(Ok(StreamItem::Event(e.clone())))
                } else if st.ended {
                    Some(Ok(StreamItem::End))
                } else {
                    None
                }
            };
            match step {
                Some(Ok(StreamItem::Event(e))) => {
                    self.next_offset += 1;
                    self.cursor = Some(e.id.clone());
                    return Some(Ok(StreamItem::Event(e)));
                }
                Some(item) => return self.finish(item),
                None => {}
            }
            match tokio::time::timeout(self.heartbeat, att.rx.changed()).await {
                Err(_elapsed) => return Some(Ok(StreamItem::Heartbeat)),
                // The sender lives in the stream we hold, so `changed` cannot fail; loop either way.
                Ok(_) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(maxsize: usize, n: u64) -> RunState {
        let mut st = RunState::default();
        for seq in 0..n {
            st.events.push_back(StreamEvent {
                id: format!("1000-{seq}"),
                event: "e".into(),
                data: Value::Null,
            });
            st.next_seq += 1;
            while st.events.len() > maxsize {
                st.events.pop_front();
                st.start_offset += 1;
            }
        }
        st
    }

    /// The resolver agrees with the seed's old linear scan (exact match → index + 1, else the
    /// earliest) and turns every evicted id into a gap.
    #[test]
    fn resolve_matches_linear_scan() {
        let st = state(4, 10);
        assert_eq!(st.start_offset, 6);
        let linear = |cursor: &str| {
            st.events
                .iter()
                .position(|e| e.id == cursor)
                .map_or(st.start_offset, |i| st.start_offset + i as u64 + 1)
        };
        let mut cursors: Vec<String> = vec![
            "garbage".into(),
            "1000-x".into(),
            "999999-999999".into(),
            "1001-7".into(),
            "-1".into(),
            "".into(),
            "1000".into(),
            "1000-99999999999999999999999".into(),
        ];
        cursors.extend((6..10).map(|s| format!("1000-{s}")));
        for c in &cursors {
            assert_eq!(st.resolve(Some(c)), Ok(linear(c)), "{c:?}");
        }
        assert_eq!(st.resolve(None), Ok(6));
        for seq in 0..6 {
            let c = format!("1000-{seq}");
            assert_eq!(
                st.resolve(Some(&c)),
                Err(StreamGap {
                    requested: Some(c.clone()),
                    earliest: "1000-6".into(),
                    latest: "1000-9".into()
                })
            );
        }
        // A foreign timestamp below the watermark is conservatively a gap.
        assert!(st.resolve(Some("1001-0")).is_err());
    }

    #[test]
    fn parse_event_seq() {
        assert_eq!(memory_seq("1718000000000-0"), Some(0));
        assert_eq!(memory_seq("1718000000000-42"), Some(42));
        for bad in ["-1", "garbage", "1718000000000-x", "", "123", "1-2-3"] {
            assert_eq!(memory_seq(bad), None, "{bad:?}");
        }
    }
}
