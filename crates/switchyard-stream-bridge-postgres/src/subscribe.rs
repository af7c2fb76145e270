//! One subscription: the Redis bridge's subscribe loop, on table snapshots woken by NOTIFY.
//!
//! Each poll reads one snapshot of the stream (its first and last ids, whether the last is the
//! end mark, its entries-added count and the entries after the subscriber's position) in one
//! statement, decides as the Redis bridge does (gap, data, end, or wait), and when it must wait,
//! parks on its wake-up receiver until a NOTIFY for its stream or the heartbeat interval.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sqlx::Row;
use sqlx::postgres::PgRow;
use switchyard_core::stream::{parse_stream_id, validate_heartbeat, validate_run_id};
use switchyard_core::{Error, ItemStream, Result, StreamEvent, StreamGap, StreamItem};
use tokio::sync::watch;

use crate::wake::Wake;
use crate::{Inner, MAX_SUBSCRIBE_RETRIES, READ_COUNT, WHAT, sql};

pub(crate) fn subscribe(
    inner: Arc<Inner>,
    run_id: &str,
    last_event_id: Option<&str>,
    heartbeat: Duration,
) -> ItemStream {
    let sub = Subscription {
        inner,
        name: run_id.to_owned(),
        cursor: last_event_id.map(str::to_owned),
        heartbeat,
        started: false,
        position: (0, 0),
        gap_detection: false,
        owed_since: None,
        seen: false,
        errors: 0,
        rx: None,
        pending: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(sub, |mut sub| async move {
        let item = sub.next_item().await?;
        Some((item, sub))
    })
    .boxed()
}

/// One retained entry.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Event(StreamEvent),
    End,
}

/// What one snapshot found.
enum Snapshot {
    /// No such stream.
    Missing,
    Present {
        first: (u64, u64),
        last: (u64, u64),
        last_is_end: bool,
        added: i64,
        len: i64,
        entries: Vec<((u64, u64), Entry)>,
    },
}

struct Subscription {
    inner: Arc<Inner>,
    name: String,
    cursor: Option<String>,
    heartbeat: Duration,
    started: bool,
    /// Last delivered id, or the start cursor.
    position: (u64, u64),
    gap_detection: bool,
    /// For a cursor-less subscriber that found the stream missing and has been given nothing
    /// yet: the entries-added count then (0). Everything added since is owed to it, so any of it
    /// trimmed before delivery is a gap with `requested: None`.
    owed_since: Option<i64>,
    /// A snapshot saw the stream; finding it gone later ends the subscription.
    seen: bool,
    errors: u32,
    rx: Option<watch::Receiver<Wake>>,
    pending: VecDeque<((u64, u64), Entry)>,
    done: bool,
}

fn id_text(id: (u64, u64)) -> String {
    format!("{}-{}", id.0, id.1)
}

enum Step {
    Yield(Result<StreamItem>),
    Again,
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
                id: id_text(id),
                event: event.unwrap_or_else(|| "message".to_owned()),
                data,
            })
        };
        entries.push((id, entry));
    }
    entries.sort_by_key(|(id, _)| *id);
    let Some((added, len, first, last, last_is_end)) = head else {
        return Ok(Snapshot::Missing);
    };
    // A stream row without entries (never left by a publish) reads as missing.
    let (Some(_), Some(_)) = first else {
        return Ok(Snapshot::Missing);
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

impl Subscription {
    fn finish(&mut self, item: Result<StreamItem>) -> Option<Result<StreamItem>> {
        self.done = true;
        self.rx = None;
        self.pending.clear();
        Some(item)
    }

    async fn next_item(&mut self) -> Option<Result<StreamItem>> {
        if self.done {
            return None;
        }
        if let Err(e) = self.inner.check_open() {
            return self.finish(Err(e));
        }
        if !self.started {
            self.started = true;
            if let Err(e) = self.start().await {
                return self.finish(Err(e));
            }
        }
        loop {
            if let Some((id, entry)) = self.pending.pop_front() {
                self.gap_detection = true;
                self.owed_since = None;
                self.position = id;
                return match entry {
                    Entry::End => self.finish(Ok(StreamItem::End)),
                    Entry::Event(e) => Some(Ok(StreamItem::Event(e))),
                };
            }
            match self.poll_once().await {
                Step::Yield(item) => {
                    return match item {
                        Ok(ref i) if !i.is_terminal() => Some(item),
                        other => self.finish(other),
                    };
                }
                Step::Again => continue,
            }
        }
    }

    /// Resolves the cursor once, on the first poll, as the Redis bridge does.
    async fn start(&mut self) -> Result<()> {
        validate_run_id(&self.name)?;
        validate_heartbeat(self.heartbeat)?;
        let Some(cursor) = self.cursor.clone() else {
            return Ok(());
        };
        match parse_stream_id(&cursor) {
            Ok(Some(id)) => {
                self.position = id;
                self.gap_detection = true;
                Ok(())
            }
            Err(()) => Err(Error::Rejected {
                op: "subscribe",
                key: self.name.clone(),
                message: format!("Last-Event-ID {cursor:?} is not a valid stream id"),
            }),
            Ok(None) => {
                // Malformed: live tail from the newest entry; from the start on a missing stream
                // or one whose newest entry is the end mark (a finished run never hangs).
                let newest: Option<(i64, i64, bool)> = sqlx::query_as(sql::NEWEST)
                    .bind(&self.name)
                    .fetch_optional(&self.inner.pool)
                    .await
                    .map_err(|e| {
                        switchyard_postgres_support::error(WHAT, "subscribe", &self.name, e)
                    })?;
                if let Some((ms, seq, false)) = newest {
                    self.position = (
                        component(Some(ms), &self.name)?,
                        component(Some(seq), &self.name)?,
                    );
                }
                Ok(())
            }
        }
    }

    fn transient(&mut self, e: Error) -> Result<Duration, Error> {
        self.errors += 1;
        if self.errors > MAX_SUBSCRIBE_RETRIES {
            return Err(e);
        }
        let backoff = Duration::from_secs(1u64 << self.errors).min(self.heartbeat);
        tracing::warn!(stream = %self.name, retry = self.errors, ?backoff, error = %e,
            "transient PostgreSQL error in stream bridge subscriber; backing off");
        Ok(backoff)
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        let want_added = self.cursor.is_none() && !self.gap_detection;
        let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows = sqlx::query(sql::SNAPSHOT)
            .bind(&self.name)
            .bind(to_i64(self.position.0))
            .bind(to_i64(self.position.1))
            .bind(READ_COUNT)
            .bind(want_added)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(|e| switchyard_postgres_support::error(WHAT, "subscribe", &self.name, e))?;
        decode(rows, &self.name)
    }

    async fn poll_once(&mut self) -> Step {
        // Marked seen before the snapshot, so a wake-up for anything after it is not lost.
        if let Some(rx) = self.rx.as_mut() {
            rx.borrow_and_update();
        }
        let snapshot = match self.snapshot().await {
            Ok(s) => s,
            Err(e) if e.is_transient() => {
                return match self.transient(e) {
                    Ok(backoff) => {
                        tokio::time::sleep(backoff).await;
                        Step::Again
                    }
                    Err(e) => Step::Yield(Err(e)),
                };
            }
            Err(e) => return Step::Yield(Err(e)),
        };
        self.errors = 0;
        match snapshot {
            Snapshot::Missing => {
                if self.seen {
                    // Removed under us (cleanup, retention sweep): end instead of waiting forever.
                    return Step::Yield(Ok(StreamItem::End));
                }
                if self.cursor.is_none() && !self.gap_detection && self.owed_since.is_none() {
                    self.owed_since = Some(0);
                }
            }
            Snapshot::Present {
                first,
                last,
                last_is_end,
                added,
                len,
                entries,
            } => {
                self.seen = true;
                if let Some(since) = self.owed_since
                    && added >= 0
                    && len >= 0
                {
                    let since = if added < since { 0 } else { since };
                    if added - since - len > 0 {
                        return Step::Yield(Ok(StreamItem::Gap(StreamGap {
                            requested: None,
                            earliest: id_text(first),
                            latest: id_text(last),
                        })));
                    }
                }
                if self.gap_detection && self.position < first {
                    tracing::warn!(stream = %self.name, "subscriber fell behind retained history");
                    return Step::Yield(Ok(StreamItem::Gap(StreamGap {
                        requested: Some(self.requested()),
                        earliest: id_text(first),
                        latest: id_text(last),
                    })));
                }
                if !entries.is_empty() {
                    self.pending.extend(entries);
                    return Step::Again;
                }
                if last_is_end && last == self.position {
                    return Step::Yield(Ok(StreamItem::End));
                }
            }
        }
        if self.rx.is_none() {
            self.rx = Some(self.inner.watchers.register(&self.name));
            return Step::Again;
        }
        self.wait().await
    }

    /// The id a gap reports: the cursor as given until something was delivered.
    fn requested(&self) -> String {
        match &self.cursor {
            Some(c) if self.pending.is_empty() && parse_stream_id(c) == Ok(Some(self.position)) => {
                c.clone()
            }
            _ => id_text(self.position),
        }
    }

    /// Parks until a wake-up or the heartbeat interval.
    async fn wait(&mut self) -> Step {
        let Some(rx) = self.rx.as_mut() else {
            return Step::Again;
        };
        match tokio::time::timeout(self.heartbeat, rx.changed()).await {
            Err(_elapsed) => Step::Yield(Ok(StreamItem::Heartbeat)),
            Ok(Err(_)) => Step::Yield(Err(Error::Closed { what: WHAT })),
            Ok(Ok(())) => match *rx.borrow_and_update() {
                Wake::Closed => Step::Yield(Err(Error::Closed { what: WHAT })),
                Wake::Idle | Wake::Changed(_) => Step::Again,
            },
        }
    }
}
