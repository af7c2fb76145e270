//! The pool every Postgres adapter opens, and the schema it works in.

use std::fmt;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgPool, PgPoolOptions};
use switchyard_core::{Error, Result};

use crate::circuit::{target, unreachable_reason};
use crate::error::error;
use crate::url::PostgresUrl;

/// The schema the adapters use unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "switchyard";

/// A schema name, checked to need no quoting: 1 to 63 bytes of lowercase ASCII letters, digits
/// and `_`, not starting with a digit nor with `pg_` (PostgreSQL reserves those). Such a name
/// means the same quoted or not, so it can go into `search_path` and into SQL as is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schema(String);

impl Schema {
    /// `name`, or [`Error::Config`] under `schema` saying what a name may hold.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let valid_chars = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let starts_well = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
        if !valid_chars || !starts_well || name.len() > 63 || name.starts_with("pg_") {
            return Err(Error::config(
                "schema",
                format!(
                    "{name:?} is not a usable schema name: use 1 to 63 lowercase letters, digits \
                     and '_', starting with a letter or '_' and not with 'pg_' (e.g. {DEFAULT_SCHEMA:?})"
                ),
            ));
        }
        Ok(Schema(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Schema {
    fn default() -> Self {
        Schema(DEFAULT_SCHEMA.to_string())
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How [`connect`] opens a pool. Every Postgres adapter's options map onto these.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    max_connections: u32,
    min_connections: u32,
    connect_timeout: Duration,
    acquire_timeout: Duration,
    check_on_acquire: bool,
    statement_timeout: Option<Duration>,
    schema: Schema,
    application_name: Option<String>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_connections: 10,
            min_connections: 0,
            connect_timeout: Duration::from_secs(10),
            acquire_timeout: Duration::from_secs(10),
            check_on_acquire: true,
            statement_timeout: None,
            schema: Schema::default(),
            application_name: None,
        }
    }
}

impl PoolOptions {
    /// Connections of the pool at most (at least 1). Default 10. Every gateway process opens
    /// this many per adapter at most: keep the sum under the server's `max_connections`.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self.min_connections = self.min_connections.min(self.max_connections);
        self
    }

    /// Connections kept open while idle. Default 0.
    pub fn min_connections(mut self, n: u32) -> Self {
        self.min_connections = n.min(self.max_connections);
        self
    }

    /// How long opening the adapter may take to reach the server (the first connection and
    /// the migrations) before it fails with [`Error::Unavailable`]. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a call waits for a pooled connection (opening one included) before it fails
    /// with [`Error::Unavailable`]. Default 10 s.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Whether an idle connection is checked (one round trip) before a call uses it. Default
    /// on: after a server restart or a `pg_terminate_backend`, calls get fresh connections
    /// instead of failing once per dead pooled one. Off saves the round trip; a call on a dead
    /// connection then fails with [`Error::Unavailable`] and the pool drops it.
    pub fn check_on_acquire(mut self, check: bool) -> Self {
        self.check_on_acquire = check;
        self
    }

    /// Longest one statement may run, lock waits included, before PostgreSQL cancels it and the
    /// call fails with [`Error::Unavailable`] (a cancelled statement writes nothing). Set on
    /// every connection as `statement_timeout`, rounded up to whole milliseconds. Default: the
    /// server's setting (none unless configured). Migrations are exempt: they may wait for
    /// another process's migration.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// The schema the adapter's tables live in. Default [`DEFAULT_SCHEMA`].
    pub fn schema(mut self, schema: Schema) -> Self {
        self.schema = schema;
        self
    }

    /// What `pg_stat_activity.application_name` shows for the pool's connections. Default: the
    /// adapter's name (so an operator can tell the adapters' connections apart).
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = Some(name.into());
        self
    }

    /// The schema.
    pub fn schema_name(&self) -> &Schema {
        &self.schema
    }
}

/// Opens a pool on `url` for the adapter `what` (named in errors and, unless set otherwise, as
/// the connections' `application_name`), every connection logging in with `search_path` set to
/// the schema, and waits for its first connection within the connect timeout.
///
/// The schema need not exist yet: [`migrate`](crate::migrate()) creates it. Fails with
/// [`Error::Config`] for credentials, a missing database or TLS, and with
/// [`Error::Unavailable`] when the server cannot be reached: at once, naming the error, when the
/// connection is refused, else after the connect timeout. Wrap the adapter's calls in a
/// [`Circuit`](crate::Circuit) so they fail as fast while the server is down.
pub async fn connect(
    url: &PostgresUrl,
    options: &PoolOptions,
    what: &'static str,
) -> Result<PgPool> {
    let mut connect = url
        .connect_options()
        .clone()
        .application_name(options.application_name.as_deref().unwrap_or(what))
        .options([("search_path", options.schema.as_str())]);
    if let Some(timeout) = options.statement_timeout {
        // Zero would mean "no limit" to PostgreSQL: the shortest real limit is 1 ms.
        let ms = timeout.as_micros().div_ceil(1000).max(1).to_string();
        connect = connect.options([("statement_timeout", ms.as_str())]);
    }
    let pool = PgPoolOptions::new()
        .max_connections(options.max_connections)
        .min_connections(options.min_connections)
        .acquire_timeout(options.acquire_timeout)
        .test_before_acquire(options.check_on_acquire)
        .connect_lazy_with(connect.clone());
    // The first connection is made directly, not through the pool: the pool retries a refused
    // connection until its timeout and then reports only that no connection came free, where
    // this reports the refusal (or the refused login, the missing database) at once.
    match tokio::time::timeout(options.connect_timeout, connect.connect()).await {
        Ok(Ok(conn)) => {
            let _ = sqlx::Connection::close(conn).await;
            Ok(pool)
        }
        Ok(Err(e)) => Err(match unreachable_reason(&e) {
            Some(reason) => Error::unavailable(
                "connect",
                url.to_string(),
                format!(
                    "cannot reach PostgreSQL at {}: {reason}; is the server up and the host and \
                     port right?",
                    target(url)
                ),
            ),
            None => error(what, "connect", url, e),
        }),
        Err(_) => Err(Error::unavailable(
            "connect",
            url.to_string(),
            format!(
                "no connection within the connect timeout of {:?}: is the server up and the \
                 host and port right?",
                options.connect_timeout
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        for good in ["switchyard", "_x", "a1_b2", &"s".repeat(63)] {
            assert_eq!(Schema::new(good).expect(good).as_str(), good);
        }
        for bad in [
            "",
            "Switchyard",
            "1abc",
            "pg_things",
            "a-b",
            "a b",
            "a\"b",
            &"s".repeat(64),
        ] {
            match Schema::new(bad) {
                Err(Error::Config { key, reason }) => {
                    assert_eq!(key, "schema");
                    assert!(reason.contains("lowercase"), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert_eq!(Schema::default().as_str(), DEFAULT_SCHEMA);
    }

    #[test]
    fn sizes_stay_consistent() {
        let o = PoolOptions::default().min_connections(5).max_connections(2);
        assert_eq!((o.max_connections, o.min_connections), (2, 2));
        let o = PoolOptions::default().max_connections(0);
        assert_eq!(o.max_connections, 1);
    }
}
