//! One error type whose variants say what the caller can do next: fix its setup, try again
//! later, or change its request.

use std::time::Duration;

use serde_json::Value;

/// What went wrong with a call, by what the caller can do about it.
///
/// No message includes the bearer token: it travels in a header only, and reqwest's errors name
/// the URL, never the headers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client could not be built: a base URL that is not `http://` or `https://`, a CA
    /// certificate that is not PEM, a token that cannot be a header value. Fix the setup; no
    /// retry helps.
    #[error("the client's setup is invalid: {reason}")]
    Setup {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// No answer: the connection failed, timed out or broke off. The request may or may not have
    /// been carried out (a write that timed out may have landed); retrying may help.
    #[error("cannot reach the gateway at {base}: {reason}; check that it runs there and try again")]
    Unreachable {
        /// The gateway's base URL.
        base: String,
        /// The transport's reason, with its causes.
        reason: String,
    },
    /// The gateway answered with an error status: it did not do what was asked.
    #[error("{}", refused_text(*status, error.as_deref(), message.as_deref(), *retry_after, request_id.as_deref()))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The gateway's error code (`unknown_run`, `unauthorized`, `receipt_not_current`, …).
        error: Option<String>,
        /// The gateway's message, which says what to change.
        message: Option<String>,
        /// The id of the request in the gateway's log (`x-request-id`).
        request_id: Option<String>,
        /// How long to wait before trying again (`Retry-After`, when given in seconds).
        retry_after: Option<Duration>,
        /// The whole error body (`field`, `held_by`, `status`, … besides the above), or null.
        body: Value,
    },
    /// The gateway answered 2xx with a body this client cannot read: a gateway of another version
    /// or something else than a gateway at that URL.
    #[error(
        "the gateway's answer could not be read: {reason}; check that the URL names a switchyard gateway of a matching version"
    )]
    Decode {
        /// What did not parse.
        reason: String,
    },
}

impl Error {
    /// The HTTP status of a refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// 404: no such run, queue, receipt, schedule, or a run's stream already released.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// 401 or 403: no token, an unknown or revoked one, or one whose rights or scope do not
    /// cover the request.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }

    /// Trying the same request again later may succeed: no connection, a 5xx (a backend down, the
    /// gateway shutting down), 429 (a quota or too many streams) or 408. A refusal of what was
    /// asked (4xx) stays a refusal.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::Refused { status, .. } => *status >= 500 || matches!(status, 408 | 429),
            Error::Setup { .. } | Error::Decode { .. } => false,
        }
    }

    /// The gateway's error code of a refusal (`unknown_run`, …).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Refused { error, .. } => error.as_deref(),
            _ => None,
        }
    }

    /// The id of the refused request in the gateway's log.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::Refused { request_id, .. } => request_id.as_deref(),
            _ => None,
        }
    }
}

/// `the gateway answered 404 Not Found unknown_run: … (retry after 2 s) [request id …]`.
fn refused_text(
    status: u16,
    error: Option<&str>,
    message: Option<&str>,
    retry_after: Option<Duration>,
    request_id: Option<&str>,
) -> String {
    let mut text = format!("the gateway answered {}", status_text(status));
    if let Some(e) = error.filter(|e| !e.is_empty()) {
        text.push_str(&format!(" {e}"));
    }
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        text.push_str(&format!(": {m}"));
    }
    if let Some(after) = retry_after {
        text.push_str(&format!(" (retry after {} s)", after.as_secs()));
    }
    if let Some(id) = request_id.filter(|id| !id.is_empty()) {
        text.push_str(&format!(" [request id {id}]"));
    }
    text
}

/// `404 Not Found`: the code with its reason phrase, as HTTP tools print it.
pub fn status_text(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status) {
        Ok(code) => code.to_string(),
        Err(_) => status.to_string(),
    }
}

/// An error and its sources on one line (reqwest's own text leaves the cause out).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16) -> Error {
        Error::Refused {
            status,
            error: Some("unknown_run".into()),
            message: Some("no run \"r\"".into()),
            request_id: Some("abc".into()),
            retry_after: None,
            body: Value::Null,
        }
    }

    #[test]
    fn refusals_say_what_the_caller_can_do() {
        assert!(refused(404).is_not_found());
        assert!(!refused(404).is_retryable());
        assert!(refused(401).is_unauthorized() && refused(403).is_unauthorized());
        assert!(refused(503).is_retryable() && refused(429).is_retryable());
        assert_eq!(
            refused(404).to_string(),
            "the gateway answered 404 Not Found unknown_run: no run \"r\" [request id abc]"
        );
        let down = Error::Unreachable {
            base: "http://x".into(),
            reason: "refused".into(),
        };
        assert!(down.is_retryable() && !down.is_not_found());
    }
}
