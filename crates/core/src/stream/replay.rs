//! The replay engine every shared stream bridge subscribes with (ADR 0364).
//!
//! A subscription is one state machine over two things a backend provides, a [`ReplaySource`]:
//! an atomic *snapshot* of the stream after a position (its first and last ids, whether the last
//! is the end mark, its entries-added count and length, and the entries after the position), and
//! a *wake-up* signal that fires when the stream may have changed. The engine resolves the
//! `Last-Event-ID` cursor, decides on each snapshot between a gap, data, the end or a wait, parks
//! on the wake-up signal with the heartbeat interval as its deadline, and retries transient
//! errors with backoff. The Redis and PostgreSQL bridges keep only their I/O.
//!
//! The rules it keeps are the port's: among them guarantees `stream.retained_cursor`,
//! `stream.evicted_cursor`, `stream.falling_behind`, `stream.first_delivery_outrun`,
//! `stream.malformed_cursor`, `stream.removal_under_subscriber` and `stream.heartbeats`; the
//! conformance suite checks them on every bridge built on it.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use super::{
    ItemStream, StreamEvent, StreamGap, StreamItem, parse_stream_id, validate_heartbeat,
    validate_run_id,
};
use crate::{Error, Result};

/// A stream entry id, `(milliseconds, sequence)`, ordered as the ids are.
pub type EntryId = (u64, u64);

/// How many consecutive transient failures a subscription survives before it yields the error
/// (deer-flow's `_MAX_SUBSCRIBE_RETRIES`).
pub const MAX_SUBSCRIBE_RETRIES: u32 = 3;

/// One retained entry: an event, or the end mark a finished run's stream closes with.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A data event.
    Event(StreamEvent),
    /// The end mark; its id is never shown to a subscriber.
    End,
}

/// What one snapshot of a stream found.
#[derive(Debug, Clone, PartialEq)]
pub enum Snapshot {
    /// The stream has no entries (never published, removed, or trimmed empty). `added` is its
    /// entries-added count, 0 when the stream does not exist, negative when unknown.
    Missing {
        /// Entries ever added to the stream, as the backend counts them.
        added: i64,
    },
    /// The stream has entries.
    Present {
        /// The oldest retained id.
        first: EntryId,
        /// The newest retained id (possibly the end mark's).
        last: EntryId,
        /// Whether the newest entry is the end mark.
        last_is_end: bool,
        /// Entries ever added, negative when unknown.
        added: i64,
        /// Entries retained, negative when unknown.
        len: i64,
        /// Entries after the position asked for, oldest first, at most a page of them.
        entries: Vec<(EntryId, Entry)>,
    },
}

/// How a wait on the wake-up signal ended.
#[derive(Debug)]
pub enum Wakeup {
    /// The stream may have changed: take another snapshot.
    Changed,
    /// Nothing happened within the deadline: the subscriber gets a heartbeat.
    TimedOut,
    /// The bridge was closed.
    Closed,
    /// The shared wake-up read failed; it counts toward the transient-error limit.
    Failed(Error),
}

/// What a backend provides to the replay engine: its snapshot query and its wake-up signal for
/// one stream.
#[async_trait]
pub trait ReplaySource: Send + 'static {
    /// The backend's name, as [`Error::Closed`] names it.
    fn what(&self) -> &'static str;

    /// The stream's key in the backend, for errors and logs.
    fn key(&self) -> &str;

    /// Fails with [`Error::Closed`] once the bridge was closed.
    fn check_open(&self) -> Result<()>;

    /// The newest entry's id and whether it is the end mark, `None` for a missing stream: where
    /// a subscriber with a malformed cursor starts.
    async fn newest(&mut self) -> Result<Option<(EntryId, bool)>>;

    /// One atomic snapshot of the stream, with the entries after `after`. `want_added` asks the
    /// backend for the entries-added count even of a missing stream (a cursor-less subscriber
    /// that has been given nothing yet needs it to detect the entries it is owed).
    async fn snapshot(&mut self, after: EntryId, want_added: bool) -> Result<Snapshot>;

    /// Starts receiving wake-ups for the stream (once, before the first wait, with the position
    /// the subscriber waits after). The engine takes a snapshot right after, so a change between
    /// the last snapshot and the registration is not lost.
    fn register(&mut self, after: EntryId);

    /// Whether [`register`](Self::register) was called.
    fn registered(&self) -> bool;

    /// Stops receiving wake-ups: the subscription ended (it may be dropped much later).
    fn unregister(&mut self);

    /// Marks the wake-ups received so far as seen; called before each snapshot, so a change after
    /// the snapshot wakes the next wait.
    fn mark_seen(&mut self);

    /// Waits for a wake-up or `deadline`, whichever comes first.
    async fn wait(&mut self, deadline: Duration) -> Wakeup;
}

/// Subscribes to `source`'s stream: the item stream a bridge's `subscribe` returns.
///
/// `run_id` is validated as the port requires, `last_event_id` is the SSE cursor (`None` for a
/// live tail from the start), `heartbeat` the interval after which an idle subscriber gets a
/// [`StreamItem::Heartbeat`].
pub fn subscribe<S: ReplaySource>(
    source: S,
    run_id: &str,
    last_event_id: Option<&str>,
    heartbeat: Duration,
) -> ItemStream {
    let sub = Subscription {
        source,
        run_id: run_id.to_owned(),
        cursor: last_event_id.map(str::to_owned),
        heartbeat,
        started: false,
        position: (0, 0),
        gap_detection: false,
        owed_since: None,
        seen: false,
        errors: 0,
        pending: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(sub, |mut sub| async move {
        let item = sub.next_item().await?;
        Some((item, sub))
    })
    .boxed()
}

/// An id as the SSE `id:` shows it.
pub fn id_text(id: EntryId) -> String {
    format!("{}-{}", id.0, id.1)
}

struct Subscription<S> {
    source: S,
    run_id: String,
    cursor: Option<String>,
    heartbeat: Duration,
    started: bool,
    /// The last delivered id, or the start cursor.
    position: EntryId,
    /// Set by a cursor or the first delivery: from then on, retained history starting after the
    /// position is a gap.
    gap_detection: bool,
    /// For a cursor-less subscriber that found the stream missing and has been given nothing
    /// yet: the entries-added count then. Everything added since is owed to it, so any of it
    /// trimmed before delivery is a gap with `requested: None`.
    owed_since: Option<i64>,
    /// A snapshot saw the stream; finding it gone later ends the subscription.
    seen: bool,
    /// Consecutive transient failures. Reset when a snapshot returns entries or a wait ends
    /// normally (a wake-up or a heartbeat): a snapshot that succeeds while the wake-up read keeps
    /// failing is no progress, so a persistently failing wake-up still ends the subscription.
    errors: u32,
    pending: VecDeque<(EntryId, Entry)>,
    done: bool,
}

enum Step {
    Yield(Result<StreamItem>),
    Again,
}

impl<S: ReplaySource> Subscription<S> {
    fn finish(&mut self, item: Result<StreamItem>) -> Option<Result<StreamItem>> {
        self.done = true;
        self.source.unregister();
        self.pending.clear();
        Some(item)
    }

    async fn next_item(&mut self) -> Option<Result<StreamItem>> {
        if self.done {
            return None;
        }
        if let Err(e) = self.source.check_open() {
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

    /// Resolves the cursor once, on the first poll, as deer-flow resolves `Last-Event-ID`.
    async fn start(&mut self) -> Result<()> {
        validate_run_id(&self.run_id)?;
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
            // `\d+(-\d+)?` but beyond u64: Redis would answer "Invalid stream ID"; fail as the
            // seed does instead of resetting to 0-0.
            Err(()) => Err(Error::Rejected {
                op: "subscribe",
                key: self.source.key().to_owned(),
                message: format!("Last-Event-ID {cursor:?} is not a valid stream id"),
            }),
            Ok(None) => {
                // Malformed: a live tail from the newest entry; from the start on a missing
                // stream or one whose newest entry is the end mark (a finished run never hangs).
                if let Some((id, false)) = self.source.newest().await? {
                    self.position = id;
                }
                Ok(())
            }
        }
    }

    /// Counts a transient failure: the backoff to sleep, or the error once the limit is passed.
    fn transient(&mut self, e: Error) -> Result<Duration> {
        self.errors += 1;
        if self.errors > MAX_SUBSCRIBE_RETRIES {
            return Err(e);
        }
        let backoff = Duration::from_secs(1u64 << self.errors).min(self.heartbeat);
        tracing::warn!(what = self.source.what(), key = %self.source.key(), retry = self.errors,
            ?backoff, error = %e, "transient error in a stream bridge subscriber; backing off");
        Ok(backoff)
    }

    async fn retry(&mut self, e: Error) -> Step {
        match self.transient(e) {
            Ok(backoff) => {
                tokio::time::sleep(backoff).await;
                Step::Again
            }
            Err(e) => Step::Yield(Err(e)),
        }
    }

    async fn poll_once(&mut self) -> Step {
        // Seen before the snapshot, so a wake-up for anything after it is not lost.
        if self.source.registered() {
            self.source.mark_seen();
        }
        let want_added = self.cursor.is_none() && !self.gap_detection;
        let snapshot = match self.source.snapshot(self.position, want_added).await {
            Ok(s) => s,
            Err(e) if e.is_transient() => return self.retry(e).await,
            Err(e) => return Step::Yield(Err(e)),
        };
        match snapshot {
            Snapshot::Missing { added } => {
                if self.seen {
                    // Removed under us (cleanup, TTL, retention): end instead of waiting forever.
                    tracing::info!(key = %self.source.key(),
                        "stream bridge stream disappeared; ending the subscription");
                    return Step::Yield(Ok(StreamItem::End));
                }
                if want_added && self.owed_since.is_none() {
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
                self.seen = true;
                if !entries.is_empty() {
                    self.errors = 0;
                }
                if let Some(since) = self.owed_since
                    && added >= 0
                    && len >= 0
                {
                    // A count below the one recorded means the stream was recreated: all of it
                    // is owed.
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
                    tracing::warn!(key = %self.source.key(), "subscriber fell behind retained history");
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
        // The first snapshot runs unregistered: a stream that fails it (a Redis key of the wrong
        // type) never reaches a shared wake-up read, where it would fail the read for every other
        // stream. Registered, the next snapshot covers what changed meanwhile.
        if !self.source.registered() {
            self.source.register(self.position);
            return Step::Again;
        }
        match self.source.wait(self.heartbeat).await {
            Wakeup::TimedOut => {
                self.errors = 0;
                Step::Yield(Ok(StreamItem::Heartbeat))
            }
            Wakeup::Changed => {
                self.errors = 0;
                Step::Again
            }
            Wakeup::Closed => Step::Yield(Err(Error::Closed {
                what: self.source.what(),
            })),
            Wakeup::Failed(e) => self.retry(e).await,
        }
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
}
