//! What an adapter knows about the reachability of its Redis, so calls fail at once while Redis
//! is known to be down instead of waiting for a command timeout (ADR 0355).
//!
//! fred keeps a command sent while it is reconnecting in its queue until the connection is back
//! or the command times out. For a blip (a connection killed and re-made within milliseconds)
//! that is what a caller wants; for an outage it makes every call wait the whole command
//! timeout, and a caller that retries (a claim's rounds) waits it again and again. A [`Circuit`]
//! watches the connection events of an adapter's clients and tells the two apart:
//!
//! * **connecting**: no connection attempt has finished yet (a freshly opened client);
//! * **up**: a connection was made, and no attempt to make one has failed since;
//! * **down**: an attempt to connect failed (refused, timed out, TLS or handshake error) and none
//!   has succeeded since; fred keeps trying in the background.
//!
//! A connection that merely drops does not make the circuit down: fred reconnects at once, and
//! only if that attempt fails is Redis known to be down. While the circuit is down and no
//! watched client is connected, [`Circuit::check`] and [`Circuit::guard`] answer
//! [`Error::Unavailable`] at once, naming the server and the last connect error.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{ClientLike, EventInterface};
use fred::prelude::Server;
use switchyard_core::{Error, Result};
use tokio::sync::{broadcast, watch};

use crate::url::RedisUrl;

/// What a [`Circuit`] knows about its Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reachability {
    /// No connection attempt has finished yet.
    Connecting,
    /// Connected, and no connection attempt has failed since.
    Up,
    /// The last connection attempt failed with this error (fred's words, lower-cased first
    /// letter); no attempt has succeeded since.
    Down(String),
}

struct Shared {
    /// Where the clients connect, for messages: `host:port`, or the seed nodes of a cluster or
    /// the sentinels, comma-separated.
    target: String,
    /// "Redis", "the Redis Cluster" or "the Redis sentinels".
    kind: &'static str,
    state: watch::Sender<Reachability>,
    /// The watched clients (clones share the connection), to see whether one is connected.
    clients: std::sync::Mutex<Vec<Client>>,
}

/// The reachability of one adapter's Redis, fed by the connection events of its clients. Cheap
/// to clone; clones share the state.
#[derive(Clone)]
pub struct Circuit {
    shared: Arc<Shared>,
}

impl fmt::Debug for Circuit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Circuit")
            .field("target", &self.shared.target)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl Circuit {
    /// A circuit for clients connecting to `url`, in state [`Reachability::Connecting`]. Feed it
    /// with [`watch`](Self::watch) before the clients connect.
    pub fn new(url: &RedisUrl) -> Self {
        let config = url.config();
        let hosts: Vec<String> = config
            .server
            .hosts()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let kind = if config.server.is_clustered() {
            "the Redis Cluster"
        } else if config.server.is_sentinel() {
            "the Redis sentinels"
        } else {
            "Redis"
        };
        Circuit {
            shared: Arc::new(Shared {
                target: hosts.join(", "),
                kind,
                state: watch::channel(Reachability::Connecting).0,
                clients: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    /// Follows `client`'s connection events from now on: call it before the client connects, so
    /// the outcome of the first attempt is seen. Needs a tokio runtime (the adapters open inside
    /// one); without one the client is only consulted for [`ClientLike::is_connected`].
    pub fn watch(&self, client: &Client) {
        if let Ok(mut clients) = self.shared.clients.lock() {
            clients.push(client.clone());
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let errors = client.error_rx();
        let connects = client.reconnect_rx();
        runtime.spawn(follow(Arc::downgrade(&self.shared), errors, connects));
    }

    /// What the circuit knows now.
    pub fn state(&self) -> Reachability {
        self.shared.state.borrow().clone()
    }

    /// Whether no connection attempt has finished yet.
    pub fn is_connecting(&self) -> bool {
        matches!(*self.shared.state.borrow(), Reachability::Connecting)
    }

    /// Whether Redis is known to be down: the last connection attempt failed, none has succeeded
    /// since, and no watched client is connected.
    pub fn is_down(&self) -> bool {
        matches!(*self.shared.state.borrow(), Reachability::Down(_)) && !self.any_connected()
    }

    fn any_connected(&self) -> bool {
        self.shared
            .clients
            .lock()
            .map(|clients| clients.iter().any(|c| c.is_connected()))
            .unwrap_or(false)
    }

    /// The error a call gets while Redis is known to be down, naming the server and the
    /// connect error; `None` otherwise.
    pub fn down_error(&self, op: &'static str, key: &str) -> Option<Error> {
        let reason = match &*self.shared.state.borrow() {
            Reachability::Down(reason) => reason.clone(),
            _ => return None,
        };
        if self.any_connected() {
            return None;
        }
        Some(Error::unavailable(
            op,
            key.to_string(),
            format!(
                "cannot reach {} at {}: {reason}; retrying in the background",
                self.shared.kind, self.shared.target
            ),
        ))
    }

    /// `Ok` unless Redis is known to be down; then the [`down_error`](Self::down_error), at
    /// once.
    pub fn check(&self, op: &'static str, key: &str) -> Result<()> {
        match self.down_error(op, key) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs `call` unless Redis is known to be down, and ends it early with the
    /// [`down_error`](Self::down_error) if Redis becomes known to be down while it waits: a
    /// command queued for a reconnect that fails would otherwise wait its whole timeout. A call
    /// ended early has an unknown outcome, as any `Unavailable` one.
    pub async fn guard<T>(
        &self,
        op: &'static str,
        key: &str,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.check(op, key)?;
        let mut changes = self.shared.state.subscribe();
        tokio::select! {
            biased;
            out = call => out,
            e = self.went_down(&mut changes, op, key) => Err(e),
        }
    }

    /// Resolves once Redis is known to be down, with the error a call gets then.
    async fn went_down(
        &self,
        changes: &mut watch::Receiver<Reachability>,
        op: &'static str,
        key: &str,
    ) -> Error {
        loop {
            if changes.changed().await.is_err() {
                // The circuit is gone with its adapter: nothing more will change.
                return std::future::pending().await;
            }
            let down = matches!(*changes.borrow_and_update(), Reachability::Down(_));
            if down && let Some(e) = self.down_error(op, key) {
                return e;
            }
        }
    }

    /// Waits up to `timeout` for the first connection attempt to finish (successful or not);
    /// true when the circuit is no longer [`Reachability::Connecting`]. A freshly opened client
    /// is a few milliseconds from its first connection: a call that waits for it gets an answer
    /// instead of a refusal.
    pub async fn wait_settled(&self, timeout: Duration) -> bool {
        let mut changes = self.shared.state.subscribe();
        matches!(
            tokio::time::timeout(
                timeout,
                changes.wait_for(|s| !matches!(s, Reachability::Connecting))
            )
            .await,
            Ok(Ok(_))
        )
    }
}

/// Turns one client's connection events into circuit states until the client stops (its event
/// channels close on `quit`) or the circuit is dropped.
async fn follow(
    shared: Weak<Shared>,
    mut errors: broadcast::Receiver<(fred::error::Error, Option<Server>)>,
    mut connects: broadcast::Receiver<Server>,
) {
    use broadcast::error::RecvError;
    loop {
        let next = tokio::select! {
            connected = connects.recv() => match connected {
                Ok(_) => Some(Reachability::Up),
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
            failed = errors.recv() => match failed {
                // fred reports a failed connection attempt without a server, and a dropped
                // connection (which it reconnects at once) with the server it was to.
                Ok((e, None)) => Some(Reachability::Down(reason(&e))),
                Ok((_, Some(_))) | Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // Every event wakes the waiting calls, also one that leaves the state as it was: whether
        // Redis is known to be down depends on the other clients too (a call that started while
        // one of them was still connected must see the last one fail).
        shared.state.send_modify(|current| {
            if let Some(state) = next {
                *current = state;
            }
        });
    }
}

/// fred's description of a connect error, as a clause: "connection refused (os error 111)".
fn reason(e: &fred::error::Error) -> String {
    let details = e.details();
    let details = if details.is_empty() {
        format!("{:?}", e.kind())
    } else {
        details.to_string()
    };
    let mut chars = details.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::Topology;

    #[test]
    fn names_the_server_and_the_error() {
        let url =
            RedisUrl::parse("redis://127.0.0.1:6380", "url", &[Topology::Standalone]).expect("url");
        let circuit = Circuit::new(&url);
        assert_eq!(circuit.state(), Reachability::Connecting);
        assert!(circuit.check("claim_start", "k").is_ok());
        circuit
            .shared
            .state
            .send_replace(Reachability::Down(reason(&fred::error::Error::new(
                fred::error::ErrorKind::IO,
                "Connection refused (os error 111)",
            ))));
        assert!(circuit.is_down());
        match circuit.check("claim_start", "k") {
            Err(e @ Error::Unavailable { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(
                        "cannot reach Redis at 127.0.0.1:6380: connection refused (os error 111); \
                         retrying in the background"
                    ),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        circuit.shared.state.send_replace(Reachability::Up);
        assert!(circuit.check("claim_start", "k").is_ok());
    }
}
