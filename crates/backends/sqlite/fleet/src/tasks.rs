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

use switchyard_core::fleet::{
    CancelOutcome, Keep, MAX_EVENT_ERROR_BYTES, Retention, TaskEvent, TaskEvents, TaskInfo,
    TaskState,
};

use super::*;

/// The trim an ending step makes (ADR 0380, section 5): at most 10 ended records of each bucket
/// past its count and at most 10 past its age, oldest first; parameter 1 the queue. The rest is
/// `queue_maintain`'s.
pub(crate) const TRIM_SQL: &str = concat!(
    "DELETE FROM switchyard_tasks WHERE rowid IN (",
    "SELECT rowid FROM (SELECT rowid FROM switchyard_tasks WHERE name = ?1 AND done = 1 ",
    "ORDER BY finished_at, rowid LIMIT COALESCE((SELECT MIN(10, MAX(0, kept_ok - COALESCE(ok_n, 1000))) ",
    "FROM switchyard_queue_tasks WHERE name = ?1), 0)) ",
    "UNION ALL SELECT rowid FROM (SELECT rowid FROM switchyard_tasks WHERE name = ?1 AND done = 2 ",
    "ORDER BY finished_at, rowid LIMIT COALESCE((SELECT MIN(10, MAX(0, kept_bad - COALESCE(bad_n, 1000))) ",
    "FROM switchyard_queue_tasks WHERE name = ?1), 0)) ",
    "UNION ALL SELECT rowid FROM (SELECT rowid FROM switchyard_tasks WHERE name = ?1 AND done = 1 ",
    "AND finished_at <= ",
    now_sql!(),
    " - COALESCE((SELECT ok_ms FROM switchyard_queue_tasks WHERE name = ?1), 86400000) / 1000.0 ",
    "ORDER BY finished_at, rowid LIMIT 10) ",
    "UNION ALL SELECT rowid FROM (SELECT rowid FROM switchyard_tasks WHERE name = ?1 AND done = 2 ",
    "AND finished_at <= ",
    now_sql!(),
    " - COALESCE((SELECT bad_ms FROM switchyard_queue_tasks WHERE name = ?1), 86400000) / 1000.0 ",
    "ORDER BY finished_at, rowid LIMIT 10))"
);

/// Runs [`TRIM_SQL`] for queue `name` in the caller's step.
pub(crate) async fn trim_ended(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
) -> Result<()> {
    sqlx::query(TRIM_SQL)
        .bind(name)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
    Ok(())
}

/// The record of the delivery under `receipt` while it runs: its task id and whether a cancel
/// reached it. `None` for a delivery without a record.
pub(crate) async fn running_record(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    receipt: &str,
) -> Result<Option<(String, bool)>> {
    let row: Option<(String, i64)> = sqlx::query_as(
        "SELECT task_id, cancel_requested FROM switchyard_tasks \
         WHERE name = ?1 AND state = 'running' AND receipt = ?2",
    )
    .bind(name)
    .bind(receipt)
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(row.map(|(id, c)| (id, c != 0)))
}

/// Ends the delivery of task `id` as `cancelled` (its reservation already removed by the
/// caller): no requeue, no dead letter, no result; the delivery's progress is kept.
pub(crate) async fn end_delivery_cancelled(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    id: &str,
    progress: Option<&[u8]>,
) -> Result<()> {
    sqlx::query(concat!(
        "UPDATE switchyard_tasks SET state = 'cancelled', progress = ?3, result = NULL, ",
        "cancel_requested = 0, row_id = NULL, finished_at = ",
        now_sql!(),
        ", touched_at = ",
        now_sql!(),
        " WHERE name = ?1 AND task_id = ?2"
    ))
    .bind(name)
    .bind(id)
    .bind(progress)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    trim_ended(conn, op, name).await
}

/// The record of the task that sat in row `from_row` as `from` now sits in row `to_row` as `to`
/// (a promotion: `scheduled` → `waiting`).
pub(crate) async fn moved(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    from: &str,
    from_row: i64,
    to: &str,
    to_row: i64,
) -> Result<()> {
    sqlx::query(concat!(
        "UPDATE switchyard_tasks SET state = ?4, row_id = ?5, touched_at = ",
        now_sql!(),
        " WHERE name = ?1 AND state = ?2 AND row_id = ?3"
    ))
    .bind(name)
    .bind(from)
    .bind(from_row)
    .bind(to)
    .bind(to_row)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(())
}

/// The delivered task `id` is back in row `row` as `state` (`waiting` or `scheduled`), after a
/// nack (with the new body's head), a release or a sweep; the delivery's progress is kept.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn requeued(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    id: &str,
    state: &str,
    row: i64,
    progress: Option<&[u8]>,
    head: Option<&TaskHead>,
) -> Result<()> {
    let (set_head, max, error) = match head {
        Some(h) => (1, h.max_attempts.map(i64::from), h.last_error.as_deref()),
        None => (0, None, None),
    };
    sqlx::query(concat!(
        "UPDATE switchyard_tasks SET state = ?3, row_id = ?4, progress = ?5, ",
        "max_attempts = CASE WHEN ?6 THEN COALESCE(?7, max_attempts) ELSE max_attempts END, ",
        "last_error = COALESCE(?8, last_error), touched_at = ",
        now_sql!(),
        " WHERE name = ?1 AND task_id = ?2"
    ))
    .bind(name)
    .bind(id)
    .bind(state)
    .bind(row)
    .bind(progress)
    .bind(set_head)
    .bind(max)
    .bind(error)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(())
}

/// The delivered task `id` is dead: its letter is row `row` of `queue_dead`; the record keeps
/// the delivery's progress and takes the body's head.
pub(crate) async fn delivery_dead(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    id: &str,
    row: i64,
    head: &TaskHead,
    progress: Option<&[u8]>,
) -> Result<()> {
    sqlx::query(concat!(
        "UPDATE switchyard_tasks SET state = 'dead', row_id = ?3, cancel_requested = 0, ",
        "max_attempts = COALESCE(?4, max_attempts), last_error = COALESCE(?5, last_error), ",
        "progress = ?6, finished_at = ",
        now_sql!(),
        ", touched_at = ",
        now_sql!(),
        " WHERE name = ?1 AND task_id = ?2"
    ))
    .bind(name)
    .bind(id)
    .bind(row)
    .bind(head.max_attempts.map(i64::from))
    .bind(head.last_error.as_deref())
    .bind(progress)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(())
}

/// A body with id `id` was dead-lettered without a delivery (its letter is row `row`): a task
/// without a record, or whose record has ended (but for `dead`), gets a new record, dead. A
/// record whose task is still queued or running, or already dead, is left alone.
pub(crate) async fn letter_added(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    id: &str,
    row: i64,
    head: &TaskHead,
) -> Result<bool> {
    // An ended record gives way (its bucket's count follows, by trigger); a live or dead one
    // stays and the insert does nothing. The new record is then ended `dead` like any other,
    // so its event and count come from the end trigger.
    sqlx::query(
        "DELETE FROM switchyard_tasks WHERE name = ?1 AND task_id = ?2 \
         AND state IN ('completed', 'failed', 'cancelled')",
    )
    .bind(name)
    .bind(id)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    let created = sqlx::query(concat!(
        "INSERT INTO switchyard_tasks (name, task_id, state, tier, max_attempts, submitted_at, ",
        "touched_at, last_error) VALUES (?1, ?2, 'waiting', 'normal', ?3, ",
        now_sql!(),
        ", ",
        now_sql!(),
        ", ?4) ON CONFLICT (name, task_id) DO NOTHING"
    ))
    .bind(name)
    .bind(id)
    .bind(head.max_attempts.map(i64::from))
    .bind(head.last_error.as_deref())
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?
    .rows_affected()
        == 1;
    if created {
        sqlx::query(concat!(
            "UPDATE switchyard_tasks SET state = 'dead', row_id = ?3, finished_at = ",
            now_sql!(),
            " WHERE name = ?1 AND task_id = ?2"
        ))
        .bind(name)
        .bind(id)
        .bind(row)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
    }
    Ok(created)
}

/// The dead letters in `rows` of `queue_dead` left the queue: popped or cleared (`to` =
/// `failed`, an end) or requeued (`to` = `waiting`, handled by [`revived`]).
pub(crate) async fn letters_gone(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    rows: &[i64],
) -> Result<u64> {
    let mut n = 0;
    for chunk in rows.chunks(500) {
        let ids = serde_json::to_string(chunk).map_err(|e| Error::corrupt(name.to_owned(), e))?;
        let res = sqlx::query(concat!(
            "UPDATE switchyard_tasks SET state = 'failed', row_id = NULL, finished_at = ",
            now_sql!(),
            ", touched_at = ",
            now_sql!(),
            " WHERE name = ?1 AND state = 'dead' AND row_id IN (SELECT value FROM json_each(?2))"
        ))
        .bind(name)
        .bind(ids)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        n += res.rows_affected();
    }
    if n > 0 {
        trim_ended(conn, op, name).await?;
    }
    Ok(n)
}

/// The dead letter in row `letter` was requeued into row `row` of `queues`: its record (if any)
/// waits again, its attempts reset (ADR 0063), its end forgotten.
pub(crate) async fn revived(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
    letter: i64,
    row: i64,
    tier: &str,
) -> Result<()> {
    sqlx::query(concat!(
        "UPDATE switchyard_tasks SET state = 'waiting', row_id = ?3, tier = ?4, attempt = 0, ",
        "cancel_requested = 0, started_at = NULL, finished_at = NULL, result = NULL, ",
        "touched_at = ",
        now_sql!(),
        " WHERE name = ?1 AND state = 'dead' AND row_id = ?2"
    ))
    .bind(name)
    .bind(letter)
    .bind(row)
    .bind(tier)
    .execute(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(())
}

/// Whether the queue has dead records (so dead-letter steps must follow them).
pub(crate) async fn has_dead(
    conn: &mut SqliteConnection,
    op: &'static str,
    name: &str,
) -> Result<bool> {
    let found: i64 = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM switchyard_tasks WHERE name = ?1 AND state = 'dead' \
         AND row_id IS NOT NULL)",
    )
    .bind(name)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| db(op, name, e))?;
    Ok(found != 0)
}

/// What an ack's rows say about one recorded receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acked {
    /// Not current: nothing changed.
    Stale,
    /// Acked (its record, if any, completed).
    Done,
    /// Its delivery was cancelled: the ack ended it `cancelled`. The task's id.
    Cancelled(String),
}

/// Reads the rows the batcher's ack returned for `receipt` (see `Batcher::ack`).
pub(crate) fn acked(rows: &[SqliteRow], receipt: &str) -> Acked {
    use sqlx::Row;
    let mut deleted = false;
    let mut cancelled = None;
    for row in rows {
        if row.try_get::<String, _>(0).ok().as_deref() != Some(receipt) {
            continue;
        }
        if row.len() == 1 {
            deleted = true;
        } else if row.try_get::<String, _>(1).ok().as_deref() == Some("cancelled") {
            cancelled = row.try_get::<String, _>(2).ok();
        }
    }
    match (deleted, cancelled) {
        (false, _) => Acked::Stale,
        (true, None) => Acked::Done,
        (true, Some(id)) => Acked::Cancelled(id),
    }
}

/// What an extend or progress of a recorded delivery answered: one row, its first column the
/// task's id when a cancel reached the delivery (nothing was written), else NULL; no row when
/// the receipt is not current.
pub(crate) fn unless_cancelled(op: &'static str, name: &str, rows: &[SqliteRow]) -> Result<bool> {
    use sqlx::Row;
    let Some(row) = rows.first() else {
        return Ok(false);
    };
    match row
        .try_get::<Option<String>, _>(0)
        .map_err(|e| db(op, name, e))?
    {
        Some(id) => Err(cancelled(id)),
        None => Ok(true),
    }
}

/// `Error::Cancelled` for task `id`.
pub(crate) fn cancelled(id: impl Into<String>) -> Error {
    Error::Cancelled {
        what: "task",
        id: id.into(),
    }
}

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

/// `s` cut to at most `max` bytes, on a character boundary.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
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

impl SqliteFleetBackend {
    /// Wakes this process's readers of end events.
    pub(crate) fn ended(&self) {
        self.inner.ended.notify_waiters();
    }

    /// Cancels one task inside the cancel's write transaction.
    async fn cancel_one(
        conn: &mut SqliteConnection,
        op: &'static str,
        name: &str,
        id: &str,
    ) -> Result<CancelOutcome> {
        let row: Option<(String, Option<i64>)> = sqlx::query_as(
            "SELECT state, row_id FROM switchyard_tasks WHERE name = ?1 AND task_id = ?2",
        )
        .bind(name)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        let Some((state, row_id)) = row else {
            return Ok(CancelOutcome::Unknown);
        };
        let state = state_of(name, id, &state)?;
        let live = match state {
            TaskState::Running => {
                let held: Option<i64> = sqlx::query_scalar(
                    "SELECT 1 FROM queue_processing WHERE name = ?1 AND task_id = \
                     (SELECT receipt FROM switchyard_tasks WHERE name = ?1 AND task_id = ?2)",
                )
                .bind(name)
                .bind(id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(|e| db(op, name, e))?;
                held.is_some()
            }
            TaskState::Waiting | TaskState::Scheduled => {
                let table = if state == TaskState::Waiting {
                    "DELETE FROM queues WHERE id = ?2 AND name = ?1"
                } else {
                    "DELETE FROM queue_scheduled WHERE id = ?2 AND name = ?1"
                };
                let removed = sqlx::query(table)
                    .bind(name)
                    .bind(row_id)
                    .execute(&mut *conn)
                    .await
                    .map_err(|e| db(op, name, e))?
                    .rows_affected();
                // Removed: it can no longer be delivered.
                if removed == 1 {
                    return Self::end_cancelled(conn, op, name, id).await;
                }
                false
            }
            ended => return Ok(CancelOutcome::Finished(ended)),
        };
        if live {
            Self::request_cancel(conn, op, name, id).await?;
            return Ok(CancelOutcome::CancelRequested);
        }
        // A consumer without records (the seed's) moved it (ADR 0380, section 7).
        if let Some(outcome) = Self::cancel_foreign(conn, op, name, id).await? {
            return Ok(outcome);
        }
        Self::end_cancelled(conn, op, name, id).await
    }

    /// Sets the flag of a running task: its holder meets `Cancelled` at its next step.
    async fn request_cancel(
        conn: &mut SqliteConnection,
        op: &'static str,
        name: &str,
        id: &str,
    ) -> Result<()> {
        sqlx::query(concat!(
            "UPDATE switchyard_tasks SET cancel_requested = 1, touched_at = ",
            now_sql!(),
            " WHERE name = ?1 AND task_id = ?2"
        ))
        .bind(name)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        Ok(())
    }

    /// Ends a task that can no longer be delivered as `cancelled`.
    async fn end_cancelled(
        conn: &mut SqliteConnection,
        op: &'static str,
        name: &str,
        id: &str,
    ) -> Result<CancelOutcome> {
        sqlx::query(concat!(
            "UPDATE switchyard_tasks SET state = 'cancelled', cancel_requested = 0, row_id = NULL, ",
            "finished_at = ",
            now_sql!(),
            ", touched_at = ",
            now_sql!(),
            " WHERE name = ?1 AND task_id = ?2"
        ))
        .bind(name)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        Ok(CancelOutcome::Cancelled)
    }
    /// A recorded task a seed consumer moved without telling its record: held by it
    /// (`queue_processing` under the id: the flag is set, the seed never learns), or put back in
    /// a tier under a new row (it drained the scheduled task, or swept our lapsed delivery):
    /// found by a scan of the queue's tiers, removed. `None` when it is nowhere (the seed acked
    /// or dead-lettered it): the caller ends the record `cancelled`, as nothing can deliver it.
    async fn cancel_foreign(
        conn: &mut SqliteConnection,
        op: &'static str,
        name: &str,
        id: &str,
    ) -> Result<Option<CancelOutcome>> {
        let held: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM queue_processing WHERE name = ?1 AND task_id = ?2 AND src_id IS NULL",
        )
        .bind(name)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        if held.is_some() {
            Self::request_cancel(conn, op, name, id).await?;
            return Ok(Some(CancelOutcome::CancelRequested));
        }
        if let Some(row) = Self::find_in_tier(conn, op, name, id).await? {
            sqlx::query("DELETE FROM queues WHERE id = ?1")
                .bind(row)
                .execute(&mut *conn)
                .await
                .map_err(|e| db(op, name, e))?;
        }
        Ok(None)
    }

    /// The oldest row of the queue's tiers whose body has id `id`: a scan (O(n)), only for
    /// tasks a seed consumer moved without telling their record.
    async fn find_in_tier(
        conn: &mut SqliteConnection,
        op: &'static str,
        name: &str,
        id: &str,
    ) -> Result<Option<i64>> {
        sqlx::query_scalar(
            "SELECT id FROM queues WHERE name = ?1 AND tier IN ('high', 'normal', 'low') \
             AND CASE WHEN json_valid(CAST(body AS TEXT)) \
             THEN CAST(json_extract(CAST(body AS TEXT), '$.id') AS TEXT) END = ?2 \
             ORDER BY id LIMIT 1",
        )
        .bind(name)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))
    }

    /// Trims the queue's ended records and events past its retention, up to `max` of each;
    /// (records removed, events removed).
    async fn trim(conn: &mut SqliteConnection, name: &str, max: usize) -> Result<(u64, u64)> {
        let op = "queue_maintain";
        let row: Option<RetentionRow> = sqlx::query_as(
            "SELECT ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms FROM switchyard_queue_tasks \
             WHERE name = ?1",
        )
        .bind(name)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        let Some(_) = row else {
            // No record ever ended here: nothing to trim.
            return Ok((0, 0));
        };
        let r = retention_of(row);
        let mut records = 0u64;
        for (done, keep, kept) in [(1, r.completed, "kept_ok"), (2, r.failed, "kept_bad")] {
            let left = to_i64(max).saturating_sub(count_i64(records));
            if left <= 0 {
                break;
            }
            // By age, then by count, oldest first.
            let aged = sqlx::query(concat!(
                "DELETE FROM switchyard_tasks WHERE rowid IN (SELECT rowid FROM switchyard_tasks ",
                "WHERE name = ?1 AND done = ?2 AND finished_at <= ",
                now_sql!(),
                " - ?3 ORDER BY finished_at, rowid LIMIT ?4)"
            ))
            .bind(name)
            .bind(done)
            .bind(keep.age.as_secs_f64())
            .bind(left)
            .execute(&mut *conn)
            .await
            .map_err(|e| db(op, name, e))?
            .rows_affected();
            records += aged;
            let left = to_i64(max).saturating_sub(count_i64(records));
            if left <= 0 {
                break;
            }
            let sql = format!(
                "DELETE FROM switchyard_tasks WHERE rowid IN (SELECT rowid FROM switchyard_tasks \
                 WHERE name = ?1 AND done = ?2 ORDER BY finished_at, rowid LIMIT MIN(?3, MAX(0, \
                 (SELECT {kept} FROM switchyard_queue_tasks WHERE name = ?1) - ?4)))"
            );
            let counted = sqlx::query(&sql)
                .bind(name)
                .bind(done)
                .bind(left)
                .bind(count_i64(keep.count))
                .execute(&mut *conn)
                .await
                .map_err(|e| db(op, name, e))?
                .rows_affected();
            records += counted;
        }
        // Events: beyond the newest `count`, or older than the age.
        let newest_kept: Option<i64> = sqlx::query_scalar(
            "SELECT seq FROM switchyard_task_events WHERE name = ?1 ORDER BY seq DESC \
             LIMIT 1 OFFSET ?2",
        )
        .bind(name)
        .bind(count_i64(r.events.count).saturating_sub(1).max(0))
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        let gone: Vec<i64> = sqlx::query_scalar(concat!(
            "DELETE FROM switchyard_task_events WHERE seq IN (SELECT seq FROM switchyard_task_events ",
            "WHERE name = ?1 AND (seq < ?2 OR at <= ",
            now_sql!(),
            " - ?3) ORDER BY seq LIMIT ?4) RETURNING seq"
        ))
        .bind(name)
        .bind(newest_kept.unwrap_or(0))
        .bind(r.events.age.as_secs_f64())
        .bind(to_i64(max))
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| db(op, name, e))?;
        if let Some(last) = gone.iter().max() {
            sqlx::query(
                "UPDATE switchyard_queue_tasks SET trimmed_through = MAX(trimmed_through, ?2) \
                 WHERE name = ?1",
            )
            .bind(name)
            .bind(last)
            .execute(&mut *conn)
            .await
            .map_err(|e| db(op, name, e))?;
        }
        Ok((records, gone.len() as u64))
    }
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
            e.error = error.map(|s| cut(s, MAX_EVENT_ERROR_BYTES));
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
