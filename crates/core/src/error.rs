//! The one error type every port returns.
//!
//! Variants say what a caller can do about a failure, not which library failed: retry later
//! ([`Error::Unavailable`], [`Error::Contended`]), fix the input ([`Error::InvalidInput`]), or
//! repair stored data ([`Error::Corrupt`]). Backend library errors are carried only as an opaque
//! `source`, so no fred or sqlx type ever appears in a signature.

use std::fmt;

/// A boxed error from a backend library, kept as the `source` of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with switchyard's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a switchyard port can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed a value the contract forbids. Fix the input; retrying will not help.
    #[error("invalid input: `{field}` {reason}")]
    InvalidInput {
        /// Dotted path of the offending field, e.g. `payload.usage.usd`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The backend could not be reached or failed while serving `op`. Retrying later may succeed.
    #[error("backend unavailable during {op} on `{key}`: {source}")]
    Unavailable {
        /// The operation that failed, e.g. `append`.
        op: &'static str,
        /// The key, row or resource it touched.
        key: String,
        /// The backend's own error.
        #[source]
        source: BoxError,
    },

    /// An optimistic operation lost to concurrent writers `attempts` times in a row and gave up.
    /// Nothing was written; retrying later may succeed.
    #[error("{op} on `{key}` gave up after {attempts} contended attempts")]
    Contended {
        /// The operation, e.g. `claim_start`.
        op: &'static str,
        /// The key it contended on.
        key: String,
        /// How many rounds were tried.
        attempts: u32,
    },

    /// Data read back from the backend is not what this library writes. Other keys stay readable.
    #[error("corrupt stored data at `{location}`: {reason}")]
    Corrupt {
        /// The key, row id or entry that could not be decoded.
        location: String,
        /// Why it could not be decoded.
        reason: String,
    },

    /// The backend refused the operation because of its own state (a unique index, a wrong key
    /// type, a script error). Retrying the same call will fail the same way.
    #[error("backend rejected {op} on `{key}`: {message}")]
    Rejected {
        /// The operation.
        op: &'static str,
        /// The key or resource.
        key: String,
        /// What the backend said.
        message: String,
    },

    /// A configuration value (URL, option, environment variable) is unusable.
    #[error("invalid configuration `{key}`: {reason}")]
    Config {
        /// The option, e.g. `SWITCHYARD_REDIS_URL`.
        key: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// The id the caller chose is already taken (a run id that already has events in its log).
    /// Nothing was written; retry with a fresh id.
    #[error("{what} {id:?} already exists; choose a new id")]
    AlreadyExists {
        /// What kind of thing, e.g. `run`.
        what: &'static str,
        /// The id that is taken.
        id: String,
    },

    /// The task was cancelled while this caller held it (ADR 0380): stop working on it, and do
    /// not retry or requeue it. The backend already ended it `cancelled`.
    #[error("{what} {id:?} was cancelled; stop working on it and do not retry or requeue it")]
    Cancelled {
        /// What kind of thing, e.g. `task`.
        what: &'static str,
        /// Its id.
        id: String,
    },

    /// The adapter was closed; build a new one.
    #[error("{what} is closed")]
    Closed {
        /// Which adapter.
        what: &'static str,
    },
}

impl Error {
    /// An [`Error::InvalidInput`] for `field`.
    pub fn invalid(field: impl Into<String>, reason: impl fmt::Display) -> Self {
        Error::InvalidInput {
            field: field.into(),
            reason: reason.to_string(),
        }
    }

    /// An [`Error::Corrupt`] for `location`.
    pub fn corrupt(location: impl Into<String>, reason: impl fmt::Display) -> Self {
        Error::Corrupt {
            location: location.into(),
            reason: reason.to_string(),
        }
    }

    /// An [`Error::Unavailable`] wrapping a backend error.
    pub fn unavailable(
        op: &'static str,
        key: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Unavailable {
            op,
            key: key.into(),
            source: source.into(),
        }
    }

    /// An [`Error::Config`] for `key`.
    pub fn config(key: impl Into<String>, reason: impl fmt::Display) -> Self {
        Error::Config {
            key: key.into(),
            reason: reason.to_string(),
        }
    }

    /// True when retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::Contended { .. })
    }
}
