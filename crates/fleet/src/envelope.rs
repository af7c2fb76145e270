//! The seed's task envelope (fleet-framework's task JSON), byte-exact.
//!
//! ```json
//! {"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 0, "submitted_at": 1795999426.797343, "ttl_seconds": 60}
//! ```
//!
//! The parsed object is kept whole, so a retry re-serializes it like the seed does: `attempt`
//! updated in place, `max_attempts` appended at the end when missing, unknown keys (1.2.0's
//! `_sync_key`) kept where they were.
//!
//! The consumer adds one key of its own, `last_error`, appended at the end like `max_attempts`:
//! `{"message": "...", "attempt": 2, "at": 1795999430.5}`, the handler's last failure. The seed's
//! consumer reads only the keys it knows, so a Python worker still runs such a task (ADR 0250).
//!
//! Two more optional keys are appended the same way by producers of ours (ADR 0380, section 8):
//! `"timeout_seconds"` (a number, `0 < t ≤ 86400`) and `"retry"` (`{"backoff": "fixed" |
//! "exponential", "base_seconds", "cap_seconds", "jitter": "none" | "full" | "equal"}`, each field
//! optional, `0 ≤ base ≤ cap ≤ 86400`). The seed ignores them; our consumer enforces them.

use std::time::Duration;

use serde_json::{Map, Value};
use switchyard_core::{Error, Result};

use crate::retry::{RetryPolicy, check_timeout, seconds_of, seconds_value};

use switchyard_core::pycompat::Dumps;

/// Why a task's handler last failed: kept in the envelope under `last_error` (ADR 0250).
#[derive(Debug, Clone, PartialEq)]
pub struct LastError {
    /// The handler's error, as `Display` wrote it (a panic says so).
    pub message: String,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// When it failed, in unix seconds (the consumer's clock).
    pub at: f64,
}

impl LastError {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("message".into(), Value::String(self.message.clone()));
        m.insert("attempt".into(), Value::from(self.attempt));
        m.insert("at".into(), Value::from(self.at));
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Option<Self> {
        let m = v.as_object()?;
        Some(LastError {
            message: m.get("message")?.as_str()?.to_string(),
            attempt: m
                .get("attempt")
                .and_then(Value::as_u64)
                .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            at: m.get("at").and_then(Value::as_f64).unwrap_or(0.0),
        })
    }
}

/// A task envelope: the JSON object a producer pushes.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    fields: Map<String, Value>,
}

impl Envelope {
    /// A fresh envelope as the seed's producers build it: `id`, `payload`, `attempt: 0`,
    /// `submitted_at`, then `ttl_seconds` and `max_attempts` only when given.
    pub fn new(
        id: impl Into<String>,
        payload: Value,
        submitted_at: f64,
        ttl_seconds: Option<u64>,
        max_attempts: Option<u32>,
    ) -> Self {
        let mut fields = Map::new();
        fields.insert("id".into(), Value::String(id.into()));
        fields.insert("payload".into(), payload);
        fields.insert("attempt".into(), Value::from(0));
        fields.insert("submitted_at".into(), Value::from(submitted_at));
        if let Some(ttl) = ttl_seconds {
            fields.insert("ttl_seconds".into(), Value::from(ttl));
        }
        if let Some(max) = max_attempts {
            fields.insert("max_attempts".into(), Value::from(max));
        }
        Envelope { fields }
    }

    /// Parses a body: a JSON object with a non-empty string (or integer) `id` and a `payload`;
    /// `attempt`, `submitted_at`, `ttl_seconds` and `max_attempts` must be numbers when present,
    /// `timeout_seconds` and `retry` within their bounds.
    /// Anything else is [`Error::InvalidInput`] (the consumer dead-letters such bodies once).
    pub fn parse(body: &[u8]) -> Result<Self> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| Error::invalid("envelope", e))?;
        let Value::Object(fields) = value else {
            return Err(Error::invalid("envelope", "is not a JSON object"));
        };
        match fields.get("id") {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {}
            _ => return Err(Error::invalid("envelope.id", "is missing or empty")),
        }
        if !fields.contains_key("payload") {
            return Err(Error::invalid("envelope.payload", "is missing"));
        }
        for key in ["attempt", "max_attempts"] {
            if let Some(v) = fields.get(key).filter(|v| !v.is_null())
                && v.as_u64().is_none()
            {
                return Err(Error::invalid(
                    format!("envelope.{key}"),
                    "is not a non-negative integer",
                ));
            }
        }
        for key in ["submitted_at", "ttl_seconds"] {
            if let Some(v) = fields.get(key).filter(|v| !v.is_null())
                && v.as_f64().is_none()
            {
                return Err(Error::invalid(format!("envelope.{key}"), "is not a number"));
            }
        }
        if let Some(v) = fields.get("timeout_seconds").filter(|v| !v.is_null())
            && seconds_of(v, true).is_none()
        {
            return Err(Error::invalid(
                "envelope.timeout_seconds",
                "must be a number more than 0 and at most 86400",
            ));
        }
        if let Some(v) = fields.get("retry").filter(|v| !v.is_null()) {
            RetryPolicy::from_value(v, "envelope.retry")?;
        }
        Ok(Envelope { fields })
    }

    /// The task id.
    pub fn id(&self) -> String {
        match self.fields.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }

    /// The payload as JSON.
    pub fn payload(&self) -> &Value {
        self.fields.get("payload").unwrap_or(&Value::Null)
    }

    /// `attempt` as written by the last producer or retry (0 when missing).
    pub fn attempt(&self) -> u32 {
        self.get_u32("attempt").unwrap_or(0)
    }

    /// `max_attempts`, if present.
    pub fn max_attempts(&self) -> Option<u32> {
        self.get_u32("max_attempts")
    }

    /// `submitted_at` (producer's unix seconds), if present.
    pub fn submitted_at(&self) -> Option<f64> {
        self.fields.get("submitted_at").and_then(Value::as_f64)
    }

    /// `ttl_seconds`, if present.
    pub fn ttl_seconds(&self) -> Option<f64> {
        self.fields.get("ttl_seconds").and_then(Value::as_f64)
    }

    /// `timeout_seconds`: how long one attempt may run, if the producer set it.
    pub fn timeout(&self) -> Option<Duration> {
        self.fields
            .get("timeout_seconds")
            .and_then(|v| seconds_of(v, true))
    }

    /// Sets `timeout_seconds` in place, or appends it at the end when missing (`None` removes
    /// it). More than 0 and at most one day, else [`Error::InvalidInput`] naming
    /// `timeout_seconds`.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<()> {
        match timeout {
            Some(t) => {
                check_timeout(t)?;
                self.fields
                    .insert("timeout_seconds".into(), seconds_value(t));
            }
            None => {
                self.fields.shift_remove("timeout_seconds");
            }
        }
        Ok(())
    }

    /// `retry`: the task's own retry policy, if the producer set one (unset fields come from
    /// the consumer's config).
    pub fn retry(&self) -> Option<RetryPolicy> {
        self.fields
            .get("retry")
            .filter(|v| !v.is_null())
            .and_then(|v| RetryPolicy::from_value(v, "retry").ok())
    }

    /// Sets `retry` in place, or appends it at the end when missing (`None` removes it); its
    /// bounds are checked ([`RetryPolicy::check`]).
    pub fn set_retry(&mut self, retry: Option<&RetryPolicy>) -> Result<()> {
        match retry {
            Some(p) => {
                p.check()?;
                self.fields.insert("retry".into(), p.to_value());
            }
            None => {
                self.fields.shift_remove("retry");
            }
        }
        Ok(())
    }

    /// Whether the task outlived its `ttl_seconds` at `now` (`now − submitted_at > ttl`).
    pub fn expired_at(&self, now: f64) -> bool {
        match (self.ttl_seconds(), self.submitted_at()) {
            (Some(ttl), Some(at)) => now - at > ttl,
            _ => false,
        }
    }

    /// Sets `attempt` in place (the key keeps its position).
    pub fn set_attempt(&mut self, attempt: u32) {
        self.fields.insert("attempt".into(), Value::from(attempt));
    }

    /// Sets `max_attempts` in place, or appends it at the end when missing.
    pub fn set_max_attempts(&mut self, max: u32) {
        self.fields.insert("max_attempts".into(), Value::from(max));
    }

    /// The handler's last failure, if a consumer recorded one (a `last_error` that is not an
    /// object with a string `message` reads as `None`).
    pub fn last_error(&self) -> Option<LastError> {
        self.fields
            .get("last_error")
            .and_then(LastError::from_value)
    }

    /// Records the handler's last failure in place, or appends it at the end when missing.
    pub fn set_last_error(&mut self, error: &LastError) {
        self.fields.insert("last_error".into(), error.to_value());
    }

    /// Every field, in order.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The bytes `json.dumps(envelope)` writes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A map of JSON values always serializes.
        Dumps::DEFAULT.to_vec(&self.fields).unwrap_or_default()
    }

    fn get_u32(&self, key: &str) -> Option<u32> {
        self.fields
            .get(key)
            .and_then(Value::as_u64)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SEED: &str = r#"{"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 0, "submitted_at": 1795999426.797343, "ttl_seconds": 60}"#;

    #[test]
    fn new_envelope_is_the_seeds_bytes() {
        let e = Envelope::new(
            "t-1",
            json!({"query": "café", "page": 1}),
            1795999426.797343,
            Some(60),
            None,
        );
        assert_eq!(String::from_utf8(e.to_bytes()).expect("ascii"), SEED);
    }

    #[test]
    fn retry_updates_attempt_in_place_and_appends_max_attempts() {
        let mut e = Envelope::parse(SEED.as_bytes()).expect("parse");
        assert_eq!(e.id(), "t-1");
        assert_eq!(e.attempt(), 0);
        assert_eq!(e.ttl_seconds(), Some(60.0));
        e.set_attempt(1);
        e.set_max_attempts(3);
        assert_eq!(
            String::from_utf8(e.to_bytes()).expect("ascii"),
            r#"{"id": "t-1", "payload": {"query": "caf\u00e9", "page": 1}, "attempt": 1, "submitted_at": 1795999426.797343, "ttl_seconds": 60, "max_attempts": 3}"#
        );
        // A second retry keeps max_attempts where it is.
        e.set_attempt(2);
        e.set_max_attempts(3);
        assert!(
            e.to_bytes()
                .ends_with(br#""ttl_seconds": 60, "max_attempts": 3}"#)
        );
    }

    #[test]
    fn unknown_keys_keep_their_place() {
        let body =
            br#"{"id": "x", "payload": null, "attempt": 0, "submitted_at": 1.5, "_sync_key": "k"}"#;
        let mut e = Envelope::parse(body).expect("parse");
        e.set_attempt(1);
        e.set_max_attempts(2);
        assert_eq!(
            e.to_bytes(),
            br#"{"id": "x", "payload": null, "attempt": 1, "submitted_at": 1.5, "_sync_key": "k", "max_attempts": 2}"#
        );
    }

    #[test]
    fn last_error_is_appended_and_read_back() {
        let mut e = Envelope::parse(SEED.as_bytes()).expect("parse");
        assert_eq!(e.last_error(), None);
        e.set_attempt(1);
        e.set_max_attempts(3);
        let err = LastError {
            message: "boom \"x\"".into(),
            attempt: 1,
            at: 1795999430.5,
        };
        e.set_last_error(&err);
        let bytes = e.to_bytes();
        assert!(
            bytes.ends_with(
                br#""max_attempts": 3, "last_error": {"message": "boom \"x\"", "attempt": 1, "at": 1795999430.5}}"#
            ),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let again = Envelope::parse(&bytes).expect("parse");
        assert_eq!(again.last_error(), Some(err));
        assert_eq!(again.attempt(), 1);
        // A foreign `last_error` of another shape is not ours: it reads as none.
        let foreign =
            Envelope::parse(br#"{"id": "a", "payload": 1, "last_error": "x"}"#).expect("parse");
        assert_eq!(foreign.last_error(), None);
    }

    #[test]
    fn bad_envelopes_are_typed_errors() {
        for body in [
            &b"not json"[..],
            b"[1]",
            br#"{"payload": {}}"#,
            br#"{"id": "", "payload": {}}"#,
            br#"{"id": "a"}"#,
            br#"{"id": "a", "payload": 1, "attempt": "x"}"#,
            br#"{"id": "a", "payload": 1, "ttl_seconds": "60"}"#,
        ] {
            assert!(
                matches!(Envelope::parse(body), Err(Error::InvalidInput { .. })),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn expiry_is_now_minus_submitted_over_ttl() {
        let e = Envelope::new("a", json!(1), 100.0, Some(60), None);
        assert!(!e.expired_at(160.0));
        assert!(e.expired_at(160.5));
        let forever = Envelope::new("a", json!(1), 100.0, None, None);
        assert!(!forever.expired_at(1e12));
    }

    #[test]
    fn timeout_and_retry_are_appended_and_checked() {
        let mut e = Envelope::parse(SEED.as_bytes()).expect("parse");
        assert_eq!((e.timeout(), e.retry()), (None, None));
        e.set_max_attempts(3);
        e.set_timeout(Some(std::time::Duration::from_millis(2500)))
            .expect("in bounds");
        let policy = RetryPolicy::default()
            .backoff(crate::Backoff::Fixed)
            .base(std::time::Duration::from_secs(2));
        e.set_retry(Some(&policy)).expect("in bounds");
        let bytes = e.to_bytes();
        assert!(
            bytes.ends_with(
                br#""max_attempts": 3, "timeout_seconds": 2.5, "retry": {"backoff": "fixed", "base_seconds": 2}}"#
            ),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let again = Envelope::parse(&bytes).expect("parse");
        assert_eq!(
            again.timeout(),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(again.retry(), Some(policy));
        assert!(e.set_timeout(Some(std::time::Duration::ZERO)).is_err());
        for (body, field) in [
            (
                &br#"{"id": "a", "payload": 1, "timeout_seconds": 0}"#[..],
                "envelope.timeout_seconds",
            ),
            (
                br#"{"id": "a", "payload": 1, "timeout_seconds": 86401}"#,
                "envelope.timeout_seconds",
            ),
            (
                br#"{"id": "a", "payload": 1, "timeout_seconds": "5"}"#,
                "envelope.timeout_seconds",
            ),
            (
                br#"{"id": "a", "payload": 1, "retry": {"jitter": "some"}}"#,
                "envelope.retry.jitter",
            ),
            (
                br#"{"id": "a", "payload": 1, "retry": {"base_seconds": 5, "cap_seconds": 1}}"#,
                "retry.base_seconds",
            ),
        ] {
            match Envelope::parse(body) {
                Err(Error::InvalidInput { field: f, .. }) => assert!(f.ends_with(field), "{f}"),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }
}
