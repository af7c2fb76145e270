//! The record statements the queue steps run in their own statement or transaction (ADR 0380,
//! section 7): a record moved, requeued, ended or revived with its task.

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
