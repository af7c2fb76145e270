//! `MemoryEventStore`: the reference adapter, an [`EventStoreOps`] (ADR 0371).
//!
//! Every operation runs under one lock with no await inside, which makes each indivisible. Per run it
//! keeps the positions of its events and its latest lifecycle status, and per log the set of open
//! runs, so appends cost O(batch) and claims O(open runs) (the seed's memory store scans the whole log).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset};

use super::adapter::EventStoreOps;
use super::{Appended, MAX_LINE, QueuedRun, checks};
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{Event, Payload, SchemaVersion, stamp};
use crate::status::{RunStatus, can_resume, lifecycle_status};
use crate::{Clock, Error, Result, SystemClock};

/// An [`EventStore`](super::EventStore) in process memory. Nothing survives the process.
#[derive(Debug)]
pub struct MemoryEventStore {
    clock: Arc<dyn Clock>,
    logs: Mutex<HashMap<LogId, Log>>,
}

type LogId = (String, String);

#[derive(Debug, Default)]
struct Log {
    events: Vec<Event>,
    runs: HashMap<String, RunIndex>,
    open: BTreeSet<String>,
    /// Runs waiting for the session (guarantee `line.order`), oldest first.
    line: VecDeque<QueuedRun>,
}

#[derive(Debug, Default)]
struct RunIndex {
    positions: Vec<usize>,
    life: Option<RunStatus>,
}

impl Default for MemoryEventStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryEventStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A store on an injected clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            logs: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<LogId, Log>> {
        // A panic under the lock cannot leave a half-written batch: pushes happen after every check.
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> DateTime<FixedOffset> {
        stamp(self.clock.now())
    }
}

fn log_id(ctx: &RunContext) -> LogId {
    (ctx.namespace_key().to_string(), ctx.log_key().to_string())
}

impl Log {
    fn append(
        &mut self,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
        ts: DateTime<FixedOffset>,
    ) -> Vec<Event> {
        let run_id = ctx.run_id().to_string();
        let run = self.runs.entry(run_id.clone()).or_default();
        let first_seq = run.positions.len() as u64;
        let mut stamped = Vec::with_capacity(payloads.len());
        for (seq, payload) in (first_seq..).zip(payloads) {
            let event = Event {
                v: SchemaVersion::CURRENT,
                seq,
                run_id: run_id.clone(),
                session_id: ctx.session_id().map(str::to_string),
                namespace: ctx.namespace().map(str::to_string),
                origin: origin.to_string(),
                ts,
                payload,
            };
            if let Some(status) = lifecycle_status(event.kind()) {
                run.life = Some(status);
            }
            run.positions.push(self.events.len());
            self.events.push(event.clone());
            stamped.push(event);
        }
        match run.life {
            Some(status) if status.is_open() => self.open.insert(run_id),
            _ => self.open.remove(&run_id),
        };
        stamped
    }

    fn run_events(&self, run_id: &str) -> impl Iterator<Item = &Event> {
        self.runs
            .get(run_id)
            .into_iter()
            .flat_map(|run| run.positions.iter().map(|&i| &self.events[i]))
    }

    fn last_event(&self, run_id: &str) -> Option<&Event> {
        let run = self.runs.get(run_id)?;
        run.positions.last().map(|&i| &self.events[i])
    }
}

#[async_trait]
impl EventStoreOps for MemoryEventStore {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        let ts = self.now();
        let mut logs = self.lock();
        let log = logs.entry(log_id(ctx)).or_default();
        Ok(log.append(payloads, ctx, origin, ts))
    }

    /// The run's status and the write under one lock: nothing runs between them (ADR 0365).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        let ts = self.now();
        let mut logs = self.lock();
        let life = logs
            .get(&log_id(ctx))
            .and_then(|log| log.runs.get(ctx.run_id()))
            .and_then(|run| run.life)
            .unwrap_or(RunStatus::Pending);
        if !life.is_open() {
            return Ok(Appended::NotOpen(life));
        }
        let log = logs.entry(log_id(ctx)).or_default();
        Ok(Appended::stored(
            log.append(payloads, ctx, origin, ts),
            life,
        ))
    }

    async fn read(
        &self,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>> {
        let logs = self.lock();
        let Some(log) = logs.get(&log_id(ctx)) else {
            return Ok(Vec::new());
        };
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let take = limit.map_or(usize::MAX, |l| {
            usize::try_from(l.get()).unwrap_or(usize::MAX)
        });
        Ok(log.events.iter().skip(skip).take(take).cloned().collect())
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        let logs = self.lock();
        let Some(log) = logs.get(&log_id(ctx)) else {
            return Ok(Vec::new());
        };
        Ok(log
            .run_events(ctx.run_id())
            .filter(|e| e.seq >= from_seq)
            .cloned()
            .collect())
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: Payload,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        let now = self.now();
        let stale_before = checks::stale_before(now, stale_after);
        let mut logs = self.lock();
        let log = logs.entry(log_id(ctx)).or_default();
        checks::run_is_new(log.runs.contains_key(ctx.run_id()), ctx)?;
        let mut overridden = Vec::new();
        for run_id in &log.open {
            let Some(tail) = log.last_event(run_id) else {
                continue;
            };
            if tail.ts > stale_before {
                let claim = SessionClaim {
                    held_by: Some(run_id.clone()),
                    overridden: Vec::new(),
                };
                return Ok((claim, None));
            }
            overridden.push(tail.clone());
        }
        let mut written = log.append(vec![opening], ctx, origin, now);
        let claim = SessionClaim {
            held_by: None,
            overridden,
        };
        Ok((claim, written.pop()))
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: Payload,
        origin: &str,
    ) -> Result<Option<Event>> {
        let now = self.now();
        let mut logs = self.lock();
        let Some(log) = logs.get_mut(&log_id(ctx)) else {
            return Ok(None);
        };
        let resumable = log
            .runs
            .get(ctx.run_id())
            .and_then(|run| run.life)
            .is_some_and(can_resume);
        if !resumable {
            return Ok(None);
        }
        Ok(log.append(vec![resumed], ctx, origin, now).pop())
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        let logs = self.lock();
        let mut runs: Vec<RunSummary> = logs
            .iter()
            .filter(|((ns, _), _)| ns == ctx.namespace_key())
            .flat_map(|((_, log_key), log)| {
                log.runs.iter().filter_map(move |(run_id, run)| {
                    let life = run.life?;
                    Some(RunSummary {
                        log_key: log_key.clone(),
                        run_id: run_id.clone(),
                        status: life,
                    })
                })
            })
            .filter(|summary| status.is_none_or(|s| s == summary.status))
            .collect();
        runs.sort_by(|a, b| (&a.log_key, &a.run_id).cmp(&(&b.log_key, &b.run_id)));
        Ok(runs)
    }

    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        let mut logs = self.lock();
        let log = logs.entry(log_id(ctx)).or_default();
        if log.line.iter().any(|r| r.run_id == entry.run_id) {
            return Err(Error::AlreadyExists {
                what: "waiting run",
                id: entry.run_id.clone(),
            });
        }
        if log.line.len() >= MAX_LINE {
            return Err(super::checks::line_full(ctx));
        }
        log.line.push_back(entry.clone());
        Ok(log.line.len() as u64)
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        let logs = self.lock();
        Ok(logs
            .get(&log_id(ctx))
            .map(|log| log.line.iter().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        let mut logs = self.lock();
        let Some(log) = logs.get_mut(&log_id(ctx)) else {
            return Ok(false);
        };
        let before = log.line.len();
        log.line.retain(|r| r.run_id != run_id);
        Ok(log.line.len() != before)
    }
}
