//! The fan-out readers: a few dedicated connections, each blocking in one `XREAD BLOCK` over every
//! stream key its local subscribers wait on, waking those subscribers when entries arrive.
//!
//! The read only wakes (as in the seed): a woken subscriber re-reads through its atomic snapshot.
//! A key joins a reader's read set when its first local subscriber registers; if the reader is
//! blocked at that moment it is interrupted with `CLIENT UNBLOCK` (sent on the command connection)
//! so the new key is read at once. Keys nobody waits on any more leave at the next cycle.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fred::prelude::*;
use fred::types::config::Options;
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::Notify;

use crate::wake;
use tokio::task::JoinHandle;

/// What woke a subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Nothing yet (the initial value).
    Idle,
    /// New entries for the key (the reader's count of reads, so consecutive wakes differ).
    Entries(u64),
    /// The shared blocking read failed; counts as a failed wake-up read for the retry rule.
    Error(u64, String),
    /// The bridge was closed.
    Closed,
}

/// Sentinel for "the reader is not blocked".
const NOT_BLOCKED: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Readers {
    shards: Vec<Arc<Shard>>,
    hasher: RandomState,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shard {
    client: Client,
    /// Sends `CLIENT UNBLOCK` (never blocks).
    control: Client,
    keys: Mutex<HashMap<String, KeyEntry>>,
    /// Bumped whenever the read set must change.
    generation: AtomicU64,
    /// The generation of the read set of the in-flight blocking read, or [`NOT_BLOCKED`].
    in_flight: AtomicU64,
    reader_wake: Notify,
    kick: Notify,
    closed: AtomicBool,
    block: Duration,
    timeout: Duration,
    reads: AtomicU64,
    failed_reads: AtomicU64,
}

#[derive(Debug)]
struct KeyEntry {
    /// The reader's position in this stream: it reads entries after it.
    read_id: (u64, u64),
    tx: wake::Sender,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Readers {
    /// Starts one reader task (and its interrupter) per client.
    pub(crate) fn start(
        clients: Vec<Client>,
        control: Client,
        block: Duration,
        timeout: Duration,
    ) -> Self {
        let shards: Vec<Arc<Shard>> = clients
            .into_iter()
            .map(|client| {
                Arc::new(Shard {
                    client,
                    control: control.clone(),
                    keys: Mutex::new(HashMap::new()),
                    generation: AtomicU64::new(0),
                    in_flight: AtomicU64::new(NOT_BLOCKED),
                    reader_wake: Notify::new(),
                    kick: Notify::new(),
                    closed: AtomicBool::new(false),
                    block,
                    timeout,
                    reads: AtomicU64::new(0),
                    failed_reads: AtomicU64::new(0),
                })
            })
            .collect();
        let mut tasks = Vec::new();
        for shard in &shards {
            tasks.push(tokio::spawn(shard.clone().read_loop()));
            tasks.push(tokio::spawn(shard.clone().kick_loop()));
        }
        Readers {
            shards,
            hasher: RandomState::new(),
            tasks: Mutex::new(tasks),
        }
    }

    /// Registers interest in `key` from position `after` and returns the receiver the subscriber
    /// waits on. Call before the snapshot whose emptiness makes the subscriber wait, so no entry
    /// can slip between the snapshot and the wake-up.
    pub(crate) fn register(&self, key: &str, after: (u64, u64)) -> wake::Receiver {
        let idx = (self.hasher.hash_one(key) as usize) % self.shards.len().max(1);
        let shard = &self.shards[idx];
        let mut keys = lock(&shard.keys);
        if shard.closed.load(Ordering::Acquire) {
            return wake::channel(Wake::Closed).1;
        }
        let (rx, changed) = match keys.get_mut(key) {
            Some(entry) => {
                // A subscriber further back lowers the read position (re-reading is harmless).
                let lowered = after < entry.read_id;
                if lowered {
                    entry.read_id = after;
                }
                (entry.tx.subscribe(), lowered)
            }
            None => {
                let (tx, rx) = wake::channel(Wake::Idle);
                keys.insert(key.to_owned(), KeyEntry { read_id: after, tx });
                (rx, true)
            }
        };
        drop(keys);
        if changed {
            shard.generation.fetch_add(1, Ordering::AcqRel);
            shard.reader_wake.notify_one();
            shard.kick.notify_one();
        }
        rx
    }

    /// Wakes every waiting subscriber with [`Wake::Closed`] and stops the readers.
    pub(crate) async fn close(&self) {
        for shard in &self.shards {
            shard.closed.store(true, Ordering::Release);
            for entry in lock(&shard.keys).drain().map(|(_, e)| e) {
                entry.tx.send_replace(Wake::Closed);
            }
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        for shard in &self.shards {
            // Redis runs a blocked client's next command only after its block ends, so a QUIT
            // sent now would wait out the rest of the `XREAD BLOCK` (seconds, holding a
            // gateway's exit): unblock the reader first.
            shard.unblock().await;
            let _ = shard.client.quit().await;
        }
    }

    /// Shared blocking reads that failed since the start (for tests and metrics).
    pub(crate) fn failed_reads(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.failed_reads.load(Ordering::Acquire))
            .sum()
    }

    /// Keys currently in the read sets (for tests and metrics).
    pub(crate) fn watched_keys(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.keys).len()).sum()
    }
}

impl Shard {
    async fn read_loop(self: Arc<Self>) {
        let opts = Options {
            timeout: Some(self.block + self.timeout),
            ..Default::default()
        };
        let block_ms = u64::try_from(self.block.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        while !self.closed.load(Ordering::Acquire) {
            let (keys, ids, generation) = {
                let mut keys = lock(&self.keys);
                keys.retain(|_, e| e.tx.receiver_count() > 0);
                let generation = self.generation.load(Ordering::Acquire);
                let mut names = Vec::with_capacity(keys.len());
                let mut ids = Vec::with_capacity(keys.len());
                for (k, e) in keys.iter() {
                    names.push(k.clone());
                    ids.push(format!("{}-{}", e.read_id.0, e.read_id.1));
                }
                (names, ids, generation)
            };
            if keys.is_empty() {
                // Register re-notifies, and the permit is kept if it came first.
                tokio::select! {
                    _ = self.reader_wake.notified() => {}
                    _ = tokio::time::sleep(self.block) => {}
                }
                continue;
            }
            self.in_flight.store(generation, Ordering::Release);
            // The names move into the command (no second copy of every key while it blocks).
            let watched = keys.len();
            let result: Result<Value, Error> = self
                .client
                .with_options(&opts)
                .xread(Some(crate::XREAD_COUNT), Some(block_ms), keys, ids)
                .await;
            self.in_flight.store(NOT_BLOCKED, Ordering::Release);
            let read = self.reads.fetch_add(1, Ordering::AcqRel) + 1;
            match result {
                Ok(value) => self.dispatch(value, read),
                Err(e) => {
                    if self.closed.load(Ordering::Acquire) {
                        return;
                    }
                    self.failed_reads.fetch_add(1, Ordering::AcqRel);
                    tracing::warn!(error = %e, keys = watched, "stream bridge reader: XREAD failed");
                    let msg = e.to_string();
                    for entry in lock(&self.keys).values() {
                        entry.tx.send_replace(Wake::Error(read, msg.clone()));
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    }

    /// Advances read positions and wakes the subscribers of every key that had entries.
    fn dispatch(&self, value: Value, read: u64) {
        let mut keys = lock(&self.keys);
        for (key, last_id) in crate::decode::xread_tails(value) {
            if let Some(entry) = keys.get_mut(&key) {
                if let Ok(Some(id)) = switchyard_core::stream::parse_stream_id(&last_id) {
                    entry.read_id = entry.read_id.max(id);
                }
                entry.tx.send_replace(Wake::Entries(read));
            }
        }
    }

    /// Interrupts a blocking read whose read set is stale. The `CLIENT UNBLOCK` can overtake the
    /// `XREAD` it is meant for, so it is repeated until that read has returned.
    async fn kick_loop(self: Arc<Self>) {
        loop {
            self.kick.notified().await;
            loop {
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                let in_flight = self.in_flight.load(Ordering::Acquire);
                if in_flight == NOT_BLOCKED || in_flight >= self.generation.load(Ordering::Acquire)
                {
                    break;
                }
                self.unblock().await;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }

    /// Interrupts the reader's blocking read, if one is in flight, with `CLIENT UNBLOCK` on the
    /// control connection (fred's `client_unblock` would open a backchannel connection of its
    /// own).
    async fn unblock(&self) {
        if let Some(id) = self.client.connection_ids().values().next().copied() {
            let cmd = CustomCommand::new_static("CLIENT", ClusterHash::Random, false);
            let args: Vec<Value> = vec!["UNBLOCK".into(), id.into()];
            let _: Result<Value, Error> = self.control.custom(cmd, args).await;
        }
    }
}
