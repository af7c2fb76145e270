//! sqlx errors as [`switchyard_core::Error`]: what the caller can do about each.

use std::fmt;

use sqlx::error::ErrorKind;
use switchyard_core::Error;

/// Maps a sqlx error of `op` on `key` in the adapter `what`:
///
/// * a unique index refusing a row is [`Error::Rejected`]: the same call fails the same way;
/// * a closed pool is [`Error::Closed`];
/// * everything else is [`Error::Unavailable`] (transient), notably `SQLITE_BUSY` once the busy
///   timeout has run out: another process held the write lock that long, and a later retry may
///   find it free. I/O errors are transient too; a full disk stays so until space is freed.
pub fn error(
    what: &'static str,
    op: &'static str,
    key: impl fmt::Display,
    e: sqlx::Error,
) -> Error {
    match &e {
        sqlx::Error::Database(db) if db.kind() == ErrorKind::UniqueViolation => Error::Rejected {
            op,
            key: key.to_string(),
            message: db.message().to_string(),
        },
        sqlx::Error::PoolClosed => Error::Closed { what },
        _ => Error::unavailable(op, key.to_string(), e),
    }
}

/// Whether a sqlx error is a unique index refusing a row (an adapter that expects the clash,
/// as an optimistic insert does, handles it before mapping).
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.kind() == ErrorKind::UniqueViolation)
}
