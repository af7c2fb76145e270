//! Control of a task (ADR 0380): read a task's record by id (and wait for its end), cancel one,
//! many or every waiting task, store a result with the ack, follow the queue's end events, and
//! read or set what the queue keeps of finished tasks.
//!
//! Results and progress are bytes in the backend. Both the gateway and the typed consumer write
//! JSON, so an answer shows them as the JSON they hold; bytes that are not JSON (a library user's
//! own encoding) are shown as `null` with their standard base64 in `result_base64` /
//! `progress_base64`, so nothing is lost and nothing is guessed.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::Receipt;
use switchyard_core::fleet::{
    CancelOutcome, Keep, MAX_TASK_BATCH, MAX_TASK_ID_BYTES, Retention, TaskEvent, TaskInfo,
    TaskState,
};
use tokio::time::Instant;
use utoipa::{IntoParams, ToSchema};

use super::{Queues, priority_name, seconds_at_most, secs};
use crate::{Error, Result};

/// The longest `wait_seconds` of a task read (the gateway caps it further by its request
/// deadline).
pub const MAX_TASK_WAIT_SECS: f64 = 60.0;

/// The longest event-log cursor a client may send (a Redis stream entry id or a decimal
/// sequence number is far shorter).
pub const MAX_CURSOR_BYTES: usize = 64;

/// The most events one read of the end-event log returns to the gateway's stream.
pub const EVENTS_PER_READ: usize = 100;

/// A task's record (`GET /v1/queues/{queue}/tasks/{id}`). Times are unix seconds on the
/// backend's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskJson {
    pub id: String,
    /// `scheduled`, `waiting`, `running`, `completed`, `failed`, `dead` or `cancelled`.
    pub state: TaskState,
    /// A cancel reached the task while it ran: its worker's next extend, progress, ack, nack or
    /// fail answers 409 `cancelled`.
    pub cancel_requested: bool,
    /// Deliveries so far (0 before the first).
    pub attempt: u32,
    /// The envelope's `max_attempts`; null: the consumer's default.
    pub max_attempts: Option<u32>,
    /// `high`, `normal` or `low`.
    pub priority: String,
    pub submitted_at: f64,
    /// When its latest delivery started.
    pub started_at: Option<f64>,
    /// When it ended.
    pub finished_at: Option<f64>,
    /// When its reservation lapses (running only).
    pub visible_until: Option<f64>,
    /// The last progress its worker reported, kept after the end; null when none, or when it is
    /// not JSON (then see `progress_base64`).
    pub progress: Value,
    /// The progress's bytes in standard base64, only when they are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_base64: Option<String>,
    /// The worker's last error message.
    pub last_error: Option<String>,
    /// The result its ack stored; null when none, or when it is not JSON (then see
    /// `result_base64`).
    pub result: Value,
    /// The result's bytes in standard base64, only when they are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<String>,
    /// A consumer that keeps no records (the Python seed's, sharing the queue) moved the task;
    /// `state` is what the backend could tell.
    pub foreign: bool,
    /// The queue's end-event log position at this read: `GET …/events?after=` this cursor sees
    /// the task's end.
    pub events_cursor: String,
}

/// JSON when `bytes` are JSON, else null and their base64.
fn json_or_base64(bytes: Option<&[u8]>) -> (Value, Option<String>) {
    match bytes {
        None => (Value::Null, None),
        Some(b) => match serde_json::from_slice::<Value>(b) {
            Ok(v) => (v, None),
            Err(_) => (Value::Null, Some(STANDARD.encode(b))),
        },
    }
}

impl TaskJson {
    /// The answer for record `info`.
    pub fn new(info: &TaskInfo) -> Self {
        let (progress, progress_base64) = json_or_base64(info.progress.as_deref());
        let (result, result_base64) = json_or_base64(info.result.as_deref());
        TaskJson {
            id: info.id.clone(),
            state: info.state,
            cancel_requested: info.cancel_requested,
            attempt: info.attempt,
            max_attempts: info.max_attempts,
            priority: priority_name(info.priority).to_string(),
            submitted_at: info.submitted_at,
            started_at: info.started_at,
            finished_at: info.finished_at,
            visible_until: info.visible_until,
            progress,
            progress_base64,
            last_error: info.last_error.clone(),
            result,
            result_base64,
            foreign: info.foreign,
            events_cursor: info.events_cursor.clone(),
        }
    }

    /// The record as its end event tells it (the record itself may be gone already: a
    /// retention count of 0 removes it in the ending step).
    fn ended(mut self, event: &TaskEvent) -> Self {
        self.state = event.state;
        self.attempt = event.attempt;
        self.finished_at = Some(event.at);
        self.visible_until = None;
        self.cancel_requested = false;
        if event.error.is_some() {
            self.last_error = event.error.clone();
        }
        let (result, result_base64) = json_or_base64(event.result.as_deref());
        self.result = result;
        self.result_base64 = result_base64;
        self.events_cursor = event.cursor.clone();
        self
    }
}

/// `?wait_seconds=` of a task read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskQuery {
    /// Seconds to wait for the task to end (0 to 60, default 0): a long poll that answers the
    /// record once it ends, or as it is when the wait (or the gateway's request deadline) runs
    /// out.
    #[param(minimum = 0, maximum = 60)]
    pub wait_seconds: Option<f64>,
}

impl TaskQuery {
    /// The wait, or a 422 naming `wait_seconds`.
    pub fn wait(&self) -> Result<Duration> {
        let wait = seconds_at_most("wait_seconds", self.wait_seconds, MAX_TASK_WAIT_SECS)?;
        Ok(secs(wait.unwrap_or(0.0)))
    }
}

/// What a cancel did to one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Cancelled {
    /// `cancelled` (it was scheduled or waiting: it will never run), `cancel_requested` (it
    /// runs: its worker is told, and it ends `cancelled` without a retry) or `finished` (it had
    /// ended; nothing changed).
    pub outcome: String,
    /// Its state now: `cancelled`, `running` (cancel requested), or the end it had.
    pub state: TaskState,
}

/// One id's answer of a bulk cancel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CancelResult {
    pub id: String,
    /// As for one task, or `unknown` (no record has this id).
    pub outcome: String,
    /// Null for an unknown id.
    pub state: Option<TaskState>,
}

/// A bulk cancel (`POST /v1/queues/{queue}/tasks/cancel`): either `ids` or `all_waiting`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// Tasks to cancel, 1 to 1000 ids, in one atomic step.
    pub ids: Option<Vec<String>>,
    /// `true`: cancel every scheduled and waiting task of the queue (tasks without an id are
    /// dropped); running ones are not touched.
    pub all_waiting: Option<bool>,
}

/// The answer of a bulk cancel: `results` for `ids`, `purged` for `all_waiting`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CancelAnswer {
    /// One answer per id, in the order given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<CancelResult>>,
    /// How many scheduled and waiting tasks were removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purged: Option<u64>,
}

/// An ack (`…/reservations/{receipt}/ack`), with the task's result if it has one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckBody {
    /// Any JSON, stored with the end (at most the backend's `max_result_bytes` written compact,
    /// 1 MiB by default) and read back by `GET …/tasks/{id}` and the end events.
    pub result: Option<Value>,
}

/// One end on the queue's event log, as the events stream's `data` carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskEventJson {
    /// Resume after this event (the SSE `id:`).
    pub cursor: String,
    pub task_id: String,
    /// `completed`, `failed`, `dead` or `cancelled`.
    pub state: TaskState,
    pub attempt: u32,
    /// Unix seconds (backend clock).
    pub at: f64,
    /// The last error, cut to 1 KiB.
    pub error: Option<String>,
    /// The result when it is at most 1 KiB (JSON, else null and `result_base64`); a larger one
    /// is read with `GET …/tasks/{id}`.
    pub result: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<String>,
    /// The result's length in bytes (0 without one).
    pub result_size: u64,
}

/// One page of the end-event log (`GET /v1/queues/{queue}/events/page`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventsPage {
    /// The queue.
    pub queue: String,
    /// The ends after the cursor, oldest first (at most `limit`).
    pub events: Vec<TaskEventJson>,
    /// The cursor was older than the oldest kept event (trimmed away) or not one of this log's:
    /// events may have been missed, and `events` starts at the oldest kept.
    pub gap: bool,
    /// Where the next page starts: pass it as `after`. Fewer events than `limit` means the
    /// page reached the log's end at this read.
    pub cursor: String,
}

impl TaskEventJson {
    pub fn new(e: &TaskEvent) -> Self {
        let (result, result_base64) = json_or_base64(e.result.as_deref());
        TaskEventJson {
            cursor: e.cursor.clone(),
            task_id: e.task_id.clone(),
            state: e.state,
            attempt: e.attempt,
            at: e.at,
            error: e.error.clone(),
            result,
            result_base64,
            result_size: e.result_size,
        }
    }
}

/// What one kind of finished record (or the event log) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeepJson {
    /// Most kept (0 to 1000000; the events keep at least 100).
    #[schema(minimum = 0, maximum = 1000000)]
    pub count: u64,
    /// Longest kept after the end, in seconds (0 to 2592000, 30 days).
    #[schema(minimum = 0, maximum = 2592000)]
    pub age_seconds: f64,
}

impl KeepJson {
    fn new(k: Keep) -> Self {
        KeepJson {
            count: k.count,
            age_seconds: k.age.as_secs_f64(),
        }
    }

    fn keep(&self, field: &str) -> Result<Keep> {
        if self.count > Keep::MAX_COUNT {
            let f = format!("{field}.count");
            return Err(Error::invalid(
                f.clone(),
                format!("`{f}` must be at most {}", Keep::MAX_COUNT),
            ));
        }
        let max = Keep::MAX_AGE.as_secs_f64();
        let age = seconds_at_most(&format!("{field}.age_seconds"), Some(self.age_seconds), max)?;
        Ok(Keep::new(self.count, secs(age.unwrap_or(0.0))))
    }
}

/// A queue's retention (`GET`/`PUT /v1/queues/{queue}/retention`): what it keeps of finished
/// tasks (`completed`; `failed` covers failed and cancelled ones; dead ones live as long as their
/// dead letter) and of its end-event log.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RetentionJson {
    pub completed: KeepJson,
    pub failed: KeepJson,
    pub events: KeepJson,
}

impl RetentionJson {
    pub fn new(r: &Retention) -> Self {
        RetentionJson {
            completed: KeepJson::new(r.completed),
            failed: KeepJson::new(r.failed),
            events: KeepJson::new(r.events),
        }
    }
}

/// A retention to set: the kinds given replace the queue's; the others stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionBody {
    pub completed: Option<KeepJson>,
    pub failed: Option<KeepJson>,
    pub events: Option<KeepJson>,
}

impl RetentionBody {
    /// `current` with this body's kinds, or a 422 naming the field out of bounds.
    pub fn apply(&self, current: Retention) -> Result<Retention> {
        let mut r = current;
        if let Some(k) = &self.completed {
            r.completed = k.keep("completed")?;
        }
        if let Some(k) = &self.failed {
            r.failed = k.keep("failed")?;
        }
        if let Some(k) = &self.events {
            r.events = k.keep("events")?;
            if r.events.count < 100 {
                return Err(Error::invalid(
                    "events.count",
                    "`events.count` must be at least 100: readers resume from the log",
                ));
            }
        }
        Ok(r)
    }

    /// Checks the bounds alone (before a write starts).
    pub fn check(&self) -> Result<()> {
        self.apply(Retention::default()).map(|_| ())
    }
}

/// Checks a task id from a path or a body: 1 to 1024 bytes (a 422 naming `field`).
pub fn check_task_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_TASK_ID_BYTES {
        return Err(Error::invalid(
            field,
            format!("`{field}` must be 1..={MAX_TASK_ID_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Checks an event-log cursor a client sent (`Last-Event-ID`, `?after=`): at most 64 bytes of
/// visible ASCII (a 422 naming `field`). `$` means "only new ends".
pub fn check_cursor(field: &str, cursor: &str) -> Result<()> {
    if cursor.len() > MAX_CURSOR_BYTES || !cursor.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid(
            field,
            format!("`{field}` must be at most {MAX_CURSOR_BYTES} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// The 404 of an unknown task.
pub fn no_task(queue: &str, id: &str) -> Error {
    Error::not_found(
        "no_task",
        format!(
            "queue {queue:?} has no task {id:?}: it was never submitted with this id, or \
             its record was removed by the queue's retention"
        ),
    )
}

fn outcome_state(o: CancelOutcome) -> Option<(String, TaskState)> {
    match o {
        CancelOutcome::Cancelled => Some(("cancelled".into(), TaskState::Cancelled)),
        CancelOutcome::CancelRequested => Some(("cancel_requested".into(), TaskState::Running)),
        CancelOutcome::Finished(state) => Some(("finished".into(), state)),
        CancelOutcome::Unknown => None,
    }
}

impl Queues {
    /// The record of task `id`, or 404 `no_task`.
    pub async fn task(&self, queue: &str, id: &str) -> Result<TaskJson> {
        check_task_id("id", id)?;
        match self.fleet.task_get(queue, id).await? {
            Some(info) => Ok(TaskJson::new(&info)),
            None => Err(no_task(queue, id)),
        }
    }

    /// The record of task `id` once it ends, or as it is after `wait` (404 `no_task` when there
    /// is none). Waits on the end-event log from the record's own cursor, so no end can fall
    /// between the read and the wait.
    pub async fn task_wait(&self, queue: &str, id: &str, wait: Duration) -> Result<TaskJson> {
        let first = self.task(queue, id).await?;
        if first.state.is_end() || wait.is_zero() {
            return Ok(first);
        }
        let deadline = Instant::now() + wait;
        let mut known = first;
        let mut cursor = known.events_cursor.clone();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(known);
            }
            let read = self
                .fleet
                .task_events(queue, Some(&cursor), MAX_TASK_BATCH, left)
                .await?;
            if read.gap {
                // Ends were trimmed past us: the record says whether ours was among them.
                known = match self.fleet.task_get(queue, id).await? {
                    Some(info) => TaskJson::new(&info),
                    None => return Ok(known),
                };
                if known.state.is_end() {
                    return Ok(known);
                }
            }
            if let Some(event) = read.events.iter().find(|e| e.task_id == id) {
                // The record has the result even when it was too long to travel inline.
                return Ok(match self.fleet.task_get(queue, id).await? {
                    Some(info) if info.state.is_end() => TaskJson::new(&info),
                    _ => known.ended(event),
                });
            }
            if !read.cursor.is_empty() {
                cursor = read.cursor;
            } else if let Some(last) = read.events.last() {
                cursor = last.cursor.clone();
            }
        }
    }

    /// Cancels task `id` (404 `no_task` when unknown).
    pub async fn cancel(&self, queue: &str, id: &str) -> Result<Cancelled> {
        check_task_id("id", id)?;
        let outcome = self.fleet.task_cancel(queue, id).await?;
        match outcome_state(outcome) {
            Some((outcome, state)) => Ok(Cancelled { outcome, state }),
            None => Err(no_task(queue, id)),
        }
    }

    /// Cancels up to 1000 tasks by id in one step, or every scheduled and waiting task.
    pub async fn cancel_many(&self, queue: &str, body: CancelBody) -> Result<CancelAnswer> {
        let all = body.all_waiting.unwrap_or(false);
        match (body.ids, all) {
            (Some(_), true) => Err(Error::invalid(
                "all_waiting",
                "give either `ids` or `all_waiting`, not both",
            )),
            (None, false) => Err(Error::invalid(
                "ids",
                "give `ids` (1 to 1000 task ids) or `\"all_waiting\": true`",
            )),
            (None, true) => Ok(CancelAnswer {
                results: None,
                purged: Some(self.fleet.queue_purge(queue).await?),
            }),
            (Some(ids), false) => {
                if ids.is_empty() || ids.len() > MAX_TASK_BATCH {
                    return Err(Error::invalid(
                        "ids",
                        format!("`ids` must hold 1 to {MAX_TASK_BATCH} task ids"),
                    ));
                }
                for (i, id) in ids.iter().enumerate() {
                    check_task_id(&format!("ids[{i}]"), id)?;
                }
                let outcomes = self.fleet.task_cancel_many(queue, &ids).await?;
                let results = ids
                    .into_iter()
                    .zip(outcomes)
                    .map(|(id, o)| match outcome_state(o) {
                        Some((outcome, state)) => CancelResult {
                            id,
                            outcome,
                            state: Some(state),
                        },
                        None => CancelResult {
                            id,
                            outcome: "unknown".into(),
                            state: None,
                        },
                    })
                    .collect();
                Ok(CancelAnswer {
                    results: Some(results),
                    purged: None,
                })
            }
        }
    }

    /// The largest result an ack stores, in bytes (the backend's `max_result_bytes`).
    pub fn max_result_bytes(&self) -> usize {
        self.fleet.max_result_bytes()
    }

    /// Ends the delivery successfully, storing `result` (written compact) with the end when
    /// given; a result larger than [`max_result_bytes`](Self::max_result_bytes) is refused
    /// (`result_too_large`, with `limit`) and nothing changes.
    pub async fn ack_with(
        &self,
        queue: &str,
        receipt: &Receipt,
        result: Option<&Value>,
    ) -> Result<()> {
        let Some(result) = result else {
            return self.ack(queue, receipt).await;
        };
        let bytes =
            serde_json::to_vec(result).map_err(|e| Error::invalid("result", e.to_string()))?;
        let limit = self.max_result_bytes();
        if bytes.len() > limit {
            return Err(Error::TooLarge {
                field: "result".into(),
                code: "result_too_large",
                message: format!(
                    "the result is {} bytes written compact, more than this queue's backend \
                     stores ({limit} bytes): store large outputs elsewhere and return a reference",
                    bytes.len()
                ),
                limit: limit as u64,
            });
        }
        let done = self.fleet.queue_complete(queue, receipt, &bytes).await?;
        if done {
            Ok(())
        } else {
            Err(super::worker::not_current())
        }
    }

    /// Up to `max` end events after `after` (`None`: from the oldest kept; `"$"`: only ends
    /// after the call), waiting up to `timeout` while there is none.
    pub async fn events(
        &self,
        queue: &str,
        after: Option<&str>,
        max: usize,
        timeout: Duration,
    ) -> Result<switchyard_core::fleet::TaskEvents> {
        if let Some(c) = after {
            check_cursor("after", c)?;
        }
        Ok(self.fleet.task_events(queue, after, max, timeout).await?)
    }

    /// The queue's retention (the defaults when none was set).
    pub async fn retention(&self, queue: &str) -> Result<RetentionJson> {
        Ok(RetentionJson::new(
            &self.fleet.queue_retention(queue).await?,
        ))
    }

    /// Sets the kinds `body` names (the others stay); answers the retention now in force.
    pub async fn set_retention(&self, queue: &str, body: &RetentionBody) -> Result<RetentionJson> {
        body.check()?;
        let current = self.fleet.queue_retention(queue).await?;
        let next = body.apply(current)?;
        self.fleet.queue_set_retention(queue, next).await?;
        Ok(RetentionJson::new(
            &self.fleet.queue_retention(queue).await?,
        ))
    }
}
