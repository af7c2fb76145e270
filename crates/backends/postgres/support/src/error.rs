//! The one mapping from sqlx's PostgreSQL errors to [`switchyard_core::Error`] (ADR 0220).
//!
//! What decides the variant is what the caller can do, read from the error's SQLSTATE:
//!
//! * **retry later** → [`Error::Unavailable`]: the connection was lost or never came (class
//!   `08`, I/O, protocol), the server is shutting down, restarting or cancelled the statement
//!   (`57P01`, `57P02`, `57P03`, `57014`), it ran out of a resource (class `53`: connections,
//!   disk, memory), a system error (class `58`), a read-only transaction on a standby that a
//!   failover has not promoted yet (`25006`), an unknown commit outcome (`40003`), or no pooled
//!   connection came free within the acquire timeout. A lost reply is an unknown outcome; each
//!   adapter says how its writes stay safe to retry.
//! * **lost to a concurrent transaction** → [`Error::Contended`] (`attempts: 1`): a
//!   serialization failure (`40001`), a deadlock (`40P01`) or a lock that was not available
//!   (`55P03`). Nothing was written; the same call may pass when retried. Adapters that retry
//!   such losses themselves test [`is_retryable`] before mapping.
//! * **the backend refused the call; the same call fails the same way** → [`Error::Rejected`]:
//!   integrity violations (class `23`, a unique index among them: [`is_unique_violation`]) and
//!   every other refusal (an undefined table that someone dropped, a syntax error).
//! * **fix the input** → [`Error::InvalidInput`]: a value PostgreSQL cannot hold (class `22`,
//!   e.g. a NUL character in text) or one past its limits (class `54`, e.g. an id too long for
//!   an index entry).
//! * **fix the configuration** → [`Error::Config`] under [`URL_SETTING`]: credentials (class
//!   `28`), a missing database (`3D000`) or schema (`3F000`), a missing privilege (`42501`), TLS
//!   and URL errors.
//! * **stored data does not decode** → [`Error::Corrupt`] at the key (column decode errors).
//! * a closed pool → [`Error::Closed`].

use std::borrow::Cow;
use std::fmt;

use sqlx::error::DatabaseError;
use switchyard_core::Error;

/// The option an [`Error::Config`] from [`error`] is reported under.
pub const URL_SETTING: &str = "postgres_url";

/// A failure the caller may retry, with what PostgreSQL or the driver said and what it means.
#[derive(Debug)]
struct Transient {
    detail: String,
    meaning: &'static str,
    source: sqlx::Error,
}

impl fmt::Display for Transient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}; retry later)", self.detail, self.meaning)
    }
}

impl std::error::Error for Transient {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The SQLSTATE of a database error, if `e` is one.
pub fn sqlstate(e: &sqlx::Error) -> Option<Cow<'_, str>> {
    e.as_database_error().and_then(DatabaseError::code)
}

/// Whether `e` is a transaction that lost to a concurrent one and may pass when run again: a
/// serialization failure (`40001`) or a deadlock (`40P01`).
pub fn is_retryable(e: &sqlx::Error) -> bool {
    matches!(sqlstate(e).as_deref(), Some("40001" | "40P01"))
}

/// Whether `e` is a unique index refusing a row (`23505`); an adapter that expects the clash
/// handles it before mapping.
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(sqlstate(e).as_deref(), Some("23505"))
}

/// Maps a sqlx error of `op` on `key` in the adapter `what` (see the module docs).
pub fn error(
    what: &'static str,
    op: &'static str,
    key: impl fmt::Display,
    e: sqlx::Error,
) -> Error {
    let key = key.to_string();
    let transient = |meaning: &'static str, e: sqlx::Error| {
        Error::unavailable(
            op,
            key.clone(),
            Transient {
                detail: e.to_string(),
                meaning,
                source: e,
            },
        )
    };
    match &e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(Cow::into_owned).unwrap_or_default();
            let message = db.message().to_string();
            database(op, &key, &code, &message, e, transient)
        }
        sqlx::Error::PoolClosed => Error::Closed { what },
        sqlx::Error::PoolTimedOut => transient(
            "no connection of the pool came free within the acquire timeout: every connection \
             was busy (the pool may be too small for the load) or new ones could not be made in \
             time",
            e,
        ),
        sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => transient(
            "the connection to PostgreSQL was lost or refused; the pool opens a new one",
            e,
        ),
        sqlx::Error::Protocol(_) | sqlx::Error::BeginFailed => {
            transient("the connection is in an unexpected state; it is dropped", e)
        }
        sqlx::Error::Tls(_) | sqlx::Error::Configuration(_) => Error::config(
            URL_SETTING,
            format!("{what} cannot connect: {e}; check the URL and its sslmode"),
        ),
        sqlx::Error::Migrate(_) => Error::config(
            URL_SETTING,
            format!("{what}: the schema does not match this build ({e})"),
        ),
        sqlx::Error::RowNotFound
        | sqlx::Error::TypeNotFound { .. }
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_) => Error::corrupt(key, format!("{op}: {e}")),
        sqlx::Error::Encode(_) | sqlx::Error::InvalidArgument(_) => {
            Error::invalid(key, format!("cannot be sent to PostgreSQL: {e}"))
        }
        _ => transient("an unexpected driver error", e),
    }
}

/// Maps a database error by its SQLSTATE `code`.
fn database(
    op: &'static str,
    key: &str,
    code: &str,
    message: &str,
    e: sqlx::Error,
    transient: impl Fn(&'static str, sqlx::Error) -> Error,
) -> Error {
    let class = code.get(..2).unwrap_or_default();
    match (class, code) {
        (_, "40001" | "40P01" | "55P03") => Error::Contended {
            op,
            key: key.to_string(),
            attempts: 1,
        },
        ("08", _) => transient("the connection to PostgreSQL failed", e),
        (_, "57P01" | "57P02") => transient(
            "the server is shutting down or was restarted; the pool opens a new connection",
            e,
        ),
        (_, "57P03") => transient("the server is starting up or in recovery", e),
        (_, "57014") => transient("the statement was cancelled (a statement timeout)", e),
        ("53", _) => transient(
            "the server is out of a resource (connections, disk or memory)",
            e,
        ),
        ("58", _) => transient("the server had a system error", e),
        (_, "25006") => transient(
            "the server is a read-only standby (a failover may be under way)",
            e,
        ),
        (_, "40003") => transient(
            "the outcome of the statement is unknown; read before writing again",
            e,
        ),
        ("28", _) => Error::config(
            URL_SETTING,
            format!("PostgreSQL refused the login ({message}); check the user and password"),
        ),
        (_, "3D000") => Error::config(
            URL_SETTING,
            format!("{message}; create the database or fix the URL's database name"),
        ),
        (_, "3F000") => Error::config(
            "schema",
            format!("{message}; the adapter creates its schema when it opens, check the name"),
        ),
        (_, "42501") => Error::config(
            URL_SETTING,
            format!(
                "{message}; grant the user the privilege (the adapters need CREATE on the \
                 database for their schema, or an existing schema they own)"
            ),
        ),
        ("22", _) => Error::invalid(key, format!("PostgreSQL cannot hold the value: {message}")),
        ("54", _) => Error::invalid(
            key,
            format!("is beyond a PostgreSQL limit ({message}); use a shorter or smaller value"),
        ),
        (_, "XX001" | "XX002") => Error::corrupt(key, format!("{op}: {message}")),
        _ => Error::Rejected {
            op,
            key: key.to_string(),
            message: if code.is_empty() {
                message.to_string()
            } else {
                format!("{message} (SQLSTATE {code})")
            },
        },
    }
}

#[cfg(test)]
mod tests;
