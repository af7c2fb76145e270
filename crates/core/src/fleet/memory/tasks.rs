//! Control of a task in [`MemoryFleetBackend`] (ADR 0380): the records, their retention, the
//! end-event log and the end counts of each queue, kept with the queue under the one state lock,
//! so every queue step writes its records in the same step. The reference adapter: cancelling a
//! waiting task scans its tier (O(n)).

use super::*;
use crate::fleet::{
    CancelOutcome, MAX_EVENT_ERROR_BYTES, MAX_INLINE_RESULT_BYTES, Retention, TaskEvent,
    TaskEvents, TaskInfo, cut_to_bytes,
};

/// How many finished records one ending step removes at most, so an ack stays O(1) amortized.
const TRIM_PER_END: usize = 10;

/// One task's record.
#[derive(Debug, Clone)]
struct Record {
    state: TaskState,
    cancel_requested: bool,
    attempt: u32,
    max_attempts: Option<u32>,
    priority: Priority,
    submitted_at: f64,
    started_at: Option<f64>,
    finished_at: Option<f64>,
    /// The receipt of its delivery while running.
    receipt: Option<String>,
    progress: Option<Vec<u8>>,
    last_error: Option<String>,
    result: Option<Vec<u8>>,
}

/// The bucket of finished records a state is trimmed in: completed, or failed and cancelled.
/// Dead records are in none: they live as long as their letter.
fn bucket(state: TaskState) -> Option<usize> {
    match state {
        TaskState::Completed => Some(0),
        TaskState::Failed | TaskState::Cancelled => Some(1),
        _ => None,
    }
}

/// A queue's records, retention, end-event log and end counts.
#[derive(Debug, Default)]
pub(super) struct Records {
    records: HashMap<String, Record>,
    /// Finished records per bucket, `(finished_at, id)` in the order they ended.
    done: [VecDeque<(f64, String)>; 2],
    events: VecDeque<(u64, TaskEvent)>,
    /// The sequence number of the last event appended (0: none yet).
    last_seq: u64,
    /// The sequence number of the last event a trim removed (0: none).
    trimmed_through: u64,
    retention: Option<Retention>,
    /// Ends so far: completed, failed, dead, cancelled.
    ends: [u64; 4],
}

impl Records {
    fn retention(&self) -> Retention {
        self.retention.unwrap_or_default()
    }

    /// Whether `id` is taken: its task is live or dead-lettered (guarantee `task.unique_id`).
    pub(super) fn taken(&self, id: &str) -> bool {
        self.records
            .get(id)
            .is_some_and(|r| bucket(r.state).is_none())
    }

    /// A new record for a submitted task; a finished task's record under the same id is replaced,
    /// and leaves its retention bucket.
    pub(super) fn submitted(&mut self, head: &TaskHead, priority: Priority, now: f64) {
        let Some(id) = &head.id else { return };
        if let Some(b) = self.records.get(id).and_then(|r| bucket(r.state)) {
            self.done[b].retain(|(_, done)| done != id);
        }
        self.records.insert(
            id.clone(),
            Record {
                state: TaskState::Waiting,
                cancel_requested: false,
                attempt: 0,
                max_attempts: head.max_attempts,
                priority,
                submitted_at: now,
                started_at: None,
                finished_at: None,
                receipt: None,
                progress: None,
                last_error: head.last_error.clone(),
                result: None,
            },
        );
    }

    /// `entry` was put in its tier or the scheduled set (`state`).
    pub(super) fn moved(&mut self, entry: &Entry, state: TaskState) {
        if let Some(r) = self.record_of(entry) {
            r.state = state;
            r.priority = entry.priority;
            r.receipt = None;
        }
    }

    /// `entry` was delivered under `receipt`.
    pub(super) fn started(&mut self, entry: &Entry, receipt: &str, now: f64) {
        if let Some(r) = self.record_of(entry) {
            r.state = TaskState::Running;
            r.attempt = entry.attempts;
            r.started_at = Some(now);
            r.receipt = Some(receipt.to_owned());
            r.progress = None;
        }
    }

    /// A delivery's holder gave `head` (a nack's or fail's new body): its maximum and error.
    pub(super) fn given(&mut self, entry: &Entry, head: &TaskHead) {
        if let Some(r) = self.record_of(entry) {
            if head.max_attempts.is_some() {
                r.max_attempts = head.max_attempts;
            }
            if head.last_error.is_some() {
                r.last_error.clone_from(&head.last_error);
            }
        }
    }

    /// Whether the delivery of `entry` was asked to stop.
    pub(super) fn cancel_requested(&self, entry: &Entry) -> bool {
        entry
            .id
            .as_ref()
            .and_then(|id| self.records.get(id))
            .is_some_and(|r| r.cancel_requested)
    }

    fn record_of(&mut self, entry: &Entry) -> Option<&mut Record> {
        self.records.get_mut(entry.id.as_deref()?)
    }

    /// A delivery of `entry` ended (with its last progress): the record keeps the progress.
    pub(super) fn delivery_ended(&mut self, entry: &Entry, progress: Option<Vec<u8>>) {
        if let Some(r) = self.record_of(entry) {
            r.progress = progress;
        }
    }

    /// Ends the task `id` in `state` (with `result`), in the caller's step: the record, its
    /// event, the count and the trim of its bucket.
    pub(super) fn end(&mut self, id: &str, state: TaskState, result: Option<Vec<u8>>, now: f64) {
        let Some(r) = self.records.get_mut(id) else {
            return;
        };
        r.state = state;
        r.finished_at = Some(now);
        r.receipt = None;
        r.cancel_requested = false;
        if result.is_some() {
            r.result = result;
        }
        let size = r.result.as_ref().map_or(0, Vec::len);
        self.last_seq += 1;
        let mut event = TaskEvent::new(self.last_seq.to_string(), id, state);
        event.attempt = r.attempt;
        event.at = now;
        event.error = r
            .last_error
            .clone()
            .map(|e| cut_to_bytes(e, MAX_EVENT_ERROR_BYTES));
        event.result = r
            .result
            .clone()
            .filter(|res| res.len() <= MAX_INLINE_RESULT_BYTES);
        event.result_size = size as u64;
        self.events.push_back((self.last_seq, event));
        let slot = match state {
            TaskState::Completed => 0,
            TaskState::Failed => 1,
            TaskState::Dead => 2,
            _ => 3,
        };
        self.ends[slot] += 1;
        if let Some(b) = bucket(state) {
            self.done[b].push_back((now, id.to_owned()));
        }
        self.trim(now, TRIM_PER_END);
    }

    /// Ends the task of `entry`, if it has a record.
    pub(super) fn end_entry(
        &mut self,
        entry: &Entry,
        state: TaskState,
        result: Option<Vec<u8>>,
        now: f64,
    ) {
        if let Some(id) = &entry.id {
            self.end(id, state, result, now);
        }
    }

    /// Removes up to `max` finished records past their bucket's count or age, oldest first, and
    /// the events past the log's; how many records it removed.
    fn trim(&mut self, now: f64, max: usize) -> u64 {
        let keep = self.retention();
        let mut removed = 0u64;
        for (b, keep) in [keep.completed, keep.failed].into_iter().enumerate() {
            let oldest_kept = now - keep.age.as_secs_f64();
            let count = usize::try_from(keep.count).unwrap_or(usize::MAX);
            while removed < max as u64 {
                let Some((at, _)) = self.done[b].front() else {
                    break;
                };
                if self.done[b].len() <= count && *at >= oldest_kept {
                    break;
                }
                if let Some((_, id)) = self.done[b].pop_front() {
                    self.records.remove(&id);
                    removed += 1;
                }
            }
        }
        let oldest_event = now - keep.events.age.as_secs_f64();
        let count = usize::try_from(keep.events.count).unwrap_or(usize::MAX);
        while let Some((seq, e)) = self.events.front() {
            if self.events.len() <= count && e.at >= oldest_event {
                break;
            }
            self.trimmed_through = *seq;
            self.events.pop_front();
        }
        removed
    }

    /// A new letter `head` (no delivery): a recorded task ends dead. A record whose task is still
    /// queued or running elsewhere is left alone.
    pub(super) fn dead_lettered(&mut self, head: &TaskHead, now: f64) {
        let Some(id) = &head.id else { return };
        if self.taken(id) {
            return;
        }
        self.submitted(head, Priority::Normal, now);
        self.end(id, TaskState::Dead, None, now);
    }

    /// A letter left the dead-letter queue: to the tier (`Some(priority)`, attempts reset) or
    /// gone (`None`: the task ends `failed`).
    pub(super) fn letter_left(
        &mut self,
        body: &[u8],
        to: Option<Priority>,
        now: f64,
    ) -> Option<String> {
        let id = task_id_of(body)?;
        let dead = self
            .records
            .get(&id)
            .is_some_and(|r| r.state == TaskState::Dead);
        if !dead {
            return None;
        }
        match to {
            Some(priority) => {
                if let Some(r) = self.records.get_mut(&id) {
                    r.state = TaskState::Waiting;
                    r.priority = priority;
                    r.attempt = 0;
                    r.finished_at = None;
                    r.started_at = None;
                }
                Some(id)
            }
            None => {
                self.end(&id, TaskState::Failed, None, now);
                None
            }
        }
    }

    fn info(&self, id: &str, q: &Queue) -> Option<TaskInfo> {
        let r = self.records.get(id)?;
        let mut t = TaskInfo::new(id, r.state, r.submitted_at);
        t.cancel_requested = r.cancel_requested;
        t.attempt = r.attempt;
        t.max_attempts = r.max_attempts;
        t.priority = r.priority;
        t.started_at = r.started_at;
        t.finished_at = r.finished_at;
        t.progress.clone_from(&r.progress);
        t.last_error.clone_from(&r.last_error);
        t.result.clone_from(&r.result);
        if let Some(held) = r.receipt.as_ref().and_then(|rc| q.processing.get(rc)) {
            t.visible_until = Some(held.deadline);
            t.progress.clone_from(&held.progress);
        }
        t.events_cursor = self.last_seq.to_string();
        Some(t)
    }
}

/// Removes the waiting or scheduled task `id` from its tier or the scheduled set.
fn take_queued(q: &mut Queue, id: &str) -> bool {
    let is = |e: &Entry| e.id.as_deref() == Some(id);
    for t in &mut q.tiers {
        if let Some(at) = t.iter().position(is) {
            t.remove(at);
            return true;
        }
    }
    if let Some(at) = q.scheduled.iter().position(|(_, _, e)| is(e)) {
        q.scheduled.remove(at);
        return true;
    }
    false
}

impl MemoryFleetBackend {
    fn ended(&self) {
        self.shared.ended.notify_waiters();
    }

    /// A holder's call on a delivery whose task was cancelled: the delivery ends `cancelled`
    /// and the caller gets [`Error::Cancelled`]. `None` when the delivery goes on as usual.
    pub(super) fn end_if_cancelled(
        &self,
        q: &mut Queue,
        receipt: &Receipt,
        now: f64,
    ) -> Option<Error> {
        let held = q.processing.get(receipt.as_str())?;
        if !q.tasks.cancel_requested(&held.entry) {
            return None;
        }
        let held = q.processing.remove(receipt.as_str())?;
        let id = held.entry.id.clone().unwrap_or_default();
        q.tasks.delivery_ended(&held.entry, held.progress);
        q.tasks.end(&id, TaskState::Cancelled, None, now);
        self.ended();
        Some(Error::Cancelled { what: "task", id })
    }

    /// Extend and progress of a cancelled delivery: refused, nothing written.
    pub(super) fn refuse_if_cancelled(q: &Queue, receipt: &Receipt) -> Result<()> {
        match q.processing.get(receipt.as_str()) {
            Some(held) if q.tasks.cancel_requested(&held.entry) => Err(Error::Cancelled {
                what: "task",
                id: held.entry.id.clone().unwrap_or_default(),
            }),
            _ => Ok(()),
        }
    }

    /// Wakes the readers of the end-event log after a step that ended tasks.
    pub(super) fn announce_ends(&self) {
        self.ended();
    }
}

#[async_trait]
impl TaskOps for MemoryFleetBackend {
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        let st = self.state();
        Ok(st.queues.get(name).and_then(|q| q.tasks.info(id, q)))
    }

    async fn task_cancel(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        let now = self.now();
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(vec![CancelOutcome::Unknown; ids.len()]);
        };
        let mut out = Vec::with_capacity(ids.len());
        let mut ended = false;
        for id in ids {
            let Some(r) = q.tasks.records.get_mut(id) else {
                out.push(CancelOutcome::Unknown);
                continue;
            };
            out.push(match r.state {
                TaskState::Running => {
                    r.cancel_requested = true;
                    CancelOutcome::CancelRequested
                }
                TaskState::Waiting | TaskState::Scheduled => {
                    take_queued(q, id);
                    q.tasks.end(id, TaskState::Cancelled, None, now);
                    ended = true;
                    CancelOutcome::Cancelled
                }
                end => CancelOutcome::Finished(end),
            });
        }
        drop(st);
        if ended {
            self.ended();
        }
        Ok(out)
    }

    async fn queue_purge_step(&self, name: &str, max: usize) -> Result<u64> {
        let now = self.now();
        let mut st = self.state();
        let Some(q) = st.queues.get_mut(name) else {
            return Ok(0);
        };
        let mut taken: Vec<Entry> = Vec::new();
        for t in &mut q.tiers {
            let n = (max - taken.len()).min(t.len());
            taken.extend(t.drain(..n));
        }
        let n = (max - taken.len()).min(q.scheduled.len());
        taken.extend(q.scheduled.drain(..n).map(|(_, _, e)| e));
        for entry in &taken {
            q.tasks.end_entry(entry, TaskState::Cancelled, None, now);
        }
        drop(st);
        if taken.iter().any(|e| e.id.is_some()) {
            self.ended();
        }
        Ok(taken.len() as u64)
    }

    async fn task_events(&self, name: &str, after: Option<&str>, max: usize) -> Result<TaskEvents> {
        let st = self.state();
        let empty = Records::default();
        let tasks = st.queues.get(name).map_or(&empty, |q| &q.tasks);
        let (from, gap) = match after {
            None => (0, false),
            Some("$") => (tasks.last_seq, false),
            Some(c) => match c.parse::<u64>() {
                Ok(n) => (n, n < tasks.trimmed_through),
                Err(_) => (0, true),
            },
        };
        let events: Vec<TaskEvent> = tasks
            .events
            .iter()
            .filter(|(seq, _)| *seq > from)
            .take(max)
            .map(|(_, e)| e.clone())
            .collect();
        let cursor = events.last().map_or_else(
            || from.max(tasks.trimmed_through).to_string(),
            |e| e.cursor.clone(),
        );
        // A cursor from the future (or a gap's oldest) resumes from where the log is.
        let cursor = if events.is_empty() && from > tasks.last_seq {
            tasks.last_seq.to_string()
        } else {
            cursor
        };
        Ok(TaskEvents::new(events, gap, cursor))
    }

    fn task_events_wake(&self, _name: &str) -> Option<Arc<Notify>> {
        Some(self.shared.ended.clone())
    }

    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or_else(Retention::default, |q| q.tasks.retention()))
    }

    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        let mut st = self.state();
        st.queues
            .entry(name.to_string())
            .or_default()
            .tasks
            .retention = Some(retention);
        Ok(())
    }

    async fn task_maintain(&self, name: &str, max: usize) -> Result<u64> {
        let now = self.now();
        let mut st = self.state();
        Ok(st
            .queues
            .get_mut(name)
            .map_or(0, |q| q.tasks.trim(now, max)))
    }
}

/// The end counts of `q`, into `stats` (guarantee `task.end_counts`).
pub(super) fn end_counts(q: &Queue, stats: &mut QueueStats) {
    let [completed, failed, dead, cancelled] = q.tasks.ends;
    stats.completed = completed;
    stats.failed = failed;
    stats.dead_lettered = dead;
    stats.cancelled = cancelled;
}
