//! The recurring-schedule scheduler: reads every stored [`ScheduleSpec`] and enqueues each due
//! tick once (ADR 0301).
//!
//! Any number of schedulers may run against one backend, in one process or many. A tick is
//! enqueued through [`queue_submit`](switchyard_core::fleet::JobQueue::queue_submit) with the
//! idempotency key `(schedule:{name}, {tick})` (guarantees `queue.submit_once`, `queue.delayed` and
//! `schedule.stored`), so the backend takes one task per tick whoever submits it; the last fired
//! tick kept in KV only saves work. A scheduler killed between its submit and that bookkeeping
//! leaves the key behind, and the next scheduler's submit of the same tick is a duplicate that
//! enqueues nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use switchyard_core::fleet::{FleetBackend, IdempotencyKey, Submit, SubmitOutcome};
use switchyard_core::{Error, Result};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::schedule::{CatchUp, ScheduleSpec};
use super::{Envelope, unix_now, uuid4_hex};

/// Settings of a [`Scheduler`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SchedulerOptions {
    /// How often the schedules are read again. A round also runs at the soonest next tick of the
    /// schedules last read, so a one-second cron fires every second. Default 1 s.
    pub poll: Duration,
    /// With `catch_up: "skip"`, a tick still fires when it is at most this old (or one `poll`,
    /// whichever is longer). Default 5 s.
    pub grace: Duration,
    /// How long a tick's idempotency key is kept; raised to at least 7 days, longer than any
    /// outage a scheduler takes over after. Default 7 days.
    pub idempotency_ttl: Duration,
    /// KV namespace of the last fired tick per schedule. Default `schedule-state`.
    pub state_namespace: String,
}

/// The least idempotency TTL of a tick's key.
const MIN_IDEMPOTENCY_TTL: Duration = Duration::from_secs(7 * 86_400);

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(5),
            idempotency_ttl: MIN_IDEMPOTENCY_TTL,
            state_namespace: "schedule-state".to_string(),
        }
    }
}

impl SchedulerOptions {
    /// Sets the poll interval (at least 10 ms).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Sets the freshness window of `catch_up: "skip"`.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets the KV namespace of the bookkeeping.
    pub fn state_namespace(mut self, ns: impl Into<String>) -> Self {
        self.state_namespace = ns.into();
        self
    }
}

/// One tick a scheduler submitted.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Fired {
    /// The schedule's name.
    pub schedule: String,
    /// The tick.
    pub tick: DateTime<Utc>,
    /// The task's id (the first submitter's when this one was a duplicate).
    pub task_id: String,
    /// `true` when this submit enqueued the task, `false` when another scheduler (or an earlier
    /// run of this one) already had.
    pub enqueued: bool,
}

/// Fires the ticks of every stored schedule; see the module docs.
#[derive(Debug)]
pub struct Scheduler {
    backend: Arc<dyn FleetBackend>,
    options: SchedulerOptions,
    /// The document last reported as unusable, per schedule, so a bad document is logged once
    /// rather than on every poll.
    reported: Mutex<HashMap<String, Vec<u8>>>,
}

/// A running [`Scheduler`]. Dropping it stops the scheduler after its current round.
#[derive(Debug)]
pub struct SchedulerHandle {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl SchedulerHandle {
    /// Asks the scheduler to stop after its current round (a round is never cut between a submit
    /// and its bookkeeping).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until the scheduler has stopped (call [`SchedulerHandle::stop`] first, or it waits
    /// for ever).
    pub async fn join(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops and waits.
    pub async fn shutdown(self) {
        self.stop();
        self.join().await;
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl Scheduler {
    /// A scheduler over `backend`; [`Scheduler::run_due`] runs one round,
    /// [`Scheduler::spawn`] runs rounds until stopped.
    pub fn new(backend: Arc<dyn FleetBackend>, options: SchedulerOptions) -> Self {
        Scheduler {
            backend,
            options,
            reported: Mutex::new(HashMap::new()),
        }
    }

    /// Runs a scheduler on the current tokio runtime until the handle stops it. A round that
    /// fails (the backend is down) is logged and tried again at the next poll.
    pub fn spawn(backend: Arc<dyn FleetBackend>, options: SchedulerOptions) -> SchedulerHandle {
        let (stop, mut stop_rx) = watch::channel(false);
        let scheduler = Scheduler::new(backend, options);
        let task = tokio::spawn(async move {
            let poll = scheduler.options.poll.max(Duration::from_millis(10));
            while !*stop_rx.borrow() {
                let now = Utc::now();
                let next = match scheduler.round(now).await {
                    Ok((_, next)) => next,
                    Err(e) => {
                        tracing::warn!(error = %e, "schedule round failed");
                        None
                    }
                };
                let wait = wait_until(now, poll, next);
                tokio::select! {
                    _ = stop_rx.wait_for(|s| *s) => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        });
        SchedulerHandle {
            stop,
            task: Some(task),
        }
    }

    /// One round at `now`: reads every schedule and fires each one's due tick (see
    /// [`ScheduleSpec::latest_at_or_before`]) once. A schedule whose document or tick fails is
    /// logged and left for the next round; only failing to list the schedules is an error.
    pub async fn run_due(&self, now: DateTime<Utc>) -> Result<Vec<Fired>> {
        Ok(self.round(now).await?.0)
    }

    /// A round, and the soonest tick after `now` of the enabled schedules.
    async fn round(&self, now: DateTime<Utc>) -> Result<(Vec<Fired>, Option<DateTime<Utc>>)> {
        let docs = self.backend.schedule_list().await?;
        self.forget_reports(&docs);
        let mut fired = Vec::new();
        let mut soonest: Option<DateTime<Utc>> = None;
        for (name, doc) in docs {
            let spec = match ScheduleSpec::from_json(&doc) {
                Ok(spec) => spec,
                Err(e) => {
                    self.report(&name, &doc, &e);
                    continue;
                }
            };
            if !spec.enabled {
                continue;
            }
            match self.fire_due(&name, &spec, now).await {
                Ok(Some(f)) => fired.push(f),
                Ok(None) => {}
                Err(e) => tracing::warn!(schedule = %name, error = %e, "schedule tick failed"),
            }
            if let Ok(Some(next)) = spec.next_after(now) {
                soonest = Some(soonest.map_or(next, |s| s.min(next)));
            }
        }
        Ok((fired, soonest))
    }

    /// Fires `spec`'s latest tick at or before `now` if it is due and not fired yet.
    async fn fire_due(
        &self,
        name: &str,
        spec: &ScheduleSpec,
        now: DateTime<Utc>,
    ) -> Result<Option<Fired>> {
        let Some(tick) = spec.latest_at_or_before(now)? else {
            return Ok(None);
        };
        let tick_secs = tick.timestamp();
        if tick_secs <= spec.created_at {
            return Ok(None);
        }
        if spec.catch_up == CatchUp::Skip {
            let fresh = self.options.poll.max(self.options.grace);
            let age = (now - tick).to_std().unwrap_or_default();
            if age > fresh {
                return Ok(None);
            }
        }
        let ns = &self.options.state_namespace;
        if let Some(last) = self.backend.kv_get(ns, name).await? {
            let last = std::str::from_utf8(&last)
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            if last.is_some_and(|last| last >= tick_secs) {
                return Ok(None);
            }
        }
        let id = uuid4_hex();
        let body = Envelope::new(id.clone(), spec.payload.clone(), unix_now(), None, None);
        let idem_ns = format!("schedule:{name}");
        let key = tick_secs.to_string();
        let submit = Submit::new().priority(spec.tier()).idem(IdempotencyKey {
            ns: &idem_ns,
            key: &key,
            value: id.as_bytes(),
            ttl: Some(self.options.idempotency_ttl.max(MIN_IDEMPOTENCY_TTL)),
        });
        let outcome = self
            .backend
            .queue_submit(&spec.queue, &body.to_bytes(), &submit)
            .await?;
        // Bookkeeping only: a scheduler that dies before this line leaves the idempotency key,
        // and whoever submits the tick next gets a duplicate.
        self.backend.kv_set(ns, name, key.as_bytes(), None).await?;
        let (task_id, enqueued) = match outcome {
            SubmitOutcome::Enqueued => (id, true),
            SubmitOutcome::Duplicate(first) => {
                (String::from_utf8_lossy(&first).into_owned(), false)
            }
        };
        if enqueued {
            tracing::debug!(schedule = %name, tick = %tick, task_id = %task_id, queue = %spec.queue, "schedule fired");
        }
        Ok(Some(Fired {
            schedule: name.to_string(),
            tick,
            task_id,
            enqueued,
        }))
    }

    /// Logs an unusable document once per distinct content.
    fn report(&self, name: &str, doc: &[u8], error: &Error) {
        let mut reported = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if reported.get(name).is_some_and(|d| d == doc) {
            return;
        }
        reported.insert(name.to_string(), doc.to_vec());
        tracing::warn!(schedule = %name, error = %error, "schedule document is unusable; it fires nothing until fixed");
    }

    /// Drops reports of schedules that were deleted or changed.
    fn forget_reports(&self, docs: &std::collections::BTreeMap<String, Vec<u8>>) {
        let mut reported = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        reported.retain(|name, doc| docs.get(name).is_some_and(|d| d == doc));
    }
}

/// How long to sleep after a round at `now`: until the soonest next tick (a little after it, so
/// the tick is at or before the clock when the round runs), at most one `poll`.
fn wait_until(now: DateTime<Utc>, poll: Duration, next: Option<DateTime<Utc>>) -> Duration {
    const AFTER_TICK: Duration = Duration::from_millis(15);
    let elapsed = (Utc::now() - now).to_std().unwrap_or_default();
    let by_poll = poll.saturating_sub(elapsed);
    match next {
        // A tick that passed during the round is due at once.
        Some(n) => ((n - Utc::now()).to_std().unwrap_or_default() + AFTER_TICK).min(by_poll),
        None => by_poll,
    }
}
