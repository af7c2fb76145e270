//! The cluster fan-out (ADR 0093): subscribers wake on a sharded pub/sub channel per run instead of
//! a shared multi-key `XREAD BLOCK`, which a cluster refuses across slots.
//!
//! Every publish in the cluster layout also `SPUBLISH`es on the run's wake channel (same hash tag,
//! so the same slot, inside the publish script). One `SubscriberClient` per bridge (one connection
//! per primary) holds an `SSUBSCRIBE` for every run with waiting local subscribers. As with the
//! `XREAD` readers, a message only wakes: the subscriber re-reads through its atomic snapshot.
//!
//! Pub/sub is fire-and-forget, so a wake can be missed in two windows, and both are closed by an
//! extra wake rather than by the message: (1) between a subscriber's snapshot and the moment its
//! channel's `SSUBSCRIBE` is confirmed — every subscriber of a channel is woken once the
//! subscription is confirmed; (2) while a connection is down — after every reconnect all channels
//! are subscribed again and every subscriber is woken. A subscriber also re-reads after each
//! heartbeat interval, which bounds any other loss (for example a slot moving mid-publish).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::Message;
use tokio::sync::{broadcast, mpsc};

use crate::wake;
use tokio::task::JoinHandle;

use crate::readers::Wake;

/// The wake channel of a stream key: the key plus `:wake`. Channels are not keys, so it cannot
/// collide with a stream; it carries the key's hash tag, so it hashes to the key's slot.
pub(crate) fn wake_channel(key: &str) -> String {
    format!("{key}:wake")
}

#[derive(Debug)]
pub(crate) struct PubSubReaders {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    client: SubscriberClient,
    /// Wake channel → the key's subscribers.
    channels: Mutex<HashMap<String, wake::Sender>>,
    closed: AtomicBool,
    wakes: AtomicU64,
    failed_reads: AtomicU64,
    sweep: Duration,
}

#[derive(Debug)]
enum Command {
    Subscribe(String),
    Unsubscribe(String),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PubSubReaders {
    /// Starts the dispatcher (messages → wakes) and the subscription manager on `client` (already
    /// connected). `sweep` is how often channels nobody waits on are unsubscribed.
    pub(crate) fn start(client: SubscriberClient, sweep: Duration) -> Self {
        let shared = Arc::new(Shared {
            client,
            channels: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            wakes: AtomicU64::new(0),
            failed_reads: AtomicU64::new(0),
            sweep,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let messages = shared.client.message_rx();
        let reconnects = shared.client.reconnect_rx();
        let tasks = vec![
            tokio::spawn(shared.clone().dispatch(messages)),
            tokio::spawn(shared.clone().manage(rx, reconnects, tx.clone())),
        ];
        Self {
            shared,
            commands: tx,
            tasks: Mutex::new(tasks),
        }
    }

    /// Registers interest in `key` (the position is not needed: a wake only triggers a re-read).
    /// Call before the snapshot whose emptiness makes the subscriber wait; the subscriber is woken
    /// once the channel's subscription is confirmed, so nothing published in between is missed.
    pub(crate) fn register(&self, key: &str) -> wake::Receiver {
        let channel = wake_channel(key);
        let mut channels = lock(&self.shared.channels);
        if self.shared.closed.load(Ordering::Acquire) {
            return wake::channel(Wake::Closed).1;
        }
        if let Some(tx) = channels.get(&channel) {
            return tx.subscribe();
        }
        let (tx, rx) = wake::channel(Wake::Idle);
        channels.insert(channel.clone(), tx);
        // Sent under the lock, so a sweep's Unsubscribe of an older entry is queued before it.
        let _ = self.commands.send(Command::Subscribe(channel));
        rx
    }

    /// Wakes every waiting subscriber with [`Wake::Closed`] and stops.
    pub(crate) async fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        for (_, tx) in lock(&self.shared.channels).drain() {
            tx.send_replace(Wake::Closed);
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        let _ = self.shared.client.quit().await;
    }

    /// Subscriptions that failed since the start (each one is an error wake for that run).
    pub(crate) fn failed_reads(&self) -> u64 {
        self.shared.failed_reads.load(Ordering::Acquire)
    }

    /// Runs with waiting local subscribers (one wake channel each).
    pub(crate) fn watched_keys(&self) -> usize {
        lock(&self.shared.channels).len()
    }
}

impl Shared {
    fn next_wake(&self) -> u64 {
        self.wakes.fetch_add(1, Ordering::AcqRel) + 1
    }

    fn wake(&self, channel: &str) {
        let n = self.next_wake();
        if let Some(tx) = lock(&self.channels).get(channel) {
            tx.send_replace(Wake::Entries(n));
        }
    }

    fn wake_all(&self) {
        let n = self.next_wake();
        for tx in lock(&self.channels).values() {
            tx.send_replace(Wake::Entries(n));
        }
    }

    async fn dispatch(self: Arc<Self>, mut messages: broadcast::Receiver<Message>) {
        loop {
            match messages.recv().await {
                Ok(message) => self.wake(&message.channel),
                // Messages were dropped: wake everyone rather than guess who they were for.
                Err(broadcast::error::RecvError::Lagged(_)) => self.wake_all(),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    async fn subscribe(&self, channels: Vec<String>) -> Result<(), Error> {
        // One SSUBSCRIBE per slot: a cluster refuses one spanning slots.
        let mut by_slot: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for channel in channels {
            by_slot
                .entry(fred::util::redis_keyslot(channel.as_bytes()))
                .or_default()
                .push(channel);
        }
        for group in by_slot.into_values() {
            self.client.ssubscribe(group).await?;
        }
        Ok(())
    }

    /// Applies subscription changes in order, resubscribes after a reconnect, and sweeps channels
    /// nobody waits on.
    async fn manage(
        self: Arc<Self>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut reconnects: broadcast::Receiver<Server>,
        retry: mpsc::UnboundedSender<Command>,
    ) {
        let mut sweep = tokio::time::interval(self.sweep);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe(channel)) => {
                        if !lock(&self.channels).contains_key(&channel) {
                            continue;
                        }
                        match self.subscribe(vec![channel.clone()]).await {
                            // Covers anything published between the subscribers' snapshots and now.
                            Ok(()) => self.wake(&channel),
                            Err(e) => {
                                self.failed_reads.fetch_add(1, Ordering::AcqRel);
                                tracing::warn!(error = %e, %channel, "stream bridge: SSUBSCRIBE failed");
                                let n = self.next_wake();
                                if let Some(tx) = lock(&self.channels).get(&channel) {
                                    tx.send_replace(Wake::Error(n, e.to_string()));
                                }
                                let retry = retry.clone();
                                tokio::spawn(async move {
                                    tokio::time::sleep(Duration::from_millis(250)).await;
                                    let _ = retry.send(Command::Subscribe(channel));
                                });
                            }
                        }
                    }
                    Some(Command::Unsubscribe(channel)) => {
                        if !lock(&self.channels).contains_key(&channel) {
                            let _ = self.client.sunsubscribe(channel).await;
                        }
                    }
                },
                reconnect = reconnects.recv() => {
                    if matches!(reconnect, Err(broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    // Subscriptions do not survive a lost connection, and messages sent while it
                    // was down are gone: subscribe again, then let every subscriber re-read.
                    let channels: Vec<String> = lock(&self.channels).keys().cloned().collect();
                    if let Err(e) = self.subscribe(channels).await {
                        self.failed_reads.fetch_add(1, Ordering::AcqRel);
                        tracing::warn!(error = %e, "stream bridge: resubscribing after a reconnect failed");
                        let n = self.next_wake();
                        for tx in lock(&self.channels).values() {
                            tx.send_replace(Wake::Error(n, e.to_string()));
                        }
                        // Retried one by one through the command queue.
                        for channel in lock(&self.channels).keys() {
                            let _ = retry.send(Command::Subscribe(channel.clone()));
                        }
                    } else {
                        self.wake_all();
                    }
                },
                _ = sweep.tick() => {
                    let mut channels = lock(&self.channels);
                    channels.retain(|channel, tx| {
                        let keep = tx.receiver_count() > 0;
                        if !keep {
                            let _ = retry.send(Command::Unsubscribe(channel.clone()));
                        }
                        keep
                    });
                }
            }
        }
    }
}
