//! Waking local subscribers from the bridge's one `LISTEN` connection.
//!
//! Every publish and cleanup NOTIFYs the bridge's channel with the stream's name. One task per
//! bridge reads the notifications ([`Notifications`]) and wakes the subscribers registered for
//! that name; when notifications may have been missed (the connection was lost) it wakes them
//! all, and they re-read their snapshot. A wake-up carries no data: the table holds the truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use switchyard_postgres_support::{Notifications, Signal};
use tokio::sync::watch;

/// What woke a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Nothing yet (the initial value).
    Idle,
    /// Something may have changed (a count, so consecutive wakes differ).
    Changed(u64),
    /// The bridge was closed.
    Closed,
}

/// The subscribers of this bridge, by stream name.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    map: Mutex<HashMap<String, watch::Sender<Wake>>>,
    closed: std::sync::atomic::AtomicBool,
    wakes: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watchers {
    /// A receiver woken whenever `name` may have changed. Register before the snapshot whose
    /// emptiness makes the subscriber wait, so nothing committed after it goes unnoticed.
    pub(crate) fn register(&self, name: &str) -> watch::Receiver<Wake> {
        let mut map = lock(&self.map);
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return watch::channel(Wake::Closed).1;
        }
        map.retain(|_, tx| tx.receiver_count() > 0);
        map.entry(name.to_owned())
            .or_insert_with(|| watch::channel(Wake::Idle).0)
            .subscribe()
    }

    fn next(&self) -> Wake {
        Wake::Changed(
            self.wakes
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
                .wrapping_add(1),
        )
    }

    fn wake(&self, name: &str) {
        let wake = self.next();
        let mut map = lock(&self.map);
        if let Some(tx) = map.get(name)
            && tx.send(wake).is_err()
        {
            map.remove(name);
        }
    }

    fn wake_all(&self) {
        let wake = self.next();
        lock(&self.map).retain(|_, tx| tx.send(wake).is_ok());
    }

    /// Wakes every subscriber with [`Wake::Closed`]; later registrations get it at once.
    pub(crate) fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        for (_, tx) in lock(&self.map).drain() {
            tx.send_replace(Wake::Closed);
        }
    }

    /// Subscribers registered right now (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        let mut map = lock(&self.map);
        map.retain(|_, tx| tx.receiver_count() > 0);
        map.len()
    }
}

/// Reads `notifications` until they end, waking `watchers`.
pub(crate) fn dispatch(
    notifications: &Notifications,
    watchers: Arc<Watchers>,
) -> tokio::task::JoinHandle<()> {
    let mut sub = notifications.subscribe();
    tokio::spawn(async move {
        while let Some(signal) = sub.recv().await {
            match signal {
                Signal::Notify { payload, .. } if &*payload != "*" => watchers.wake(&payload),
                Signal::Notify { .. } | Signal::Missed => watchers.wake_all(),
            }
        }
    })
}
