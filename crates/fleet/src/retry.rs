//! A task's retry policy (ADR 0380, section 8): how long a failed attempt waits before the next.
//!
//! After failed attempt `a` (1-based), with base `b` and cap `c`: fixed waits `min(c, b)`,
//! exponential `min(c, b·2^(a−1))`; then jitter none keeps that delay `d`, full draws
//! `uniform(0, d)` and equal `d/2 + uniform(0, d/2)`. A policy carried by a task (the envelope's
//! `"retry"`) may leave any field unset; the consumer's [`ConsumerConfig`](crate::ConsumerConfig)
//! fills the rest, so a task without one waits as before (`1 s · 2^(a−1)`, at most 60 s).

use std::time::Duration;

use serde_json::{Map, Value};
use switchyard_core::{Error, Result};

/// The longest timeout, retry base or retry cap a task may carry: one day.
pub const MAX_TASK_SECONDS: u64 = 86_400;

/// How the delay grows with the attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Backoff {
    /// The same delay after every attempt: the base.
    Fixed,
    /// The base doubled after every attempt, up to the cap (the default).
    #[default]
    Exponential,
}

impl Backoff {
    /// The name the envelope writes: `fixed` or `exponential`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backoff::Fixed => "fixed",
            Backoff::Exponential => "exponential",
        }
    }

    /// The backoff named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Backoff::Fixed, Backoff::Exponential]
            .into_iter()
            .find(|b| b.as_str() == s)
    }
}

/// How much of the delay is drawn at random, so failed tasks do not all come back at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// The delay as computed (the default).
    #[default]
    None,
    /// Anywhere from 0 to the delay.
    Full,
    /// Half the delay, plus anywhere up to the other half.
    Equal,
}

impl Jitter {
    /// The name the envelope writes: `none`, `full` or `equal`.
    pub fn as_str(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
        }
    }

    /// The jitter named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Jitter::None, Jitter::Full, Jitter::Equal]
            .into_iter()
            .find(|j| j.as_str() == s)
    }
}

/// A retry policy; every field may be unset, and then comes from the consumer's config (see
/// the module docs for the formula).
///
/// ```
/// use std::time::Duration;
/// use switchyard_fleet::{Backoff, RetryPolicy};
/// let p = RetryPolicy::default()
///     .backoff(Backoff::Exponential)
///     .base(Duration::from_secs(2))
///     .cap(Duration::from_secs(10));
/// assert_eq!(p.ceiling(1), Duration::from_secs(2));
/// assert_eq!(p.ceiling(3), Duration::from_secs(8));
/// assert_eq!(p.ceiling(4), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Fixed or exponential; unset: exponential.
    pub backoff: Option<Backoff>,
    /// The first delay (`retry.base_seconds`); unset: 1 s.
    pub base: Option<Duration>,
    /// The longest delay (`retry.cap_seconds`); unset: 60 s.
    pub cap: Option<Duration>,
    /// The random share; unset: none.
    pub jitter: Option<Jitter>,
}

impl RetryPolicy {
    /// Sets the backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Sets the base delay.
    pub fn base(mut self, base: Duration) -> Self {
        self.base = Some(base);
        self
    }

    /// Sets the cap.
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = Some(cap);
        self
    }

    /// Sets the jitter.
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// This policy's fields, and `fallback`'s where this one leaves them unset.
    pub fn or(self, fallback: RetryPolicy) -> RetryPolicy {
        RetryPolicy {
            backoff: self.backoff.or(fallback.backoff),
            base: self.base.or(fallback.base),
            cap: self.cap.or(fallback.cap),
            jitter: self.jitter.or(fallback.jitter),
        }
    }

    /// Checks the bounds a task's policy must keep: base and cap at most one day, and the base
    /// not above the cap when both are set. [`Error::InvalidInput`] names the field
    /// (`retry.base_seconds`, `retry.cap_seconds`).
    pub fn check(&self) -> Result<()> {
        let day = Duration::from_secs(MAX_TASK_SECONDS);
        for (field, value) in [
            ("retry.base_seconds", self.base),
            ("retry.cap_seconds", self.cap),
        ] {
            if value.is_some_and(|v| v > day) {
                return Err(Error::invalid(
                    field,
                    format_args!("must be at most {MAX_TASK_SECONDS} seconds"),
                ));
            }
        }
        if let (Some(base), Some(cap)) = (self.base, self.cap)
            && base > cap
        {
            return Err(Error::invalid(
                "retry.base_seconds",
                "must not be larger than retry.cap_seconds",
            ));
        }
        Ok(())
    }

    /// The delay after failed attempt `attempt` (1-based; 0 reads as 1) before jitter: the
    /// policy's `d`. Never panics, whatever the durations.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let base = self.base.unwrap_or(Duration::from_secs(1));
        let cap = self.cap.unwrap_or(Duration::from_secs(60));
        let d = match self.backoff.unwrap_or_default() {
            Backoff::Fixed => base,
            Backoff::Exponential => {
                let shift = attempt.saturating_sub(1);
                if base.is_zero() {
                    Duration::ZERO
                } else if shift >= 32 {
                    cap
                } else {
                    base.checked_mul(1u32 << shift).unwrap_or(cap)
                }
            }
        };
        d.min(cap)
    }

    /// The delay after failed attempt `attempt`, with its jitter drawn at random.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.delay_with(attempt, rand::random::<f64>())
    }

    /// The delay after failed attempt `attempt`, with `sample` as the uniform draw in `[0, 1]`
    /// the jitter uses (clamped; not a number reads as 0). The result is always within
    /// `[0, d]` (full) or `[d/2, d]` (equal).
    pub fn delay_with(&self, attempt: u32, sample: f64) -> Duration {
        let d = self.ceiling(attempt);
        let u = if sample.is_finite() {
            sample.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let part = |of: Duration| {
            Duration::try_from_secs_f64(of.as_secs_f64() * u)
                .unwrap_or(of)
                .min(of)
        };
        match self.jitter.unwrap_or_default() {
            Jitter::None => d,
            Jitter::Full => part(d),
            Jitter::Equal => {
                let half = d / 2;
                half.saturating_add(part(d - half)).min(d)
            }
        }
    }

    /// The envelope's `"retry"` object: only the fields that are set.
    pub fn to_value(self) -> Value {
        let mut m = Map::new();
        if let Some(b) = self.backoff {
            m.insert("backoff".into(), Value::from(b.as_str()));
        }
        if let Some(b) = self.base {
            m.insert("base_seconds".into(), seconds_value(b));
        }
        if let Some(c) = self.cap {
            m.insert("cap_seconds".into(), seconds_value(c));
        }
        if let Some(j) = self.jitter {
            m.insert("jitter".into(), Value::from(j.as_str()));
        }
        Value::Object(m)
    }

    /// Reads an envelope's `"retry"` object (unknown keys are ignored; a `null` field is unset),
    /// checking every bound; `field` prefixes the names in errors.
    pub(crate) fn from_value(v: &Value, field: &str) -> Result<Self> {
        let Some(m) = v.as_object() else {
            return Err(Error::invalid(field, "is not an object"));
        };
        let text = |key: &str| -> Result<Option<&str>> {
            match m.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(Error::invalid(format!("{field}.{key}"), "is not a string")),
            }
        };
        let secs = |key: &str| -> Result<Option<Duration>> {
            match m.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => seconds_of(v, false).map(Some).ok_or_else(|| {
                    Error::invalid(
                        format!("{field}.{key}"),
                        format_args!("must be a number from 0 to {MAX_TASK_SECONDS}"),
                    )
                }),
            }
        };
        let backoff = match text("backoff")? {
            None => None,
            Some(s) => Some(Backoff::parse(s).ok_or_else(|| {
                Error::invalid(
                    format!("{field}.backoff"),
                    "must be \"fixed\" or \"exponential\"",
                )
            })?),
        };
        let jitter = match text("jitter")? {
            None => None,
            Some(s) => Some(Jitter::parse(s).ok_or_else(|| {
                Error::invalid(
                    format!("{field}.jitter"),
                    "must be \"none\", \"full\" or \"equal\"",
                )
            })?),
        };
        let policy = RetryPolicy {
            backoff,
            base: secs("base_seconds")?,
            cap: secs("cap_seconds")?,
            jitter,
        };
        policy.check()?;
        Ok(policy)
    }
}

/// Checks a task's timeout: more than 0, at most one day ([`Error::InvalidInput`] naming
/// `timeout_seconds`).
pub fn check_timeout(timeout: Duration) -> Result<()> {
    if timeout.is_zero() || timeout > Duration::from_secs(MAX_TASK_SECONDS) {
        return Err(Error::invalid(
            "timeout_seconds",
            format_args!("must be more than 0 and at most {MAX_TASK_SECONDS}"),
        ));
    }
    Ok(())
}

/// A duration as the envelope writes it: whole seconds as an integer, else a float.
pub(crate) fn seconds_value(d: Duration) -> Value {
    if d.subsec_nanos() == 0 {
        Value::from(d.as_secs())
    } else {
        Value::from(d.as_secs_f64())
    }
}

/// A number of seconds from 0 (or above 0 when `positive`) to one day, as a duration.
pub(crate) fn seconds_of(v: &Value, positive: bool) -> Option<Duration> {
    let s = v.as_f64()?;
    let ok =
        s.is_finite() && s <= MAX_TASK_SECONDS as f64 && if positive { s > 0.0 } else { s >= 0.0 };
    if !ok {
        return None;
    }
    Duration::try_from_secs_f64(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn defaults_are_todays_delays() {
        let p = RetryPolicy::default();
        let today = [1, 2, 4, 8, 16, 32, 60, 60];
        for (a, want) in (1..).zip(today) {
            assert_eq!(p.delay(a), secs(want), "attempt {a}");
        }
        assert_eq!(p.ceiling(0), secs(1));
        assert_eq!(p.ceiling(u32::MAX), secs(60));
    }

    #[test]
    fn fixed_waits_the_base_under_the_cap() {
        let p = RetryPolicy::default().backoff(Backoff::Fixed).base(secs(5));
        assert_eq!(p.ceiling(1), secs(5));
        assert_eq!(p.ceiling(9), secs(5));
        assert_eq!(p.cap(secs(3)).ceiling(1), secs(3));
    }

    #[test]
    fn jitter_stays_in_its_bounds() {
        let d = secs(8);
        let full = RetryPolicy::default().base(d).cap(d).jitter(Jitter::Full);
        let equal = full.jitter(Jitter::Equal);
        for i in 0..=100 {
            let u = f64::from(i) / 100.0;
            let f = full.delay_with(1, u);
            assert!(f <= d, "{f:?}");
            let e = equal.delay_with(1, u);
            assert!(e >= d / 2 && e <= d, "{e:?}");
        }
        assert_eq!(full.delay_with(1, 0.0), Duration::ZERO);
        assert_eq!(equal.delay_with(1, 0.0), d / 2);
        for u in [f64::NAN, f64::INFINITY, -1.0, 7.0] {
            assert!(full.delay_with(1, u) <= d);
            assert!(equal.delay_with(1, u) >= d / 2);
        }
        for _ in 0..1000 {
            let f = full.delay(3);
            assert!(f <= d);
            let e = equal.delay(3);
            assert!(e >= d / 2 && e <= d);
        }
    }

    #[test]
    fn no_input_panics() {
        let huge = RetryPolicy::default()
            .base(Duration::MAX)
            .cap(Duration::MAX)
            .jitter(Jitter::Equal);
        for a in [0, 1, 2, 31, 32, 33, u32::MAX] {
            let _ = huge.delay(a);
            let _ = huge.jitter(Jitter::Full).delay(a);
            let _ = huge.backoff(Backoff::Fixed).delay(a);
        }
        let zero = RetryPolicy::default().base(Duration::ZERO);
        assert_eq!(zero.delay(u32::MAX), Duration::ZERO);
    }

    #[test]
    fn bounds_name_the_field() {
        let too_long = RetryPolicy::default().base(secs(MAX_TASK_SECONDS + 1));
        let e = too_long.check().expect_err("out of bounds").to_string();
        assert!(e.contains("retry.base_seconds"), "{e}");
        let e = RetryPolicy::default()
            .cap(secs(MAX_TASK_SECONDS + 1))
            .check()
            .expect_err("out of bounds")
            .to_string();
        assert!(e.contains("retry.cap_seconds"), "{e}");
        let e = RetryPolicy::default()
            .base(secs(10))
            .cap(secs(5))
            .check()
            .expect_err("base over cap")
            .to_string();
        assert!(e.contains("retry.base_seconds"), "{e}");
        assert!(check_timeout(Duration::ZERO).is_err());
        assert!(check_timeout(secs(MAX_TASK_SECONDS + 1)).is_err());
        assert!(check_timeout(secs(MAX_TASK_SECONDS)).is_ok());
    }

    #[test]
    fn json_round_trip() {
        let p = RetryPolicy::default()
            .backoff(Backoff::Fixed)
            .base(Duration::from_millis(1500))
            .cap(secs(30))
            .jitter(Jitter::Equal);
        let v = p.to_value();
        assert_eq!(
            v,
            serde_json::json!({"backoff": "fixed", "base_seconds": 1.5, "cap_seconds": 30, "jitter": "equal"})
        );
        assert_eq!(RetryPolicy::from_value(&v, "retry").expect("parses"), p);
        for bad in [
            serde_json::json!({"backoff": "linear"}),
            serde_json::json!({"jitter": 1}),
            serde_json::json!({"base_seconds": -1}),
            serde_json::json!({"cap_seconds": 86401}),
            serde_json::json!({"base_seconds": 9, "cap_seconds": 3}),
            serde_json::json!([1]),
        ] {
            assert!(
                matches!(
                    RetryPolicy::from_value(&bad, "retry"),
                    Err(Error::InvalidInput { .. })
                ),
                "{bad}"
            );
        }
    }
}
