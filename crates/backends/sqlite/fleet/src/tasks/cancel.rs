//! Cancelling a task inside the cancel's write transaction, wherever it is (ours or a seed
//! consumer's), and the trims of retention.

use super::*;

impl SqliteFleetBackend {
    /// Wakes this process's readers of end events.
    pub(crate) fn ended(&self) {
        self.inner.ended.notify_waiters();
    }

    /// Cancels one task inside the cancel's write transaction.
    pub(super) async fn cancel_one(
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
    pub(super) async fn request_cancel(
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
    pub(super) async fn end_cancelled(
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
    pub(super) async fn cancel_foreign(
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
    pub(super) async fn find_in_tier(
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
    pub(super) async fn trim(
        conn: &mut SqliteConnection,
        name: &str,
        max: usize,
    ) -> Result<(u64, u64)> {
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
