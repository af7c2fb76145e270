//! The service's one error type: each variant says what the caller can do.

use serde_json::{Map, Value};

/// The result of a service call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a service call did not do what it was asked. A refusal that is part of normal operation
/// is data in the answer where the port makes it data (a lost claim is `held_by`); these are the
/// refusals a caller must act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request breaks a rule of the data model or a limit of the service: change `field`
    /// and send it again. `code` names the rule (`invalid_input`, `too_many_events`, …) and
    /// `details` carries its numbers (`max_events`, …).
    #[error("{message}")]
    Invalid {
        field: String,
        code: &'static str,
        message: String,
        details: Map<String, Value>,
    },
    /// What the request names does not exist (`unknown_run`, `unknown_task`, `no_schedule`, …):
    /// check the name, the session and the namespace.
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    /// The state of the data refuses the request (`session_busy`, `run_finished`, …); `details`
    /// says what state (`held_by`, `status`, …), so the caller can wait, or take another path.
    #[error("{message}")]
    Conflict {
        code: &'static str,
        message: String,
        details: Map<String, Value>,
    },
    /// What the request carries is larger than the backend keeps (`result_too_large`): `limit`
    /// is the most it takes, in bytes. Send less, or keep it elsewhere and send a reference.
    #[error("{message}")]
    TooLarge {
        field: String,
        code: &'static str,
        message: String,
        limit: u64,
    },
    /// A backend failed or refused; the port's error says whether a retry can help.
    #[error(transparent)]
    Backend(#[from] switchyard_core::Error),
}

impl Error {
    /// A broken rule of `field`, code `invalid_input`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid {
            field: field.into(),
            code: "invalid_input",
            message: message.into(),
            details: Map::new(),
        }
    }

    /// A broken rule of `field` with a code of its own.
    pub fn invalid_as(
        code: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            field: field.into(),
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Something the request names does not exist.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Error::NotFound {
            code,
            message: message.into(),
        }
    }

    /// The data's state refuses the request.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Error::Conflict {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Adds a detail (`held_by`, `status`, `max_events`) to an `Invalid` or `Conflict`; other
    /// variants are returned as they are.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        if let Error::Invalid { details, .. } | Error::Conflict { details, .. } = &mut self {
            details.insert(key.into(), value.into());
        }
        self
    }

    /// The code a client reads: the rule, the missing thing or the refusing state; for a
    /// backend failure, `backend`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid { code, .. }
            | Error::NotFound { code, .. }
            | Error::Conflict { code, .. }
            | Error::TooLarge { code, .. } => code,
            Error::Backend(_) => "backend",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_go_on_refusals_only() {
        let busy = Error::conflict("session_busy", "held").with("held_by", "r1");
        assert_eq!(busy.code(), "session_busy");
        let Error::Conflict { details, .. } = &busy else {
            panic!("a conflict: {busy:?}");
        };
        assert_eq!(details.get("held_by"), Some(&Value::from("r1")));
        let missing = Error::not_found("unknown_run", "no run").with("x", 1);
        assert!(matches!(missing, Error::NotFound { .. }));
        assert_eq!(missing.to_string(), "no run");
    }
}
