//! One subscription: the core replay engine (ADR 0364) over table snapshots woken by NOTIFY.
//!
//! Each snapshot reads, in one statement, the stream's first and last ids, whether the last is
//! the end mark, its entries-added count and the entries after the subscriber's position; a wait
//! parks on the stream's wake-up receiver until a NOTIFY for it or the deadline.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use switchyard_core::stream::replay::{self, Entry, EntryId, ReplaySource, Snapshot, Wakeup};
use switchyard_core::{Error, ItemStream, Result, StreamEvent};
use tokio::sync::watch;

use crate::wake::Wake;
use crate::{Inner, READ_COUNT, WHAT, sql};

pub(crate) fn subscribe(
    inner: Arc<Inner>,
    run_id: &str,
    last_event_id: Option<&str>,
    heartbeat: Duration,
) -> ItemStream {
    let source = PostgresSource {
        inner,
        name: run_id.to_owned(),
        rx: None,
        registered: false,
    };
    replay::subscribe(source, run_id, last_event_id, heartbeat)
}

struct PostgresSource {
    inner: Arc<Inner>,
    name: String,
    rx: Option<watch::Receiver<Wake>>,
    registered: bool,
}

/// A stored number as an id component; the publish never stores a negative one.
fn component(n: Option<i64>, name: &str) -> Result<u64> {
    n.and_then(|n| u64::try_from(n).ok()).ok_or_else(|| {
        Error::corrupt(
            format!("bridge_streams[{name:?}]"),
            "an entry id is not a non-negative number",
        )
    })
}

fn decode(rows: Vec<PgRow>, name: &str) -> Result<Snapshot> {
    let corrupt = |e: sqlx::Error| Error::corrupt(format!("bridge_streams[{name:?}]"), e);
    let mut head = None;
    let mut entries = Vec::new();
    for row in rows {
        let added: Option<i64> = row.try_get("added").map_err(corrupt)?;
        if let Some(added) = added {
            let len: Option<i64> = row.try_get("len").map_err(corrupt)?;
            let first = (
                row.try_get::<Option<i64>, _>("first_ms").map_err(corrupt)?,
                row.try_get::<Option<i64>, _>("first_seq")
                    .map_err(corrupt)?,
            );
            let last = (
                row.try_get::<Option<i64>, _>("last_ms").map_err(corrupt)?,
                row.try_get::<Option<i64>, _>("last_seq").map_err(corrupt)?,
            );
            let last_is_end: Option<bool> = row.try_get("last_is_end").map_err(corrupt)?;
            head = Some((
                added,
                len.unwrap_or(-1),
                first,
                last,
                last_is_end.unwrap_or(false),
            ));
            continue;
        }
        let id = (
            component(row.try_get("ms").map_err(corrupt)?, name)?,
            component(row.try_get("seq").map_err(corrupt)?, name)?,
        );
        let is_end: Option<bool> = row.try_get("is_end").map_err(corrupt)?;
        let entry = if is_end.unwrap_or(false) {
            Entry::End
        } else {
            let event: Option<String> = row.try_get("event").map_err(corrupt)?;
            let data: Option<String> = row.try_get("data").map_err(corrupt)?;
            // As the Redis bridge reads an entry: no name is `message`, no data is null, data
            // that is not JSON is passed on as a string.
            let data = match data {
                None => serde_json::Value::Null,
                Some(raw) => serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw)),
            };
            Entry::Event(StreamEvent {
                id: replay::id_text(id),
                event: event.unwrap_or_else(|| "message".to_owned()),
                data,
            })
        };
        entries.push((id, entry));
    }
    entries.sort_by_key(|(id, _)| *id);
    let Some((added, len, first, last, last_is_end)) = head else {
        return Ok(Snapshot::Missing { added: 0 });
    };
    // A stream row without entries (never left by a publish) reads as missing.
    let (Some(_), Some(_)) = first else {
        return Ok(Snapshot::Missing { added: 0 });
    };
    Ok(Snapshot::Present {
        first: (component(first.0, name)?, component(first.1, name)?),
        last: (component(last.0, name)?, component(last.1, name)?),
        last_is_end,
        added,
        len,
        entries,
    })
}

#[async_trait]
impl ReplaySource for PostgresSource {
    fn what(&self) -> &'static str {
        WHAT
    }

    fn key(&self) -> &str {
        &self.name
    }

    fn check_open(&self) -> Result<()> {
        self.inner.check_open()
    }

    async fn newest(&mut self) -> Result<Option<(EntryId, bool)>> {
        let newest: Option<(i64, i64, bool)> = sqlx::query_as(sql::NEWEST)
            .bind(&self.name)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(|e| switchyard_postgres_support::error(WHAT, "subscribe", &self.name, e))?;
        match newest {
            Some((ms, seq, is_end)) => Ok(Some((
                (
                    component(Some(ms), &self.name)?,
                    component(Some(seq), &self.name)?,
                ),
                is_end,
            ))),
            None => Ok(None),
        }
    }

    async fn snapshot(&mut self, after: EntryId, want_added: bool) -> Result<Snapshot> {
        let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows = sqlx::query(sql::SNAPSHOT)
            .bind(&self.name)
            .bind(to_i64(after.0))
            .bind(to_i64(after.1))
            .bind(READ_COUNT)
            .bind(want_added)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| switchyard_postgres_support::error(WHAT, "subscribe", &self.name, e))?;
        decode(rows, &self.name)
    }

    fn register(&mut self, _after: EntryId) {
        self.rx = Some(self.inner.watchers.register(&self.name));
        self.registered = true;
    }

    fn registered(&self) -> bool {
        self.registered
    }

    fn unregister(&mut self) {
        self.rx = None;
    }

    fn mark_seen(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            rx.borrow_and_update();
        }
    }

    async fn wait(&mut self, deadline: Duration) -> Wakeup {
        let Some(rx) = self.rx.as_mut() else {
            return Wakeup::Closed;
        };
        match tokio::time::timeout(deadline, rx.changed()).await {
            Err(_elapsed) => Wakeup::TimedOut,
            Ok(Err(_)) => Wakeup::Closed,
            Ok(Ok(())) => match *rx.borrow_and_update() {
                Wake::Closed => Wakeup::Closed,
                Wake::Idle | Wake::Changed(_) => Wakeup::Changed,
            },
        }
    }
}
