//! Control of a task (ADR 0380) on PostgreSQL: the `fleet_tasks` row of a task with an id is its
//! record (kept after its end in state `completed`, `failed` or `cancelled` until retention
//! removes it), its ends are rows of `fleet_task_events` numbered per queue, and the queue's
//! retention, end counts and log position live in its `fleet_queue_flow` row (migration
//! `20800005_fleet_tasks.sql`). Every step that moves a recorded task is one statement or one
//! function call, so one transaction.

use switchyard_core::fleet::{
    Keep, MAX_EVENT_ERROR_BYTES, Retention, TaskEvent, TaskEvents, TaskInfo, TaskState,
};

use super::*;

/// A record's row as `task_get` reads it, with the queue's log position.
type InfoRow = (
    String,
    bool,
    i32,
    Option<i32>,
    i16,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<Vec<u8>>,
    Option<String>,
    Option<Vec<u8>>,
    i64,
);

/// An event row with the queue's log end and last trimmed event (present even without events).
type EventRow = (
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<f64>,
    Option<String>,
    Option<Vec<u8>>,
    Option<i64>,
);

/// The port's state of a stored one (the table keeps the names of ADR 0231 for waiting and
/// running).
fn state_of(location: &str, stored: &str) -> Result<TaskState> {
    match stored {
        "ready" => Ok(TaskState::Waiting),
        "reserved" => Ok(TaskState::Running),
        other => TaskState::parse(other)
            .ok_or_else(|| Error::corrupt(location.to_string(), format!("task state {other:?}"))),
    }
}

fn u32_of(n: i32) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(0)
}

/// A decimal cursor: digits only, as this adapter writes them.
fn parse_cursor(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A retention bucket from its columns (NULL: the default's).
fn keep_of(n: Option<i64>, ms: Option<i64>, default: Keep) -> Keep {
    Keep::new(
        n.and_then(|n| u64::try_from(n).ok())
            .unwrap_or(default.count),
        ms.and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis)
            .unwrap_or(default.age),
    )
}

fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl TaskOps for PostgresFleetBackend {
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        // One statement, one snapshot: the record and the log position agree (an end that
        // committed is in both).
        let row: Option<InfoRow> = sqlx::query_as(
            "SELECT t.state, t.cancel_requested, t.attempts, t.max_attempts, t.tier, \
               t.submitted_at, t.started_at, t.finished_at, t.due, t.progress, t.last_error, \
               t.result, \
               coalesce((SELECT f.event_seq FROM fleet_queue_flow f WHERE f.name = $1), 0) \
             FROM fleet_tasks t WHERE t.name = $1 AND t.task_id = $2",
        )
        .bind(name)
        .bind(id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("task_get", name, e))?;
        let Some(r) = row else {
            return Ok(None);
        };
        let state = state_of(&format!("fleet_tasks {name:?} {id:?}"), &r.0)?;
        let mut info = TaskInfo::new(id, state, r.5.unwrap_or(0.0));
        info.cancel_requested = r.1;
        info.attempt = u32_of(r.2);
        info.max_attempts = r.3.and_then(|m| u32::try_from(m).ok());
        info.priority = tier_of(r.4);
        info.started_at = r.6;
        info.finished_at = r.7;
        info.visible_until = if state == TaskState::Running {
            r.8
        } else {
            None
        };
        info.progress = r.9;
        info.last_error = r.10;
        info.result = r.11;
        info.events_cursor = r.12.to_string();
        Ok(Some(info))
    }

    async fn task_cancel(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        let outcomes: Vec<String> = sqlx::query_scalar("SELECT fleet_cancel($1, $2, $3)")
            .bind(name)
            .bind(ids)
            .bind(self.channel())
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("task_cancel", name, e))?;
        outcomes
            .iter()
            .map(|o| match o.as_str() {
                "unknown" => Ok(CancelOutcome::Unknown),
                "cancelled" => Ok(CancelOutcome::Cancelled),
                "cancel_requested" => Ok(CancelOutcome::CancelRequested),
                other => match other.strip_prefix("finished:") {
                    Some(state) => Ok(CancelOutcome::Finished(state_of(
                        &format!("fleet_tasks {name:?}"),
                        state,
                    )?)),
                    None => Err(Error::corrupt(
                        format!("queue {name}"),
                        format!("cancel outcome {other:?}"),
                    )),
                },
            })
            .collect()
    }

    async fn queue_purge_step(&self, name: &str, max: usize) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT fleet_purge($1, $2, $3)")
            .bind(name)
            .bind(to_i64(max))
            .bind(self.channel())
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("queue_purge", name, e))?;
        Ok(count(n))
    }

    async fn task_events(&self, name: &str, after: Option<&str>, max: usize) -> Result<TaskEvents> {
        let key = events_key(name);
        if !self.inner.event_wakes.leased(&key) {
            // Ends notify only queues some reader leased (ADR 0235's leases, ADR 0380): take
            // one before reading, so an end after this read wakes the front's wait.
            self.renew_lease_of(&self.inner.event_wakes, "task_events", name, &key)
                .await?;
        }
        let (from, malformed, latest) = match after {
            None => (None, false, false),
            Some("$") => (None, false, true),
            Some(s) => match parse_cursor(s) {
                Some(n) => (Some(n), false, false),
                None => (None, true, false),
            },
        };
        // One statement, one snapshot: the log's end, its last trimmed event and the events
        // after the cursor agree. A cursor older than the oldest kept event, or past the log's
        // end (not one of this log's), reads from the oldest kept.
        let rows: Vec<EventRow> = sqlx::query_as(
            "SELECT coalesce(f.event_seq, 0), coalesce(f.trimmed_through, 0), e.seq, e.task_id, \
               e.state, e.attempt, e.at, e.error, e.result, e.result_size \
             FROM (SELECT 1) one \
             LEFT JOIN fleet_queue_flow f ON f.name = $1 \
             LEFT JOIN LATERAL (SELECT x.* FROM fleet_task_events x \
               WHERE x.name = $1 AND x.seq > CASE \
                 WHEN $2::bigint IS NULL OR $2 > coalesce(f.event_seq, 0) \
                   OR $2 < coalesce(f.trimmed_through, 0) THEN coalesce(f.trimmed_through, 0) \
                 ELSE $2 END \
               ORDER BY x.seq LIMIT $3) e ON true \
             ORDER BY e.seq",
        )
        .bind(name)
        .bind(from)
        .bind(if latest { 0 } else { to_i64(max) })
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("task_events", name, e))?;
        let (end, trimmed) = rows.first().map(|r| (r.0, r.1)).unwrap_or((0, 0));
        if latest {
            return Ok(TaskEvents::new(Vec::new(), false, end.to_string()));
        }
        let gap = malformed || from.is_some_and(|n| n > end || n < trimmed);
        let from = match from {
            Some(n) if !gap => n,
            _ => trimmed,
        };
        let events = rows
            .into_iter()
            .filter_map(|r| {
                let (seq, task_id, state) = (r.2?, r.3?, r.4?);
                Some((seq, task_id, state, r.5, r.6, r.7, r.8, r.9))
            })
            .map(|(seq, task_id, state, attempt, at, error, result, size)| {
                let state = state_of(&format!("fleet_task_events {name:?} {seq}"), &state)?;
                let mut ev = TaskEvent::new(seq.to_string(), task_id, state);
                ev.attempt = u32_of(attempt.unwrap_or(0));
                ev.at = at.unwrap_or(0.0);
                ev.error =
                    error.map(|e| switchyard_core::fleet::cut_to_bytes(e, MAX_EVENT_ERROR_BYTES));
                ev.result = result;
                ev.result_size = size.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
                Ok(ev)
            })
            .collect::<Result<Vec<_>>>()?;
        let cursor = events
            .last()
            .map(|e| e.cursor.clone())
            .unwrap_or_else(|| from.to_string());
        Ok(TaskEvents::new(events, gap, cursor))
    }

    fn task_events_wake(&self, name: &str) -> Option<Arc<Notify>> {
        Some(self.inner.event_wakes.waiter(&events_key(name)))
    }

    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        type Row = (
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms FROM fleet_queue_flow WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("queue_retention", name, e))?;
        let d = Retention::default();
        let Some(r) = row else {
            return Ok(d);
        };
        Ok(Retention {
            completed: keep_of(r.0, r.1, d.completed),
            failed: keep_of(r.2, r.3, d.failed),
            events: keep_of(r.4, r.5, d.events),
        })
    }

    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        let Retention {
            completed,
            failed,
            events,
        } = retention;
        sqlx::query(
            "INSERT INTO fleet_queue_flow (name, ok_n, ok_ms, bad_n, bad_ms, ev_n, ev_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (name) DO UPDATE SET ok_n = excluded.ok_n, ok_ms = excluded.ok_ms, \
               bad_n = excluded.bad_n, bad_ms = excluded.bad_ms, ev_n = excluded.ev_n, \
               ev_ms = excluded.ev_ms",
        )
        .bind(name)
        .bind(bigint(completed.count))
        .bind(bigint(completed.age_ms()))
        .bind(bigint(failed.count))
        .bind(bigint(failed.age_ms()))
        .bind(bigint(events.count))
        .bind(bigint(events.age_ms()))
        .execute(self.pool())
        .await
        .map_err(|e| db("queue_set_retention", name, e))?;
        Ok(())
    }

    async fn task_maintain(&self, name: &str, max: usize) -> Result<u64> {
        // PostgreSQL never shares a queue with the seed's consumers (ADR 0380, section 7), so
        // there is nothing to reconcile: only retention's trims.
        let n: i64 = sqlx::query_scalar("SELECT fleet_task_maintain($1, $2)")
            .bind(name)
            .bind(to_i64(max))
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("queue_maintain", name, e))?;
        Ok(count(n))
    }

    fn max_result_bytes(&self) -> usize {
        self.inner.max_result_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_plain_decimals() {
        assert_eq!(parse_cursor("0"), Some(0));
        assert_eq!(parse_cursor("42"), Some(42));
        for bad in [
            "",
            "-1",
            "+1",
            "1.5",
            "1733468400123-0",
            "99999999999999999999",
            "x",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn stored_states_read_as_the_port_names_them() {
        assert_eq!(state_of("t", "ready").expect("state"), TaskState::Waiting);
        assert_eq!(
            state_of("t", "reserved").expect("state"),
            TaskState::Running
        );
        assert_eq!(
            state_of("t", "cancelled").expect("state"),
            TaskState::Cancelled
        );
        assert!(state_of("t", "waiting?").is_err());
    }
}
