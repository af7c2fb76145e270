//! Control of a queue's tasks by id (ADR 0380): look-up, cancel, purge, results, waiting for an
//! end, the end-event log, retention and maintenance. Only tasks pushed with an id through the
//! port have a record (every task [`Queue`] pushes has one).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_core::fleet::{
    CancelOutcome, Delivery, MAX_TASK_BATCH, Retention, TaskEvent, TaskEvents, TaskInfo, TaskState,
};
use switchyard_core::{Error, Result};
use tokio::time::Instant;

use super::Queue;

/// How a task ended, with its result decoded as `R`: what [`Queue::result`] and [`Queue::wait`]
/// answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskEnd<R> {
    /// The task's id.
    pub id: String,
    /// `completed`, `failed`, `dead` or `cancelled`.
    pub state: TaskState,
    /// Deliveries it had.
    pub attempt: u32,
    /// Its last error, if a handler recorded one.
    pub error: Option<String>,
    /// The result its handler returned (`Output<R>`), decoded from JSON; `None` without one.
    pub result: Option<R>,
    /// When it ended (backend clock, unix seconds).
    pub finished_at: Option<f64>,
}

/// What [`Queue::wait`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited<R> {
    /// The task ended.
    Ended(TaskEnd<R>),
    /// It had not ended when the timeout passed.
    TimedOut,
    /// No record has this id (never pushed with one, or removed by retention).
    Unknown,
}

impl<R> Waited<R> {
    /// The end, if the task ended.
    pub fn ended(self) -> Option<TaskEnd<R>> {
        match self {
            Waited::Ended(end) => Some(end),
            Waited::TimedOut | Waited::Unknown => None,
        }
    }
}

fn decode<R: DeserializeOwned>(bytes: Option<&[u8]>) -> Result<Option<R>> {
    bytes
        .map(|b| serde_json::from_slice(b).map_err(|e| Error::invalid("result", e)))
        .transpose()
}

fn end_of<R: DeserializeOwned>(info: &TaskInfo) -> Result<TaskEnd<R>> {
    Ok(TaskEnd {
        id: info.id.clone(),
        state: info.state,
        attempt: info.attempt,
        error: info.last_error.clone(),
        result: decode(info.result.as_deref())?,
        finished_at: info.finished_at,
    })
}

fn end_of_event<R: DeserializeOwned>(ev: &TaskEvent) -> Result<TaskEnd<R>> {
    Ok(TaskEnd {
        id: ev.task_id.clone(),
        state: ev.state,
        attempt: ev.attempt,
        error: ev.error.clone(),
        result: decode(ev.result.as_deref())?,
        finished_at: Some(ev.at),
    })
}

impl<T> Queue<T> {
    /// The record of task `id`, read in one step; `None` when no record has it (guarantee
    /// `task.lookup`). Its result and progress are the stored bytes (JSON when written by this
    /// crate); [`Queue::result`] decodes the result.
    pub async fn get(&self, id: &str) -> Result<Option<TaskInfo>> {
        self.backend.task_get(&self.name, id).await
    }

    /// Cancels task `id`: a scheduled or waiting task is removed at once (`Cancelled`); a
    /// running one is marked (`CancelRequested`) and its consumer told, so its handler's
    /// [`CancelToken`](crate::CancelToken) fires and it ends `cancelled`, never retried
    /// (guarantees `task.cancel_waiting`, `task.cancel_running`).
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome> {
        self.backend.task_cancel(&self.name, id).await
    }

    /// Cancels up to 1,000 tasks in one step; one outcome per id, in order (guarantee
    /// `task.cancel_bulk`).
    pub async fn cancel_many(&self, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        self.backend.task_cancel_many(&self.name, ids).await
    }

    /// Cancels every scheduled and waiting task; how many were removed (guarantee
    /// `task.cancel_bulk`). Running tasks are not touched.
    pub async fn purge(&self) -> Result<u64> {
        self.backend.queue_purge(&self.name).await
    }

    /// How task `id` ended, with its result decoded as `R`; `None` when it has not ended or no
    /// record has it. One read.
    pub async fn result<R: DeserializeOwned>(&self, id: &str) -> Result<Option<TaskEnd<R>>> {
        match self.get(id).await? {
            Some(info) if info.state.is_end() => end_of(&info).map(Some),
            _ => Ok(None),
        }
    }

    /// Waits up to `timeout` for task `id` to end. One read of the record; if it has not ended,
    /// the end-event log is followed from the read's position until this task's event (a result
    /// over 1 KiB costs one more read).
    pub async fn wait<R: DeserializeOwned>(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Waited<R>> {
        let deadline = Instant::now().checked_add(timeout);
        let Some(info) = self.get(id).await? else {
            return Ok(Waited::Unknown);
        };
        if info.state.is_end() {
            return end_of(&info).map(Waited::Ended);
        }
        let mut cursor = info.events_cursor;
        loop {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => timeout,
            };
            if left.is_zero() {
                return Ok(Waited::TimedOut);
            }
            let read = self
                .backend
                .task_events(&self.name, Some(&cursor), MAX_TASK_BATCH, left)
                .await?;
            if let Some(ev) = read.events.iter().find(|e| e.task_id == id) {
                if ev.result.is_none() && ev.result_size > 0 {
                    // Too long to travel inline: read it from the record.
                    return match self.get(id).await? {
                        Some(info) if info.state.is_end() => end_of(&info).map(Waited::Ended),
                        // Removed by retention meanwhile: the end without its result.
                        _ => end_of_event(ev).map(Waited::Ended),
                    };
                }
                return end_of_event(ev).map(Waited::Ended);
            }
            if read.gap {
                // Events were trimmed before we read them: this task's may be among them.
                match self.get(id).await? {
                    None => return Ok(Waited::Unknown),
                    Some(info) if info.state.is_end() => return end_of(&info).map(Waited::Ended),
                    Some(_) => {}
                }
            }
            if let Some(last) = read.events.last() {
                cursor = last.cursor.clone();
            } else if !read.cursor.is_empty() {
                cursor = read.cursor;
            }
        }
    }

    /// Up to `max` (1 to 1,000) end events after `after` (`None`: from the oldest kept; `"$"`:
    /// only ends after the call), waiting up to `timeout` for one (guarantee `task.events`).
    pub async fn events(
        &self,
        after: Option<&str>,
        max: usize,
        timeout: Duration,
    ) -> Result<TaskEvents> {
        self.backend
            .task_events(&self.name, after, max, timeout)
            .await
    }

    /// The queue's retention (the defaults when none was set; guarantee `task.retention`).
    pub async fn retention(&self) -> Result<Retention> {
        self.backend.queue_retention(&self.name).await
    }

    /// Sets what the queue keeps of finished tasks and of its end-event log (guarantee
    /// `task.retention`).
    pub async fn set_retention(&self, retention: Retention) -> Result<()> {
        self.backend
            .queue_set_retention(&self.name, retention)
            .await
    }

    /// Removes what retention no longer keeps; how many records it removed or repaired. The
    /// [`Maintainer`](crate::Maintainer) and every [`Consumer`](crate::Consumer) call it.
    pub async fn maintain(&self) -> Result<u64> {
        self.backend.queue_maintain(&self.name).await
    }

    /// Acks the delivery and stores `result` as JSON with its end (guarantee `task.results`);
    /// `false` when the delivery is no longer current. A result over the backend's
    /// `max_result_bytes()` is [`Error::InvalidInput`] and ends nothing; a cancelled task is
    /// [`Error::Cancelled`].
    pub async fn complete<R: Serialize + ?Sized>(
        &self,
        delivery: &Delivery,
        result: &R,
    ) -> Result<bool> {
        let doc = serde_json::to_vec(result).map_err(|e| Error::invalid("result", e))?;
        self.backend
            .queue_complete(&self.name, &delivery.receipt, &doc)
            .await
    }
}
