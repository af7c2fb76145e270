//! `LISTEN` on one connection, fanned out to any number of subscribers in the process.
//!
//! PostgreSQL delivers a `NOTIFY` to every connection that listens on its channel, so an adapter
//! that gave each waiting caller its own `LISTEN` connection would hold as many connections as
//! it has waiters. [`Notifications`] holds one, in a pool of its own (so it never takes a
//! connection the adapter's calls need), and hands every notification to every
//! [`Subscription`]; the subscribers filter by payload.
//!
//! Notifications are not stored: one sent while the connection is down is lost. So is one a
//! subscriber falls too far behind to receive. In both cases the subscriber gets
//! [`Signal::Missed`] and must re-read what it watches from the tables, which hold the truth;
//! a notification only says when to look.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use switchyard_core::Result;
use tokio::sync::broadcast;

use crate::error::error;

/// Signals a subscriber has not taken yet, per subscriber, before it is told it missed some.
const BUFFER: usize = 4096;

/// The longest pause between two attempts to listen again after the connection was lost.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What a [`Subscription`] receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A `NOTIFY` on `channel` with `payload`.
    Notify {
        /// The channel.
        channel: Arc<str>,
        /// The payload (`""` when the sender gave none).
        payload: Arc<str>,
    },
    /// Notifications may have been missed: the listening connection was lost and is listening
    /// again, or this subscriber fell behind. Re-read what you watch.
    Missed,
}

/// One `LISTEN` connection on a fixed set of channels, shared by every subscriber of the
/// process. Dropping it stops listening.
#[derive(Debug)]
pub struct Notifications {
    tx: broadcast::Sender<Signal>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Notifications {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Notifications {
    /// Listens on `channels` with a connection made like `pool`'s (its own pool of one), and
    /// returns once the `LISTEN` is in place, so a `NOTIFY` committed after this returns
    /// reaches every subscriber taken after it. `what` names the adapter in errors and logs.
    ///
    /// When the connection is lost it listens again, pausing up to a second between attempts,
    /// and then sends [`Signal::Missed`] to every subscriber.
    pub async fn listen(pool: &PgPool, channels: &[&str], what: &'static str) -> Result<Self> {
        let own = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .connect_lazy_with(pool.connect_options().as_ref().clone());
        let channels: Vec<String> = channels.iter().map(|c| c.to_string()).collect();
        let listener = start(&own, &channels)
            .await
            .map_err(|e| error(what, "listen", channels.join(","), e))?;
        let (tx, _) = broadcast::channel(BUFFER);
        let task = tokio::spawn(run(listener, own, channels, tx.clone(), what));
        Ok(Notifications { tx, task })
    }

    /// A new subscriber: it receives every signal sent from now on.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
        }
    }
}

/// One subscriber of a [`Notifications`].
#[derive(Debug)]
pub struct Subscription {
    rx: broadcast::Receiver<Signal>,
}

impl Subscription {
    /// The next signal; `None` once the [`Notifications`] is dropped. Falling behind by more
    /// than the buffer yields [`Signal::Missed`].
    pub async fn recv(&mut self) -> Option<Signal> {
        match self.rx.recv().await {
            Ok(signal) => Some(signal),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Signal::Missed),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

async fn start(pool: &PgPool, channels: &[String]) -> std::result::Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // The pool is ours alone and never closed while we listen.
    listener.ignore_pool_close_event(true);
    listener
        .listen_all(channels.iter().map(String::as_str))
        .await?;
    Ok(listener)
}

async fn run(
    mut listener: PgListener,
    pool: PgPool,
    channels: Vec<String>,
    tx: broadcast::Sender<Signal>,
    what: &'static str,
) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                // No subscriber is not an error: the signal is simply not needed.
                let _ = tx.send(Signal::Notify {
                    channel: n.channel().into(),
                    payload: n.payload().into(),
                });
            }
            // The connection was lost and sqlx has listened again on a new one.
            Ok(None) => {
                let _ = tx.send(Signal::Missed);
            }
            Err(e) => {
                tracing::warn!(adapter = what, error = %e, "LISTEN connection failed; listening again");
                // Start over on a fresh listener: the failed one may still hold a dead connection.
                drop(listener);
                let mut pause = Duration::from_millis(10);
                listener = loop {
                    tokio::time::sleep(pause).await;
                    match start(&pool, &channels).await {
                        Ok(listener) => break listener,
                        Err(e) => {
                            tracing::debug!(adapter = what, error = %e, "cannot listen yet");
                            pause = (pause * 2).min(MAX_BACKOFF);
                        }
                    }
                };
                let _ = tx.send(Signal::Missed);
            }
        }
    }
}
