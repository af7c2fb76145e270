//! A wake-up slot per watched key: the one-value channel the readers use to wake a key's parked
//! subscribers, in about a quarter of the memory of `tokio::sync::watch` (ADR 0320).
//!
//! A `watch` channel carries nine `Notify`s (eight for readers, one for the sender) and a lock
//! around the value: about 400 bytes per key, and with one subscriber per run (one browser per
//! run) that is one channel per idle subscriber. A wake only tells a subscriber to re-read
//! through its snapshot, so one `Notify`, a version counter and the last value are enough. The
//! API mirrors the part of `watch` the bridge used, so the readers, the pub/sub fan-out and the
//! subscribe loop read as before.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::readers::Wake;

#[derive(Debug)]
struct Slot {
    /// Bumped by every send; a receiver has seen the versions up to its own `seen`.
    version: AtomicU64,
    value: Mutex<Wake>,
    notify: Notify,
    receivers: AtomicUsize,
    /// False once the sender is gone: receivers that saw everything then end.
    open: AtomicBool,
}

/// The reader's end of one key's slot.
#[derive(Debug)]
pub(crate) struct Sender(Arc<Slot>);

/// A subscriber's end.
#[derive(Debug)]
pub(crate) struct Receiver {
    slot: Arc<Slot>,
    seen: u64,
}

/// The sender was dropped and the receiver has seen every value.
#[derive(Debug)]
pub(crate) struct Closed;

/// A slot holding `init`; as with `watch::channel`, the receiver has seen the initial value.
pub(crate) fn channel(init: Wake) -> (Sender, Receiver) {
    let slot = Arc::new(Slot {
        version: AtomicU64::new(0),
        value: Mutex::new(init),
        notify: Notify::new(),
        receivers: AtomicUsize::new(1),
        open: AtomicBool::new(true),
    });
    let rx = Receiver {
        slot: slot.clone(),
        seen: 0,
    };
    (Sender(slot), rx)
}

fn value(slot: &Slot) -> std::sync::MutexGuard<'_, Wake> {
    slot.value.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sender {
    /// A new receiver that has seen the current value.
    pub(crate) fn subscribe(&self) -> Receiver {
        self.0.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver {
            slot: self.0.clone(),
            seen: self.0.version.load(Ordering::Acquire),
        }
    }

    /// Stores `wake` and wakes every waiting receiver.
    pub(crate) fn send_replace(&self, wake: Wake) {
        *value(&self.0) = wake;
        self.0.version.fetch_add(1, Ordering::AcqRel);
        self.0.notify.notify_waiters();
    }

    /// Receivers that still exist.
    pub(crate) fn receiver_count(&self) -> usize {
        self.0.receivers.load(Ordering::Acquire)
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.open.store(false, Ordering::Release);
        self.0.notify.notify_waiters();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.slot.receivers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Receiver {
    /// The latest value, marked as seen. The version is read before the value, so a send racing
    /// with this call is at worst seen twice (one extra re-read), never missed.
    pub(crate) fn borrow_and_update(&mut self) -> Wake {
        self.seen = self.slot.version.load(Ordering::Acquire);
        value(&self.slot).clone()
    }

    /// Waits for a value this receiver has not seen; `Err` once the sender is gone and nothing
    /// new is left.
    pub(crate) async fn changed(&mut self) -> Result<(), Closed> {
        loop {
            let notified = self.slot.notify.notified();
            tokio::pin!(notified);
            // Registered before the checks, so a send between them still wakes us.
            notified.as_mut().enable();
            if self.slot.version.load(Ordering::Acquire) != self.seen {
                return Ok(());
            }
            if !self.slot.open.load(Ordering::Acquire) {
                return Err(Closed);
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_send_wakes_a_waiting_receiver_and_is_seen_once() {
        let (tx, mut rx) = channel(Wake::Idle);
        let waiter = tokio::spawn(async move {
            rx.changed().await.map_err(|_| "closed")?;
            let got = rx.borrow_and_update();
            // Nothing new after the value was taken.
            let again = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
            Ok::<_, &str>((got, again.is_err()))
        });
        tokio::task::yield_now().await;
        tx.send_replace(Wake::Entries(7));
        let (got, timed_out) = waiter.await.expect("join").expect("open");
        assert_eq!(got, Wake::Entries(7));
        assert!(timed_out);
    }

    #[tokio::test]
    async fn a_send_before_waiting_is_not_lost() {
        let (tx, mut rx) = channel(Wake::Idle);
        tx.send_replace(Wake::Entries(1));
        rx.changed().await.expect("open");
        assert_eq!(rx.borrow_and_update(), Wake::Entries(1));
    }

    #[tokio::test]
    async fn subscribe_counts_receivers_and_sees_the_current_value() {
        let (tx, rx) = channel(Wake::Idle);
        tx.send_replace(Wake::Entries(1));
        let mut late = tx.subscribe();
        assert_eq!(tx.receiver_count(), 2);
        drop(rx);
        assert_eq!(tx.receiver_count(), 1);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), late.changed())
                .await
                .is_err(),
            "the value at subscription counts as seen"
        );
    }

    #[tokio::test]
    async fn a_dropped_sender_ends_receivers_after_their_last_value() {
        let (tx, mut rx) = channel(Wake::Idle);
        tx.send_replace(Wake::Closed);
        drop(tx);
        assert!(rx.changed().await.is_ok());
        assert_eq!(rx.borrow_and_update(), Wake::Closed);
        assert!(rx.changed().await.is_err());
        let (tx, mut rx) = channel(Wake::Closed);
        drop(tx);
        assert!(rx.changed().await.is_err());
    }
}
