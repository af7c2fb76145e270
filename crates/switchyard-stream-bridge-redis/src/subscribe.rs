//! One subscription: the seed's subscribe loop over the shared readers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::wake;
use fred::prelude::*;
use futures::StreamExt;
use switchyard_core::stream::{parse_stream_id, validate_heartbeat, validate_run_id};
use switchyard_core::{Error as CoreError, ItemStream, Result, StreamGap, StreamItem};

use crate::decode::{self, Entry, Snapshot};
use crate::readers::Wake;
use crate::{Inner, MAX_SUBSCRIBE_RETRIES, WHAT, XREAD_COUNT, classify};

pub(crate) fn subscribe(
    inner: Arc<Inner>,
    run_id: &str,
    last_event_id: Option<&str>,
    heartbeat: Duration,
) -> ItemStream {
    let key = inner.key(run_id);
    let sub = Subscription {
        inner,
        run_id: run_id.to_owned(),
        key,
        cursor: last_event_id.map(str::to_owned),
        heartbeat,
        started: false,
        stream_id: (0, 0),
        gap_detection: false,
        owed_since: None,
        seen_key: false,
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

struct Subscription {
    inner: Arc<Inner>,
    run_id: String,
    key: String,
    cursor: Option<String>,
    heartbeat: Duration,
    started: bool,
    /// Last delivered id, or the start cursor.
    stream_id: (u64, u64),
    gap_detection: bool,
    /// For a cursor-less subscriber that found the run empty and has been given nothing yet: the
    /// key's `entries-added` then. Everything added since is owed to it, so any of it trimmed
    /// before delivery is a gap with `requested: None` (the seed's pending-initial check).
    owed_since: Option<i64>,
    /// A snapshot saw the key with entries; finding it gone later ends the subscription.
    seen_key: bool,
    errors: u32,
    rx: Option<wake::Receiver>,
    pending: VecDeque<(String, Entry)>,
    done: bool,
}

fn id_text(id: (u64, u64)) -> String {
    format!("{}-{}", id.0, id.1)
}

fn lt(a: (u64, u64), b: &str) -> bool {
    matches!(parse_stream_id(b), Ok(Some(b)) if a < b)
}

enum Step {
    Yield(Result<StreamItem>),
    Again,
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
                if let Ok(Some(parsed)) = parse_stream_id(&id) {
                    self.stream_id = parsed;
                }
                return match entry {
                    Entry::End => self.finish(Ok(StreamItem::End)),
                    Entry::Event(e) => Some(Ok(StreamItem::Event(e))),
                };
            }
            match self.poll_once().await {
                Step::Yield(item) => {
                    return match item {
                        Ok(StreamItem::Heartbeat) => Some(item),
                        Ok(ref i) if !i.is_terminal() => Some(item),
                        other => self.finish(other),
                    };
                }
                Step::Again => continue,
            }
        }
    }

    /// Cursor resolution (as the seed resolves `Last-Event-ID`), once, on the first poll.
    async fn start(&mut self) -> Result<()> {
        validate_run_id(&self.run_id)?;
        validate_heartbeat(self.heartbeat)?;
        let Some(cursor) = self.cursor.clone() else {
            return Ok(());
        };
        match parse_stream_id(&cursor) {
            Ok(Some(id)) => {
                self.stream_id = id;
                self.gap_detection = true;
                Ok(())
            }
            // `\d+(-\d+)?` but beyond u64: Redis would answer "Invalid stream ID"; fail as the
            // seed does instead of resetting to 0-0.
            Err(()) => Err(CoreError::Rejected {
                op: "subscribe",
                key: self.key.clone(),
                message: format!("Last-Event-ID {cursor:?} is not a valid stream id"),
            }),
            Ok(None) => {
                // Malformed: live tail from the newest entry; from the start on an empty stream or
                // one whose newest entry is the end mark (a finished run never hangs).
                // Boxed: a parked subscription then carries no room for this one-off call.
                let newest: Value = Box::pin(self.inner.snapshots.xrevrange::<Value, _, _, _>(
                    &self.key,
                    "+",
                    "-",
                    Some(1),
                ))
                .await
                .map_err(|e| classify("subscribe", &self.key, e))?;
                let newest = decode::entries(newest, &self.key)?;
                if let Some((id, entry)) = newest.into_iter().next()
                    && entry != Entry::End
                    && let Ok(Some(id)) = parse_stream_id(&id)
                {
                    self.stream_id = id;
                }
                Ok(())
            }
        }
    }

    fn transient(&mut self, e: CoreError) -> Result<Duration, CoreError> {
        self.errors += 1;
        if self.errors > MAX_SUBSCRIBE_RETRIES {
            return Err(e);
        }
        let backoff = Duration::from_secs(1u64 << self.errors).min(self.heartbeat);
        tracing::warn!(key = %self.key, retry = self.errors, ?backoff, error = %e,
            "transient Redis error in stream bridge subscriber; backing off");
        Ok(backoff)
    }

    async fn poll_once(&mut self) -> Step {
        // Registered before the snapshot that lets us park, so an entry added after it wakes us.
        // The first snapshot runs unregistered: a key that fails it (wrong type) never reaches a
        // reader's shared XREAD, where it would fail the read for every other key.
        if let Some(rx) = self.rx.as_mut() {
            rx.borrow_and_update();
        }
        let args = vec![
            id_text(self.stream_id),
            XREAD_COUNT.to_string(),
            if self.cursor.is_none() && !self.gap_detection {
                "1"
            } else {
                "0"
            }
            .to_owned(),
        ];
        let snapshot = self.inner.snapshot(self.key.clone(), args).await;
        let snapshot = snapshot
            .map_err(|e| classify("subscribe", &self.key, e))
            .and_then(|v| decode::snapshot(v, &self.key));
        let snapshot = match snapshot {
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
        match snapshot {
            Snapshot::Empty { added } => {
                if self.seen_key {
                    // The key was removed under us (cleanup, TTL): end instead of waiting forever.
                    tracing::info!(key = %self.key, "stream bridge key disappeared; ending the subscription");
                    return Step::Yield(Ok(StreamItem::End));
                }
                if self.cursor.is_none() && !self.gap_detection && self.owed_since.is_none() {
                    self.owed_since = Some(added.max(0));
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
                self.seen_key = true;
                if !entries.is_empty() {
                    self.errors = 0;
                }
                if let Some(since) = self.owed_since
                    && added >= 0
                    && len >= 0
                {
                    let since = if added < since { 0 } else { since };
                    if added - since - len > 0 {
                        return Step::Yield(Ok(StreamItem::Gap(StreamGap {
                            requested: None,
                            earliest: first,
                            latest: last,
                        })));
                    }
                }
                if self.gap_detection && lt(self.stream_id, &first) {
                    tracing::warn!(key = %self.key, "subscriber fell behind retained history");
                    return Step::Yield(Ok(StreamItem::Gap(StreamGap {
                        requested: Some(self.requested()),
                        earliest: first,
                        latest: last,
                    })));
                }
                if !entries.is_empty() {
                    self.pending.extend(entries);
                    return Step::Again;
                }
                if last_is_end && parse_stream_id(&last) == Ok(Some(self.stream_id)) {
                    return Step::Yield(Ok(StreamItem::End));
                }
            }
        }
        if self.rx.is_none() {
            self.rx = Some(self.inner.readers.register(&self.key, self.stream_id));
            return Step::Again;
        }
        self.wait().await
    }

    /// The id a gap reports: the cursor as given until something was delivered.
    fn requested(&self) -> String {
        match &self.cursor {
            Some(c)
                if self.pending.is_empty() && parse_stream_id(c) == Ok(Some(self.stream_id)) =>
            {
                c.clone()
            }
            _ => id_text(self.stream_id),
        }
    }

    /// Parks until the reader wakes us or the heartbeat interval passes.
    async fn wait(&mut self) -> Step {
        let Some(rx) = self.rx.as_mut() else {
            return Step::Again;
        };
        match tokio::time::timeout(self.heartbeat, rx.changed()).await {
            Err(_elapsed) => {
                // A blocking read that timed out is a successful read.
                self.errors = 0;
                Step::Yield(Ok(StreamItem::Heartbeat))
            }
            Ok(Err(_)) => Step::Yield(Err(CoreError::Closed { what: WHAT })),
            Ok(Ok(())) => {
                let wake = rx.borrow_and_update();
                match wake {
                    Wake::Entries(_) | Wake::Idle => {
                        self.errors = 0;
                        Step::Again
                    }
                    Wake::Closed => Step::Yield(Err(CoreError::Closed { what: WHAT })),
                    Wake::Error(_, msg) => {
                        let e = CoreError::unavailable("subscribe", self.key.clone(), msg);
                        match self.transient(e) {
                            Ok(backoff) => {
                                tokio::time::sleep(backoff).await;
                                Step::Again
                            }
                            Err(e) => Step::Yield(Err(e)),
                        }
                    }
                }
            }
        }
    }
}
