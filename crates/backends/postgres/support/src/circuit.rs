//! What an adapter knows about the reachability of its PostgreSQL server, so calls fail at once,
//! naming the refused connection, while the server is known to be down (ADR 0355).
//!
//! sqlx's pool takes a refused connection for a server that is starting up: it retries the
//! connect until the acquire timeout (10 s by default) and then reports only that no connection
//! came free, which reads like a pool too small for the load. A [`Circuit`] tells an outage
//! apart: when a call has waited a little while and the pool has no idle connection, it makes
//! one connection attempt of its own. If that attempt fails to reach the server (refused, no
//! answer, the server starting or shutting down), the circuit opens: the call and every call
//! after it fail with [`Error::Unavailable`] naming the server and the connect error, and every
//! [`RETRY_INTERVAL`] one call tries to connect again; the first attempt that succeeds closes
//! the circuit.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPool};
use switchyard_core::{Error, Result};
use tokio::time::Instant;

use crate::url::PostgresUrl;

/// How long a call may wait before the circuit checks whether the server can be reached.
pub const SUSPECT_AFTER: Duration = Duration::from_millis(300);
/// How long the circuit's own connection attempt may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// While the circuit is open, the time between two connection attempts (each made by a call).
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct State {
    /// The connect error while the circuit is open.
    down: Option<String>,
    /// When the last attempt of the circuit's own finished.
    last_probe: Option<Instant>,
}

struct Shared {
    pool: PgPool,
    probe: PgConnectOptions,
    target: String,
    state: Mutex<State>,
    /// One attempt at a time: other calls do not pile up connections on a server in trouble.
    probing: tokio::sync::Mutex<()>,
}

/// The reachability of one adapter's PostgreSQL server. Cheap to clone; clones share the state.
#[derive(Clone)]
pub struct Circuit {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Circuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Circuit")
            .field("target", &self.shared.target)
            .field("down", &self.down_reason())
            .finish()
    }
}

/// `host:port` of the URL (the socket directory for a Unix socket), for messages.
pub fn target(url: &PostgresUrl) -> String {
    let options = url.connect_options();
    format!("{}:{}", options.get_host(), options.get_port())
}

impl Circuit {
    /// A closed circuit over `pool`, opened on `url` for the adapter `what` (its own connection
    /// attempts show `application_name` "`what` probe").
    pub fn new(url: &PostgresUrl, pool: &PgPool, what: &str) -> Self {
        let probe = url
            .connect_options()
            .clone()
            .application_name(&format!("{what} probe"));
        Circuit {
            shared: Arc::new(Shared {
                pool: pool.clone(),
                probe,
                target: target(url),
                state: Mutex::new(State::default()),
                probing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The connect error while the circuit is open.
    pub fn down_reason(&self) -> Option<String> {
        self.shared.state.lock().ok().and_then(|s| s.down.clone())
    }

    /// Whether the server is known to be unreachable now.
    pub fn is_down(&self) -> bool {
        self.down_reason().is_some()
    }

    fn error(&self, op: &'static str, key: &str, reason: &str) -> Error {
        unreachable_error(op, key, &self.shared.target, reason)
    }

    /// Runs `call`, failing at once while the server is known to be down, and early if it
    /// becomes known to be down while `call` waits. A call ended early has an unknown outcome,
    /// as any `Unavailable` one (it had not got a connection, so in practice nothing was sent).
    pub async fn guard<T>(
        &self,
        op: &'static str,
        key: &str,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.is_down() {
            match self.retry().await {
                Some(reason) => return Err(self.error(op, key, &reason)),
                None => tracing::info!(
                    server = %self.shared.target,
                    "PostgreSQL is reachable again"
                ),
            }
        }
        let mut call = std::pin::pin!(call);
        tokio::select! {
            biased;
            out = &mut call => return out,
            () = tokio::time::sleep(SUSPECT_AFTER) => {}
        }
        // A slow call with idle connections in the pool is a slow server or statement, not an
        // unreachable one: nothing to check.
        if self.shared.pool.num_idle() > 0 {
            return call.await;
        }
        tokio::select! {
            biased;
            out = &mut call => out,
            unreachable = self.probe_once() => match unreachable {
                Some(reason) => Err(self.error(op, key, &reason)),
                None => call.await,
            },
        }
    }

    /// After a call failed in a way that may mean the server is gone (a pooled connection of a
    /// stopped server fails only when it is used, with the shutdown's or an I/O error): one
    /// connection attempt, or the outcome of the one under way, opening the circuit when the
    /// server cannot be reached. Then the error a call gets while the circuit is open, to report
    /// instead of the lost connection's; `None` when the server was reached (the call's own error
    /// stands). The failed call's outcome is unknown either way.
    pub async fn confirm_down(&self, op: &'static str, key: &str) -> Option<Error> {
        let reason = match self.down_reason() {
            Some(reason) => reason,
            None => self.probe_once().await?,
        };
        Some(self.error(op, key, &reason))
    }

    /// While open: one connection attempt if none was made within [`RETRY_INTERVAL`] (closing
    /// the circuit when it succeeds); the connect error while it stays open.
    async fn retry(&self) -> Option<String> {
        let due = self
            .shared
            .state
            .lock()
            .ok()
            .is_some_and(|s| s.last_probe.is_none_or(|at| at.elapsed() >= RETRY_INTERVAL));
        if due && let Ok(_one) = self.shared.probing.try_lock() {
            return self.attempt().await;
        }
        self.down_reason()
    }

    /// One connection attempt unless another is under way (then its outcome); the connect error
    /// when the server cannot be reached.
    async fn probe_once(&self) -> Option<String> {
        match self.shared.probing.try_lock() {
            Ok(_one) => self.attempt().await,
            Err(_) => {
                let _wait = self.shared.probing.lock().await;
                self.down_reason()
            }
        }
    }

    /// Connects once and records the outcome: `Some(reason)` opens the circuit, `None` closes it.
    async fn attempt(&self) -> Option<String> {
        let outcome = match tokio::time::timeout(PROBE_TIMEOUT, self.shared.probe.connect()).await {
            Ok(Ok(conn)) => {
                // Closing politely costs a round trip the caller need not wait for.
                tokio::spawn(async move {
                    let _ = sqlx::Connection::close(conn).await;
                });
                None
            }
            Ok(Err(e)) => unreachable_reason(&e),
            Err(_) => Some(format!(
                "no answer to a connection attempt within {} ms",
                PROBE_TIMEOUT.as_millis()
            )),
        };
        if let Ok(mut state) = self.shared.state.lock() {
            state.last_probe = Some(Instant::now());
            state.down.clone_from(&outcome);
        }
        if let Some(reason) = &outcome {
            tracing::warn!(
                server = %self.shared.target,
                error = %reason,
                "PostgreSQL is unreachable; calls fail at once until a connection succeeds"
            );
        }
        outcome
    }
}

/// The clause for a connect error that means the server cannot be reached ("connection refused
/// (os error 111)", "the database system is shutting down"); `None` for one that means it was
/// reached (a refused login, a missing database: the call reports those itself).
pub fn unreachable_reason(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Io(io) => Some(lower_first(&io.to_string())),
        sqlx::Error::PoolTimedOut => Some("no answer to a connection attempt in time".to_string()),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            (code.starts_with("08") || code.starts_with("57P")).then(|| lower_first(db.message()))
        }
        _ => None,
    }
}

/// The `Unavailable` of a call that cannot reach the server at `target`.
pub fn unreachable_error(op: &'static str, key: &str, target: &str, reason: &str) -> Error {
    Error::unavailable(
        op,
        key.to_string(),
        format!(
            "cannot reach PostgreSQL at {target}: {reason}; calls fail at once until a \
             connection succeeds (one is tried every {} ms)",
            RETRY_INTERVAL.as_millis()
        ),
    )
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_named_as_such() {
        let refused = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert_eq!(
            unreachable_reason(&refused).as_deref(),
            Some("connection refused (os error 111)")
        );
        assert_eq!(unreachable_reason(&sqlx::Error::RowNotFound), None);
        let e = unreachable_error(
            "claim_start",
            "k",
            "127.0.0.1:5432",
            "connection refused (os error 111)",
        );
        assert!(matches!(e, Error::Unavailable { .. }));
        assert!(
            e.to_string().contains(
                "cannot reach PostgreSQL at 127.0.0.1:5432: connection refused (os error 111)"
            ),
            "{e}"
        );
    }
}
