//! Control of a task on [`SqliteFleetBackend`] (ADR 0380, section 7): records by id in
//! `switchyard_tasks`, cancel, results, retention and the end-event log
//! `switchyard_task_events`, with per-queue retention and end counts in `switchyard_queue_tasks`.
//!
//! Every step that moves a recorded task writes its record in the same statement or write
//! transaction as the queue change: submits insert through the view `switchyard_task_submit`,
//! the one-statement reserve marks the record running by a trigger, acks end records in the
//! statement before their `DELETE` (both in one savepoint of the group commit), and the other
//! steps, which already run in a `BEGIN IMMEDIATE` transaction, add their record statements
//! there. Every end appends its event, counts it and trims by the trigger `switchyard_task_end`.
//! A delivery of a recorded task has a receipt starting with `t` ([`is_recorded`]), so steps on
//! id-less deliveries run exactly as before.

mod cancel;
mod record;

use switchyard_core::fleet::{
    CancelOutcome, Keep, MAX_EVENT_ERROR_BYTES, Retention, TaskEvent, TaskEvents, TaskInfo,
    TaskState,
};

use super::*;

pub(crate) use record::*;

/// The queue's end-event log position in a read: the last event's seq, or what trims removed.
const POSITION_SQL: &str = "MAX(COALESCE((SELECT MAX(seq) FROM switchyard_task_events \
     WHERE name = ?1), 0), COALESCE((SELECT trimmed_through FROM switchyard_queue_tasks \
     WHERE name = ?1), 0))";

fn state_of(name: &str, id: &str, s: &str) -> Result<TaskState> {
    TaskState::parse(s).ok_or_else(|| {
        Error::corrupt(
            format!("switchyard_tasks[{name:?}, {id:?}].state"),
            format_args!("unknown state {s:?}"),
        )
    })
}

fn u32_of(n: Option<i64>) -> Option<u32> {
    n.and_then(|n| u32::try_from(n).ok())
}

/// A stored retention row, as [`Retention`]; `NULL` columns are the defaults.
type RetentionRow = (
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

fn retention_of(row: Option<RetentionRow>) -> Retention {
    let d = Retention::default();
    let Some((ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms)) = row else {
        return d;
    };
    let keep = |n: Option<i64>, ms: Option<i64>, d: Keep| {
        Keep::new(
            n.and_then(|n| u64::try_from(n).ok()).unwrap_or(d.count),
            ms.and_then(|ms| u64::try_from(ms).ok())
                .map_or(d.age, Duration::from_millis),
        )
    };
    Retention {
        completed: keep(ok_n, ok_ms, d.completed),
        failed: keep(bad_n, bad_ms, d.failed),
        events: keep(ev_n, ev_ms, d.events),
    }
}

fn count_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl TaskOps for SqliteFleetBackend {
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        type Row = (
            (
                String,
                i64,
                i64,
                Option<i64>,
                String,
                f64,
                Option<f64>,
                Option<f64>,
            ),
            (
                Option<f64>,
                Option<Vec<u8>>,
                Option<String>,
                Option<Vec<u8>>,
                i64,
                i64,
                i64,
            ),
        );
        // One statement: the record, its delivery and the log's position from one snapshot.
        // `live` says whether the row the record points at is still there; `held` whether the
        // seed holds the task under its id (ADR 0380, section 7).
        let row: Option<sqlx::sqlite::SqliteRow> = sqlx::query(concat!(
            "SELECT t.state, t.cancel_requested, t.attempt, t.max_attempts, t.tier, ",
            "t.submitted_at, t.started_at, t.finished_at, ",
            "p.deadline, CASE WHEN p.task_id IS NOT NULL THEN p.progress ELSE t.progress END, ",
            "t.last_error, t.result, ",
            "CASE t.state WHEN 'running' THEN p.task_id IS NOT NULL ",
            "WHEN 'waiting' THEN EXISTS (SELECT 1 FROM queues q WHERE q.id = t.row_id AND q.name = t.name) ",
            "WHEN 'scheduled' THEN EXISTS (SELECT 1 FROM queue_scheduled s WHERE s.id = t.row_id AND s.name = t.name) ",
            "ELSE 1 END, ",
            "t.state IN ('waiting', 'scheduled') AND EXISTS (SELECT 1 FROM queue_processing h ",
            "WHERE h.name = t.name AND h.task_id = t.task_id AND h.src_id IS NULL), ",
            "MAX(COALESCE((SELECT MAX(seq) FROM switchyard_task_events WHERE name = ?1), 0), ",
            "COALESCE((SELECT trimmed_through FROM switchyard_queue_tasks WHERE name = ?1), 0)) ",
            "FROM switchyard_tasks t LEFT JOIN queue_processing p ON t.state = 'running' ",
            "AND p.name = t.name AND p.task_id = t.receipt WHERE t.name = ?1 AND t.task_id = ?2"
        ))
        .bind(name)
        .bind(id)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("task_get", name, e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (
            (state, cancel, attempt, max, tier, submitted, started, finished),
            (deadline, progress, error, result, live, held, position),
        ): Row = {
            use sqlx::Row as _;
            let g = |e| db("task_get", name, e);
            (
                (
                    row.try_get(0).map_err(g)?,
                    row.try_get(1).map_err(g)?,
                    row.try_get(2).map_err(g)?,
                    row.try_get(3).map_err(g)?,
                    row.try_get(4).map_err(g)?,
                    row.try_get(5).map_err(g)?,
                    row.try_get(6).map_err(g)?,
                    row.try_get(7).map_err(g)?,
                ),
                (
                    row.try_get(8).map_err(g)?,
                    row.try_get(9).map_err(g)?,
                    row.try_get(10).map_err(g)?,
                    row.try_get(11).map_err(g)?,
                    row.try_get(12).map_err(g)?,
                    row.try_get(13).map_err(g)?,
                    row.try_get(14).map_err(g)?,
                ),
            )
        };
        let mut state = state_of(name, id, &state)?;
        let mut info = TaskInfo::new(id, state, submitted);
        // What a seed consumer did without telling the record (ADR 0380, section 7): it holds
        // a waiting task (running), drained a scheduled one (waiting), or swept our lapsed
        // delivery back to its tier (waiting). Otherwise the record's state, as last seen.
        if held != 0 {
            state = TaskState::Running;
            info.foreign = true;
        } else if live == 0 {
            info.foreign = true;
            if matches!(state, TaskState::Running | TaskState::Scheduled) {
                state = TaskState::Waiting;
            }
        }
        info.state = state;
        info.cancel_requested = cancel != 0;
        info.attempt = attempts_u32(attempt);
        info.max_attempts = u32_of(max);
        info.priority = tier_of(&tier);
        info.started_at = started;
        info.finished_at = finished;
        info.visible_until = if state == TaskState::Running && !info.foreign {
            deadline
        } else {
            None
        };
        info.progress = progress;
        info.last_error = error;
        info.result = result;
        info.events_cursor = position.to_string();
        Ok(Some(info))
    }

    async fn task_cancel(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        let op = "task_cancel";
        let mut out = Vec::with_capacity(ids.len());
        {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            for id in ids {
                out.push(Self::cancel_one(&mut tx, op, name, id).await?);
            }
            if out.contains(&CancelOutcome::Cancelled) {
                trim_ended(&mut tx, op, name).await?;
            }
            tx.commit().await.map_err(|e| db(op, name, e))?;
        }
        if out.contains(&CancelOutcome::Cancelled) {
            self.ended();
        }
        Ok(out)
    }

    async fn queue_purge_step(&self, name: &str, max: usize) -> Result<u64> {
        let op = "queue_purge";
        let removed = {
            let mut w = self.writer().await?;
            let mut tx = begin(&mut w, op, name).await?;
            // The tiers first, oldest first, then the scheduled set, within `max` rows; the
            // records of the rows removed end `cancelled` (event, count) before their rows go.
            let mut removed = 0u64;
            for (table, state, filter) in [
                ("queues", "waiting", "AND tier IN ('high', 'normal', 'low')"),
                ("queue_scheduled", "scheduled", ""),
            ] {
                let left = to_i64(max).saturating_sub(count_i64(removed));
                if left <= 0 {
                    break;
                }
                let pick =
                    format!("SELECT id FROM {table} WHERE name = ?1 {filter} ORDER BY id LIMIT ?2");
                let end = format!(
                    concat!(
                        "UPDATE switchyard_tasks SET state = 'cancelled', row_id = NULL, finished_at = ",
                        now_sql!(),
                        ", touched_at = ",
                        now_sql!(),
                        " WHERE name = ?1 AND state = '{}' AND row_id IN ({})"
                    ),
                    state, pick
                );
                sqlx::query(&end)
                    .bind(name)
                    .bind(left)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db(op, name, e))?;
                let n = sqlx::query(&format!("DELETE FROM {table} WHERE id IN ({pick})"))
                    .bind(name)
                    .bind(left)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db(op, name, e))?
                    .rows_affected();
                removed += n;
            }
            if removed > 0 {
                trim_ended(&mut tx, op, name).await?;
            }
            tx.commit().await.map_err(|e| db(op, name, e))?;
            removed
        };
        if removed > 0 {
            self.ended();
        }
        Ok(removed)
    }

    async fn task_events(&self, name: &str, after: Option<&str>, max: usize) -> Result<TaskEvents> {
        let op = "task_events";
        // One read transaction: the events, the trims and the position agree.
        let mut conn = self.r().begin().await.map_err(|e| db(op, name, e))?;
        let (trimmed, position): (i64, i64) = sqlx::query_as(&format!(
            "SELECT COALESCE((SELECT trimmed_through FROM switchyard_queue_tasks WHERE name = ?1), 0), \
             {POSITION_SQL}"
        ))
        .bind(name)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        let (from, gap) = match after {
            None => (0, false),
            Some("$") => {
                conn.commit().await.map_err(|e| db(op, name, e))?;
                return Ok(TaskEvents::new(Vec::new(), false, position.to_string()));
            }
            Some(c) => match c.parse::<u64>() {
                Ok(c) => {
                    let c = i64::try_from(c).unwrap_or(i64::MAX);
                    (c, c < trimmed)
                }
                Err(_) => (0, true),
            },
        };
        type Row = (
            i64,
            String,
            String,
            i64,
            f64,
            Option<String>,
            Option<Vec<u8>>,
            i64,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT seq, task_id, state, attempt, at, error, result, result_size \
             FROM switchyard_task_events WHERE name = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .bind(name)
        .bind(from)
        .bind(to_i64(max))
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        conn.commit().await.map_err(|e| db(op, name, e))?;
        let mut events = Vec::with_capacity(rows.len());
        for (seq, task_id, state, attempt, at, error, result, size) in rows {
            let state = state_of(name, &task_id, &state)?;
            let mut e = TaskEvent::new(seq.to_string(), task_id, state);
            e.attempt = attempts_u32(attempt);
            e.at = at;
            e.error = error.map(|s| switchyard_core::fleet::cut_to_bytes(s, MAX_EVENT_ERROR_BYTES));
            e.result = result;
            e.result_size = u64::try_from(size).unwrap_or(0);
            events.push(e);
        }
        // Where to resume: the last event; else where the read stood, never before what trims
        // removed nor past the log's end (a cursor from the future resumes from the end).
        let cursor = match events.last() {
            Some(e) => e.cursor.clone(),
            None if from > position => position.to_string(),
            None => from.max(trimmed).to_string(),
        };
        Ok(TaskEvents::new(events, gap, cursor))
    }

    fn task_events_wake(&self, _name: &str) -> Option<Arc<Notify>> {
        Some(self.inner.ended.clone())
    }

    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        let row: Option<RetentionRow> = sqlx::query_as(
            "SELECT ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms FROM switchyard_queue_tasks \
             WHERE name = ?1",
        )
        .bind(name)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("queue_retention", name, e))?;
        Ok(retention_of(row))
    }

    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        let ms = |k: Keep| Arg::Int(count_i64(k.age_ms()));
        let n = |k: Keep| Arg::Int(count_i64(k.count));
        self.inner
            .batch
            .write(
                "queue_set_retention",
                name,
                "INSERT INTO switchyard_queue_tasks (name, ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (name) DO UPDATE SET \
                 ok_n = excluded.ok_n, ok_ms = excluded.ok_ms, bad_n = excluded.bad_n, \
                 bad_ms = excluded.bad_ms, ev_n = excluded.ev_n, ev_ms = excluded.ev_ms",
                vec![
                    Arg::Text(name.to_owned()),
                    n(retention.completed),
                    ms(retention.completed),
                    n(retention.failed),
                    ms(retention.failed),
                    n(retention.events),
                    ms(retention.events),
                ],
            )
            .await?;
        Ok(())
    }

    async fn task_maintain(&self, name: &str, max: usize) -> Result<u64> {
        let op = "queue_maintain";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, name).await?;
        let (mut records, events) = Self::trim(&mut tx, name, max).await?;
        // Seed reconcile (ADR 0380, section 7): a dead record whose letter a seed consumer
        // popped or cleared (its `queue_dead` row is gone) ends `failed`; each is one lookup.
        let left = to_i64(max).saturating_sub(count_i64(records)).min(100);
        let mut ended = false;
        if left > 0 {
            let failed = sqlx::query(concat!(
                "UPDATE switchyard_tasks SET state = 'failed', row_id = NULL, finished_at = ",
                now_sql!(),
                ", touched_at = ",
                now_sql!(),
                " WHERE rowid IN (SELECT t.rowid FROM switchyard_tasks t WHERE t.name = ?1 ",
                "AND t.state = 'dead' AND t.row_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ",
                "queue_dead d WHERE d.id = t.row_id) LIMIT ?2)"
            ))
            .bind(name)
            .bind(left)
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?
            .rows_affected();
            if failed > 0 {
                trim_ended(&mut tx, op, name).await?;
                records += failed;
                ended = true;
            }
        }
        tx.commit().await.map_err(|e| db(op, name, e))?;
        drop(w);
        if ended {
            self.ended();
        }
        // A step that trimmed a full `max` of events has more to do: the front steps again.
        if events >= max as u64 {
            return Ok(records.max(max as u64));
        }
        Ok(records)
    }

    fn max_result_bytes(&self) -> usize {
        self.inner.max_result_bytes
    }
}
