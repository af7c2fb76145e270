//! Control of a task (ADR 0380): a record per task with an id, looked up by id, cancelled while
//! waiting or running, ended with a result, kept after its end for the queue's retention, and
//! announced on the queue's end-event log.
//!
//! [`Tasks`] is the area trait; the front implements it once over
//! [`TaskOps`](super::adapter::TaskOps). Until every adapter implements it, it is a port of its
//! own with its own suite (`switchyard_conformance::fleet_task_suite!`); an adapter that has no
//! records answers [`Error::Rejected`](crate::Error::Rejected) from every method.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Priority, Receipt};
use crate::{Error, Result};

/// The largest result an ack stores by default, in bytes (1 MiB); each adapter's options can
/// change it.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1 << 20;

/// Results at most this long travel inside their end event; larger ones are read with
/// [`Tasks::task_get`].
pub const MAX_INLINE_RESULT_BYTES: usize = 1024;

/// An end event's error is cut to this many bytes.
pub const MAX_EVENT_ERROR_BYTES: usize = 1024;

/// The longest task id a record accepts, in bytes.
pub const MAX_TASK_ID_BYTES: usize = 1024;

/// Most ids one [`Tasks::task_cancel_many`] takes, and most events one read returns.
pub const MAX_TASK_BATCH: usize = 1000;

/// Where a task is in its life (ADR 0380, section 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TaskState {
    /// Submitted with a delay, or nacked or released with one; not yet in its tier.
    Scheduled,
    /// In its tier, reservable.
    Waiting,
    /// Reserved under a receipt.
    Running,
    /// Ended well: acked.
    Completed,
    /// Ended badly and no dead letter holds it (its letter was popped or cleared), or its
    /// consumer gave up on it another way.
    Failed,
    /// In the dead-letter queue.
    Dead,
    /// Ended by a cancel.
    Cancelled,
}

impl TaskState {
    /// Every state, in the order of the table above.
    pub const ALL: [TaskState; 7] = [
        TaskState::Scheduled,
        TaskState::Waiting,
        TaskState::Running,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Dead,
        TaskState::Cancelled,
    ];

    /// The state's name, as stored and as JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Scheduled => "scheduled",
            TaskState::Waiting => "waiting",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Dead => "dead",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// The state named `s`, as [`as_str`](TaskState::as_str) writes it.
    pub fn parse(s: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// Whether the task has ended (`completed`, `failed`, `dead` or `cancelled`). Only `dead`
    /// can leave its end (a dead-letter requeue makes it `waiting` again).
    pub fn is_end(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Dead | TaskState::Cancelled
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task's record, read in one atomic step by [`Tasks::task_get`]. Times are unix seconds on
/// the backend's clock.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The envelope's id.
    pub id: String,
    /// Where the task is.
    pub state: TaskState,
    /// A cancel reached the task while it ran: its holder's next extend, progress or ack meets
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub cancel_requested: bool,
    /// Deliveries so far (0 before the first), as [`Delivery::attempt`](super::Delivery) counts
    /// them.
    pub attempt: u32,
    /// The envelope's `max_attempts`, from the last body the backend was given; `None` is the
    /// consumer's default.
    pub max_attempts: Option<u32>,
    /// The tier it waits in, or came from.
    pub priority: Priority,
    /// When it was submitted.
    pub submitted_at: f64,
    /// When its latest delivery started.
    pub started_at: Option<f64>,
    /// When it ended.
    pub finished_at: Option<f64>,
    /// When its reservation lapses (running only).
    pub visible_until: Option<f64>,
    /// The last progress of its latest delivery, kept after the end.
    pub progress: Option<Vec<u8>>,
    /// The handler's last error (`last_error.message` of the last body the backend was given).
    pub last_error: Option<String>,
    /// The result its ack stored.
    pub result: Option<Vec<u8>>,
    /// A consumer that keeps no records (the Python seed's, sharing the queue) moved the task;
    /// `state` is what the backend could tell (ADR 0380, section 7).
    pub foreign: bool,
    /// The queue's end-event log position at this read: every end after it is an event after
    /// this cursor (what [`Tasks::task_events`] resumes from to wait for this task's end).
    pub events_cursor: String,
}

impl TaskInfo {
    /// A record of `id` in `state`, the other fields empty (adapters fill in the rest).
    pub fn new(id: impl Into<String>, state: TaskState, submitted_at: f64) -> Self {
        TaskInfo {
            id: id.into(),
            state,
            cancel_requested: false,
            attempt: 0,
            max_attempts: None,
            priority: Priority::Normal,
            submitted_at,
            started_at: None,
            finished_at: None,
            visible_until: None,
            progress: None,
            last_error: None,
            result: None,
            foreign: false,
            events_cursor: String::new(),
        }
    }
}

/// What a cancel did to one task (ADR 0380, section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It was scheduled or waiting: it is gone and will never be delivered.
    Cancelled,
    /// It was running: its holder learns it at its next extend, progress or ack, and it ends
    /// `cancelled` without a retry.
    CancelRequested,
    /// It had already ended, in this state; nothing changed.
    Finished(TaskState),
    /// No record has this id (never submitted with one, or removed by retention).
    Unknown,
}

impl CancelOutcome {
    /// The outcome's name: `cancelled`, `cancel_requested`, `finished` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelOutcome::Cancelled => "cancelled",
            CancelOutcome::CancelRequested => "cancel_requested",
            CancelOutcome::Finished(_) => "finished",
            CancelOutcome::Unknown => "unknown",
        }
    }
}

/// How many finished records of one kind a queue keeps, and for how long: a record is removed
/// when either limit is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Most records kept; 0 keeps none (the ending step removes it).
    pub count: u64,
    /// Longest a record is kept after its end.
    pub age: Duration,
}

impl Keep {
    /// The most a count may be.
    pub const MAX_COUNT: u64 = 1_000_000;
    /// The longest an age may be (30 days).
    pub const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

    /// `count` records for `age`.
    pub const fn new(count: u64, age: Duration) -> Self {
        Keep { count, age }
    }

    /// The age in whole milliseconds.
    pub fn age_ms(&self) -> u64 {
        u64::try_from(self.age.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A queue's retention (BullMQ's `removeOnComplete` / `removeOnFail`): what the backend keeps of
/// finished tasks and of the end-event log. `dead` records are never trimmed: they live as long
/// as their dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Records of `completed` tasks.
    pub completed: Keep,
    /// Records of `failed` and `cancelled` tasks.
    pub failed: Keep,
    /// Events of the end-event log (at least 100).
    pub events: Keep,
}

impl Default for Retention {
    /// 1,000 records of each kind for 24 hours; 10,000 events for 24 hours.
    fn default() -> Self {
        const DAY: Duration = Duration::from_secs(24 * 3600);
        Retention {
            completed: Keep::new(1000, DAY),
            failed: Keep::new(1000, DAY),
            events: Keep::new(10_000, DAY),
        }
    }
}

impl Retention {
    /// Checks every bound: counts at most [`Keep::MAX_COUNT`], ages at most [`Keep::MAX_AGE`],
    /// and at least 100 events kept.
    pub fn check(&self) -> Result<()> {
        for (field, keep) in [
            ("retention.completed", self.completed),
            ("retention.failed", self.failed),
            ("retention.events", self.events),
        ] {
            if keep.count > Keep::MAX_COUNT {
                return Err(Error::invalid(
                    format!("{field}.count"),
                    format_args!("must be at most {}", Keep::MAX_COUNT),
                ));
            }
            if keep.age > Keep::MAX_AGE {
                return Err(Error::invalid(
                    format!("{field}.age"),
                    "must be at most 30 days",
                ));
            }
        }
        if self.events.count < 100 {
            return Err(Error::invalid(
                "retention.events.count",
                "must be at least 100 (readers resume from the log)",
            ));
        }
        Ok(())
    }
}

/// One end on a queue's end-event log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskEvent {
    /// Where this event is in the log; resume after it with [`Tasks::task_events`]. Opaque: a
    /// Redis stream entry id, or a decimal sequence number.
    pub cursor: String,
    /// The task that ended.
    pub task_id: String,
    /// How it ended: `completed`, `failed`, `dead` or `cancelled`.
    pub state: TaskState,
    /// Deliveries it had.
    pub attempt: u32,
    /// When it ended (backend clock).
    pub at: f64,
    /// Its last error, cut to [`MAX_EVENT_ERROR_BYTES`].
    pub error: Option<String>,
    /// Its result when at most [`MAX_INLINE_RESULT_BYTES`] long.
    pub result: Option<Vec<u8>>,
    /// The length of its result (0 without one); a result too long to travel inline is read
    /// with [`Tasks::task_get`].
    pub result_size: u64,
}

impl TaskEvent {
    /// An event of `task_id` ending in `state`; the adapter fills in the rest.
    pub fn new(cursor: impl Into<String>, task_id: impl Into<String>, state: TaskState) -> Self {
        TaskEvent {
            cursor: cursor.into(),
            task_id: task_id.into(),
            state,
            attempt: 0,
            at: 0.0,
            error: None,
            result: None,
            result_size: 0,
        }
    }
}

/// What one read of the end-event log returned.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TaskEvents {
    /// The events after the cursor, in log order.
    pub events: Vec<TaskEvent>,
    /// The cursor was older than the oldest kept event (trimmed away) or malformed: events may
    /// have been missed; `events` starts at the oldest kept.
    pub gap: bool,
    /// Where to resume: the last event's cursor, or the read's position when it returned none
    /// (the log's end for `$`).
    pub cursor: String,
}

impl TaskEvents {
    /// A read that found `events`, resuming at `cursor`.
    pub fn new(events: Vec<TaskEvent>, gap: bool, cursor: impl Into<String>) -> Self {
        TaskEvents {
            events,
            gap,
            cursor: cursor.into(),
        }
    }
}

/// Control of a task: records, cancel, results, retention and end events (ADR 0380).
///
/// A **record** exists for every task submitted through the port with an id (the envelope's
/// `"id"`, see [`task_head`](super::task_head)); bodies without one are queued, delivered and
/// dead-lettered as before, with no record and no event. Every operation that moves a recorded
/// task writes its record in the same atomic step (one Redis script on the queue's slot, one
/// SQLite transaction, one PostgreSQL statement, one lock).
///
/// # Guarantees
///
/// `switchyard_conformance::fleet_task_suite!` has one case per guarantee, named after it.
///
/// 1. **task_lookup** (`task.lookup`) — `task_get` reads a record in one atomic step: its state
///    (`scheduled`, `waiting`, `running`, `completed`, `failed`, `dead`, `cancelled`), attempt
///    (deliveries so far), `max_attempts`, priority, submitted/started/finished times, visibility
///    while running, progress, last error and result, and the end-event log's position at that
///    read. An unknown id is `None`; a body without an id has no record.
/// 2. **task_unique_id** (`task.unique_id`) — an id is unique in its queue while its task is
///    live (`scheduled`, `waiting`, `running`) or dead-lettered (`dead`): a submit, push or
///    push_many of such an id is [`Error::AlreadyExists`](crate::Error::AlreadyExists) and
///    writes nothing (a batch with one taken id, or the same id twice, pushes none of it). A
///    duplicate idempotency key answers `Duplicate` first, whatever the id. Nacks, releases,
///    sweeps and promotions move the existing record. The id of a `completed`, `failed` or
///    `cancelled` task is free: a submit of it starts a new task under it, whose record replaces
///    the finished one in the same step (nothing of the old record stays, not its result nor its
///    place in retention; its end event stays in the log). A dead letter holds its id until it
///    leaves the dead-letter queue, so a replay (`dlq_pop`, then a submit of the body) works.
/// 3. **task_cancel_waiting** (`task.cancel_waiting`) — cancelling a scheduled or waiting task
///    removes it and ends its record `cancelled` in one step (`CancelOutcome::Cancelled`): it is
///    no longer counted by `queue_stats`, shown by `queue_peek`, promoted or reserved. An ended
///    task answers `Finished(state)` and changes nothing; an unknown id `Unknown`.
/// 4. **task_cancel_running** (`task.cancel_running`) — cancelling a running task marks it
///    (`CancelRequested`). From then that delivery's `queue_extend` and `queue_progress` write
///    nothing and return [`Error::Cancelled`](crate::Error::Cancelled); its `queue_ack`,
///    `queue_nack`, `queue_release` and `queue_fail` end it `cancelled` (no requeue, no dead
///    letter, no result) and return `Error::Cancelled`; `queue_ack_many` answers `false` for it
///    and ends it alike; a sweep of its lapsed reservation ends it `cancelled`. It is never
///    retried and never completes.
/// 5. **task_cancel_race** (`task.cancel_race`) — a cancel concurrent with reserves either
///    prevents the delivery or reaches its holder: no task completes after its cancel answered
///    `Cancelled` or `CancelRequested`, and none is delivered after `Cancelled`.
/// 6. **task_cancel_bulk** (`task.cancel_bulk`) — `task_cancel_many` answers per id, in the
///    order given (a repeated id alike), for up to 1,000 ids in one step; `queue_purge` cancels
///    every scheduled and waiting task (records end `cancelled` with an event; bodies without an
///    id are dropped) and returns how many it removed.
/// 7. **task_results** (`task.results`) — `queue_complete` acks and stores the result with the
///    end in one step; progress and the last error stay on the record after the end; submitted ≤
///    started ≤ finished. A result over [`Tasks::max_result_bytes`] is
///    [`Error::InvalidInput`](crate::Error::InvalidInput) and changes nothing.
/// 8. **task_retention** (`task.retention`) — finished records are kept per the queue's
///    [`Retention`] (read back as set; defaults when unset): the ending step and `queue_maintain`
///    remove records past the count or the age, oldest first; a count of 0 keeps none; `dead`
///    records stay while their letter does.
/// 9. **task_events** (`task.events`) — every end (`completed`, `failed`, `dead`,
///    `cancelled`) appends exactly one event in the step that ends the task, so the log's order
///    is the order of the ends. `task_events` returns the events after a cursor (`None`: from the
///    oldest kept; `"$"`: only ends after the call), resumable with no loss; a cursor older than
///    the oldest kept event, or malformed, reads from the oldest kept with `gap`; results up to
///    1 KiB ride inline; a blocking read wakes on a new end.
/// 10. **task_end_counts** (`task.end_counts`) — `queue_stats` counts the ends of recorded tasks
///     per kind (`completed`, `failed`, `dead_lettered`, `cancelled`), written in the ending step,
///     so they agree with the events.
#[async_trait]
pub trait Tasks: Send + Sync {
    /// The record of task `id` of queue `name` (guarantee `task.lookup`).
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>>;
    /// Cancels task `id` (guarantees `task.cancel_waiting`, `task.cancel_running`). After
    /// `CancelRequested` the holder is also told at once on topic `fleet.cancel.{name}` (the id as
    /// the message body); its next heartbeat is the guaranteed path.
    async fn task_cancel(&self, name: &str, id: &str) -> Result<CancelOutcome>;
    /// Cancels up to 1,000 tasks in one step; one outcome per id, in order (guarantee
    /// `task.cancel_bulk`).
    async fn task_cancel_many(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>>;
    /// Cancels every scheduled and waiting task of the queue; how many were removed (guarantee
    /// `task.cancel_bulk`). Tasks submitted meanwhile may survive it.
    async fn queue_purge(&self, name: &str) -> Result<u64>;
    /// Acks the delivery and stores `result` with the end (guarantee `task.results`); `false`
    /// when the receipt is not current, as `queue_ack`.
    async fn queue_complete(&self, name: &str, receipt: &Receipt, result: &[u8]) -> Result<bool>;
    /// Up to `max` (1 to 1,000) events after `after`, waiting up to `timeout` for one when there
    /// is none (guarantee `task.events`).
    async fn task_events(
        &self,
        name: &str,
        after: Option<&str>,
        max: usize,
        timeout: Duration,
    ) -> Result<TaskEvents>;
    /// The queue's retention; the defaults when none was set (guarantee `task.retention`).
    async fn queue_retention(&self, name: &str) -> Result<Retention>;
    /// Sets the queue's retention (guarantee `task.retention`).
    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()>;
    /// Removes what retention no longer keeps (records, events) and repairs records a consumer
    /// without records moved; how many records it removed or repaired.
    async fn queue_maintain(&self, name: &str) -> Result<u64>;
    /// The largest result `queue_complete` stores, in bytes.
    fn max_result_bytes(&self) -> usize;
}

/// Checks a task id: 1 to [`MAX_TASK_ID_BYTES`] bytes.
pub fn check_task_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("id", "must not be empty"));
    }
    if id.len() > MAX_TASK_ID_BYTES {
        return Err(Error::invalid(
            "id",
            format_args!("must be at most {MAX_TASK_ID_BYTES} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_their_names() {
        for state in TaskState::ALL {
            assert_eq!(TaskState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_string(&state).expect("a name"),
                format!("\"{state}\"")
            );
        }
        assert_eq!(TaskState::parse("ready"), None);
        assert!(TaskState::Dead.is_end() && !TaskState::Running.is_end());
    }

    #[test]
    fn retention_bounds_name_the_field() {
        assert!(Retention::default().check().is_ok());
        let mut r = Retention::default();
        r.failed.count = Keep::MAX_COUNT + 1;
        let e = r.check().expect_err("out of bounds").to_string();
        assert!(e.contains("retention.failed.count"), "{e}");
        let mut r = Retention::default();
        r.events.count = 99;
        assert!(r.check().is_err());
        let mut r = Retention::default();
        r.completed.age = Keep::MAX_AGE + Duration::from_secs(1);
        assert!(
            r.check()
                .expect_err("out of bounds")
                .to_string()
                .contains("age")
        );
    }
}
