//! One subscription: the core replay engine (ADR 0364) over the snapshot script and the shared
//! readers' wake-ups.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fred::prelude::*;
use switchyard_core::stream::parse_stream_id;
use switchyard_core::stream::replay::{self, Entry, EntryId, ReplaySource, Snapshot, Wakeup};
use switchyard_core::{Error as CoreError, ItemStream, Result};

use crate::decode;
use crate::readers::Wake;
use crate::wake;
use crate::{Inner, WHAT, XREAD_COUNT, classify};

pub(crate) fn subscribe(
    inner: Arc<Inner>,
    run_id: &str,
    last_event_id: Option<&str>,
    heartbeat: Duration,
) -> ItemStream {
    let key = inner.key(run_id);
    let source = RedisSource {
        inner,
        key,
        rx: None,
        registered: false,
    };
    replay::subscribe(source, run_id, last_event_id, heartbeat)
}

struct RedisSource {
    inner: Arc<Inner>,
    key: String,
    rx: Option<wake::Receiver>,
    registered: bool,
}

/// A Redis stream id; Redis only ever returns `<ms>-<seq>`, anything else is corrupt data.
fn entry_id(id: &str, key: &str) -> Result<EntryId> {
    match parse_stream_id(id) {
        Ok(Some(id)) => Ok(id),
        _ => Err(CoreError::corrupt(
            key,
            format!("unexpected stream id {id:?} in a snapshot reply"),
        )),
    }
}

fn entries(raw: Vec<(String, decode::Entry)>, key: &str) -> Result<Vec<(EntryId, Entry)>> {
    raw.into_iter()
        .map(|(id, entry)| {
            let entry = match entry {
                decode::Entry::Event(e) => Entry::Event(e),
                decode::Entry::End => Entry::End,
            };
            Ok((entry_id(&id, key)?, entry))
        })
        .collect()
}

#[async_trait]
impl ReplaySource for RedisSource {
    fn what(&self) -> &'static str {
        WHAT
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn check_open(&self) -> Result<()> {
        self.inner.check_open()
    }

    async fn newest(&mut self) -> Result<Option<(EntryId, bool)>> {
        // Boxed: a parked subscription then carries no room for this one-off call.
        let newest: Value = Box::pin(self.inner.snapshots.xrevrange::<Value, _, _, _>(
            &self.key,
            "+",
            "-",
            Some(1),
        ))
        .await
        .map_err(|e| classify("subscribe", &self.key, e))?;
        match decode::entries(newest, &self.key)?.into_iter().next() {
            Some((id, entry)) => Ok(Some((
                entry_id(&id, &self.key)?,
                entry == decode::Entry::End,
            ))),
            None => Ok(None),
        }
    }

    async fn snapshot(&mut self, after: EntryId, want_added: bool) -> Result<Snapshot> {
        let args = vec![
            replay::id_text(after),
            XREAD_COUNT.to_string(),
            if want_added { "1" } else { "0" }.to_owned(),
        ];
        let reply = self
            .inner
            .snapshot(self.key.clone(), args)
            .await
            .map_err(|e| classify("subscribe", &self.key, e))?;
        Ok(match decode::snapshot(reply, &self.key)? {
            decode::Snapshot::Empty { added } => Snapshot::Missing { added },
            decode::Snapshot::Present {
                first,
                last,
                last_is_end,
                added,
                len,
                entries: raw,
            } => Snapshot::Present {
                first: entry_id(&first, &self.key)?,
                last: entry_id(&last, &self.key)?,
                last_is_end,
                added,
                len,
                entries: entries(raw, &self.key)?,
            },
        })
    }

    fn register(&mut self, after: EntryId) {
        self.rx = Some(self.inner.readers.register(&self.key, after));
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
            // A blocking read that timed out is a successful read.
            Err(_elapsed) => Wakeup::TimedOut,
            Ok(Err(_)) => Wakeup::Closed,
            Ok(Ok(())) => match rx.borrow_and_update() {
                Wake::Entries(_) | Wake::Idle => Wakeup::Changed,
                Wake::Closed => Wakeup::Closed,
                Wake::Error(_, msg) => {
                    Wakeup::Failed(CoreError::unavailable("subscribe", self.key.clone(), msg))
                }
            },
        }
    }
}
