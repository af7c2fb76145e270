//! The mapping, table-tested on database errors built by hand (every SQLSTATE class the module
//! names) and on the driver's own errors. `tests/live.rs` checks a few against a real server.

use std::borrow::Cow;
use std::fmt;
use std::io;

use sqlx::error::{DatabaseError, ErrorKind};

use super::*;

/// A database error with a chosen SQLSTATE, as the Postgres driver would report it.
#[derive(Debug)]
struct Fake {
    code: &'static str,
    message: &'static str,
}

impl fmt::Display for Fake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl std::error::Error for Fake {}

impl DatabaseError for Fake {
    fn message(&self) -> &str {
        self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.code))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        match self.code {
            "23505" => ErrorKind::UniqueViolation,
            _ => ErrorKind::Other,
        }
    }
}

fn db(code: &'static str, message: &'static str) -> sqlx::Error {
    sqlx::Error::Database(Box::new(Fake { code, message }))
}

/// The variant an error maps to, by name.
fn variant(e: &Error) -> &'static str {
    match e {
        Error::InvalidInput { .. } => "InvalidInput",
        Error::Unavailable { .. } => "Unavailable",
        Error::Contended { .. } => "Contended",
        Error::Corrupt { .. } => "Corrupt",
        Error::Rejected { .. } => "Rejected",
        Error::Config { .. } => "Config",
        Error::AlreadyExists { .. } => "AlreadyExists",
        Error::Closed { .. } => "Closed",
        _ => "other",
    }
}

#[test]
fn database_errors_by_sqlstate() {
    for (code, message, want) in [
        ("40001", "could not serialize access", "Contended"),
        ("40P01", "deadlock detected", "Contended"),
        ("55P03", "could not obtain lock", "Contended"),
        (
            "23505",
            "duplicate key value violates unique constraint",
            "Rejected",
        ),
        ("23503", "violates foreign key constraint", "Rejected"),
        ("23514", "violates check constraint", "Rejected"),
        ("08006", "connection failure", "Unavailable"),
        ("08001", "unable to connect", "Unavailable"),
        (
            "57P01",
            "terminating connection due to administrator command",
            "Unavailable",
        ),
        ("57P02", "crash shutdown", "Unavailable"),
        ("57P03", "the database system is starting up", "Unavailable"),
        (
            "57014",
            "canceling statement due to statement timeout",
            "Unavailable",
        ),
        ("53300", "too many connections for role", "Unavailable"),
        (
            "53100",
            "could not extend file: No space left on device",
            "Unavailable",
        ),
        ("58030", "could not write to file", "Unavailable"),
        (
            "25006",
            "cannot execute INSERT in a read-only transaction",
            "Unavailable",
        ),
        ("40003", "statement completion unknown", "Unavailable"),
        ("28P01", "password authentication failed", "Config"),
        ("28000", "no pg_hba.conf entry", "Config"),
        ("3D000", "database \"nope\" does not exist", "Config"),
        ("3F000", "schema \"nope\" does not exist", "Config"),
        ("42501", "permission denied for schema x", "Config"),
        (
            "22021",
            "invalid byte sequence for encoding \"UTF8\": 0x00",
            "InvalidInput",
        ),
        ("22003", "bigint out of range", "InvalidInput"),
        (
            "54000",
            "index row size 3000 exceeds btree version 4 maximum 2704",
            "InvalidInput",
        ),
        ("XX001", "invalid page in block", "Corrupt"),
        ("42P01", "relation \"events\" does not exist", "Rejected"),
        ("42601", "syntax error", "Rejected"),
        ("P0001", "raised by a function", "Rejected"),
    ] {
        let e = error("TestAdapter", "append", "events[x]", db(code, message));
        assert_eq!(variant(&e), want, "{code} {message}: {e:?}");
        let retry = matches!(want, "Unavailable" | "Contended");
        assert_eq!(e.is_transient(), retry, "{code}: {e}");
        if want == "Unavailable" {
            assert!(e.to_string().contains("retry later"), "{code}: {e}");
        }
        if want == "Config" {
            assert!(e.to_string().contains(message), "{code}: says why: {e}");
        }
    }
}

#[test]
fn driver_errors() {
    let io = |kind| sqlx::Error::Io(io::Error::new(kind, "boom"));
    for (e, want) in [
        (io(io::ErrorKind::ConnectionRefused), "Unavailable"),
        (io(io::ErrorKind::UnexpectedEof), "Unavailable"),
        (io(io::ErrorKind::ConnectionReset), "Unavailable"),
        (sqlx::Error::PoolTimedOut, "Unavailable"),
        (sqlx::Error::WorkerCrashed, "Unavailable"),
        (
            sqlx::Error::Protocol("unexpected message".into()),
            "Unavailable",
        ),
        (sqlx::Error::PoolClosed, "Closed"),
        (sqlx::Error::Tls("handshake failed".into()), "Config"),
        (sqlx::Error::Configuration("bad sslmode".into()), "Config"),
        (sqlx::Error::RowNotFound, "Corrupt"),
        (sqlx::Error::ColumnNotFound("data".into()), "Corrupt"),
        (sqlx::Error::Decode("not UTF-8".into()), "Corrupt"),
        (sqlx::Error::Encode("too long".into()), "InvalidInput"),
    ] {
        let shown = e.to_string();
        let mapped = error("TestAdapter", "read", "events[x]", e);
        assert_eq!(variant(&mapped), want, "{shown}: {mapped:?}");
    }
}

#[test]
fn helpers_read_the_sqlstate() {
    assert!(is_retryable(&db("40001", "x")));
    assert!(is_retryable(&db("40P01", "x")));
    assert!(!is_retryable(&db("23505", "x")));
    assert!(!is_retryable(&sqlx::Error::PoolTimedOut));
    assert!(is_unique_violation(&db("23505", "x")));
    assert!(!is_unique_violation(&db("23503", "x")));
    assert_eq!(sqlstate(&db("57P01", "x")).as_deref(), Some("57P01"));
    assert_eq!(sqlstate(&sqlx::Error::PoolClosed), None);
}

#[test]
fn rejected_names_the_sqlstate_and_closed_names_the_adapter() {
    match error(
        "TestAdapter",
        "append",
        "k",
        db("42P01", "relation does not exist"),
    ) {
        Error::Rejected { op, key, message } => {
            assert_eq!((op, key.as_str()), ("append", "k"));
            assert!(message.contains("SQLSTATE 42P01"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match error("TestAdapter", "append", "k", sqlx::Error::PoolClosed) {
        Error::Closed { what } => assert_eq!(what, "TestAdapter"),
        other => panic!("{other:?}"),
    }
}
