//! Recurring schedules: the document the port's `Schedules` area stores (guarantee
//! `schedule.stored`), and the cron arithmetic the [`Scheduler`](crate::Scheduler) fires ticks with
//! (ADR 0300).
//!
//! ```json
//! {"cron": "0 */5 * * * *", "timezone": "Europe/Berlin", "queue": "emails", "payload": {"to":
//! "ops"},
//!  "priority": 0, "catch_up": "latest", "enabled": true, "created_at": 1795999426}
//! ```
//!
//! The cron expression has a seconds field (6 fields, or 7 with a year) and is read in
//! `timezone`, so "every day at 09:00" stays at 09:00 local time across daylight saving changes:
//! a tick that falls in a skipped hour fires at the first instant after the gap, and a tick in a
//! repeated hour fires once.

use std::str::FromStr;

use chrono::{DateTime, SubsecRound, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Deserializer, Serialize};
use switchyard_core::fleet::Priority;
use switchyard_core::{Error, Result};

/// The largest payload a schedule carries, as compact JSON: the task body each tick enqueues
/// holds it whole, and a schedule document is read on every scheduler poll.
pub const MAX_SCHEDULE_PAYLOAD_BYTES: usize = 64 * 1024;

/// What a scheduler does about ticks that passed while no scheduler ran (a restart, an outage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Fire the latest missed tick once; older missed ticks are dropped.
    #[default]
    Latest,
    /// Fire a tick only while it is fresh (at most one poll interval, or the scheduler's grace,
    /// old); missed ticks are dropped.
    Skip,
}

/// One recurring schedule: enqueue `payload` on `queue` at every tick of `cron` in `timezone`.
///
/// Build one with [`ScheduleSpec::new`] or parse the stored JSON with
/// [`ScheduleSpec::from_json`]; [`ScheduleSpec::validate`] says what to fix. Unknown keys are
/// refused, so a misspelt `"timezon"` is an error rather than a silent UTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ScheduleSpec {
    /// Cron expression with seconds: `second minute hour day-of-month month day-of-week [year]`,
    /// e.g. `"0 */5 * * * *"` (every five minutes). Names (`MON`, `JAN`), ranges, steps, `L`,
    /// `W`, `#` and nicknames (`@hourly`) are understood.
    pub cron: String,
    /// IANA time zone the expression is read in, e.g. `"Europe/Berlin"`. Default `"UTC"`.
    #[serde(default = "utc")]
    pub timezone: String,
    /// The queue each tick enqueues on.
    pub queue: String,
    /// The task payload (any JSON), wrapped in the seed's envelope at every tick.
    #[serde(default)]
    pub payload: serde_json::Value,
    /// The seed's integer priority: positive is high, negative low, zero normal. Default 0.
    #[serde(default)]
    pub priority: i64,
    /// What to do about ticks missed while no scheduler ran. Default `"latest"`.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// A disabled schedule fires nothing. Default `true`.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// When the schedule was created, in unix seconds: only ticks after it fire. A fractional
    /// value (Python's `time.time()`) is read as its whole second. An absent value reads as 0
    /// (every past tick counts as after it), so whoever stores a new schedule without one sets
    /// it to the current time first, as [`ScheduleSpec::new`] does.
    #[serde(default, deserialize_with = "whole_seconds")]
    pub created_at: i64,
}

fn utc() -> String {
    "UTC".to_string()
}

fn yes() -> bool {
    true
}

fn whole_seconds<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    let secs = f64::deserialize(d)?;
    if !secs.is_finite() || secs.abs() > 1e15 {
        return Err(serde::de::Error::custom(
            "created_at must be unix seconds (a finite number)",
        ));
    }
    Ok(secs.floor() as i64)
}

impl ScheduleSpec {
    /// A schedule firing `cron` (UTC, normal priority, catch-up `latest`, enabled) on `queue`
    /// with `payload`, created now.
    pub fn new(
        cron: impl Into<String>,
        queue: impl Into<String>,
        payload: serde_json::Value,
    ) -> Self {
        ScheduleSpec {
            cron: cron.into(),
            timezone: utc(),
            queue: queue.into(),
            payload,
            priority: 0,
            catch_up: CatchUp::Latest,
            enabled: true,
            created_at: Utc::now().timestamp(),
        }
    }

    /// Sets the IANA time zone the expression is read in.
    pub fn timezone(mut self, timezone: impl Into<String>) -> Self {
        self.timezone = timezone.into();
        self
    }

    /// Sets the seed's integer priority.
    pub fn priority(mut self, priority: i64) -> Self {
        self.priority = priority;
        self
    }

    /// Sets what happens to missed ticks.
    pub fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// Enables or disables the schedule.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets the creation instant (unix seconds): only later ticks fire.
    pub fn created_at(mut self, unix_seconds: i64) -> Self {
        self.created_at = unix_seconds;
        self
    }

    /// Parses a stored or submitted document and [validates](ScheduleSpec::validate) it.
    pub fn from_json(doc: &[u8]) -> Result<Self> {
        let spec: ScheduleSpec = serde_json::from_slice(doc).map_err(|e| {
            Error::invalid(
                "schedule",
                format_args!(
                    "is not a schedule document ({e}); send {{\"cron\": \"0 */5 * * * *\", \
                     \"queue\": \"emails\", \"payload\": ...}} with optional timezone, \
                     priority, catch_up (\"latest\" or \"skip\"), enabled and created_at"
                ),
            )
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// The document as stored by the port's `Schedules` area (compact JSON, fields in the
    /// order above).
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, numbers, booleans and a `Value` always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The tier each tick's task goes to.
    pub fn tier(&self) -> Priority {
        Priority::from_int(self.priority)
    }

    /// Checks that the cron expression parses (with seconds) and fires at least once more, the
    /// time zone is a known IANA name, the queue is named and the payload is at most
    /// [`MAX_SCHEDULE_PAYLOAD_BYTES`] as JSON. The error is [`Error::InvalidInput`] naming the
    /// field and what to change.
    pub fn validate(&self) -> Result<()> {
        let (cron, tz) = self.compile()?;
        if self.queue.is_empty() {
            return Err(Error::invalid(
                "queue",
                "must name the queue each tick enqueues on",
            ));
        }
        // The rule every gateway queue route applies: a tick enqueued under any other name would
        // fill a queue no route could show, pause or drain.
        switchyard_core::keys::check_id("queue", &self.queue)?;
        let size = serde_json::to_vec(&self.payload)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_SCHEDULE_PAYLOAD_BYTES {
            return Err(Error::invalid(
                "payload",
                format_args!(
                    "is {size} bytes as JSON, more than the 65536 a schedule carries; store \
                     the data elsewhere and put its key in the payload"
                ),
            ));
        }
        let now = Utc::now().with_timezone(&tz);
        match cron.find_next_occurrence(&now, false) {
            Ok(_) => Ok(()),
            Err(CronError::TimeSearchLimitExceeded) => Err(Error::invalid(
                "cron",
                format_args!(
                    "`{}` never fires after now (an impossible date, or a year in the past); \
                     check the day-of-month, month and year fields",
                    self.cron
                ),
            )),
            Err(e) => Err(Error::invalid(
                "cron",
                format_args!("`{}` cannot be evaluated: {e}", self.cron),
            )),
        }
    }

    /// The first tick strictly after `instant`; `None` when the expression never fires again.
    /// [`Error::InvalidInput`] when the expression or time zone does not parse.
    pub fn next_after(&self, instant: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let (cron, tz) = self.compile()?;
        // Ticks are whole seconds: from the second `instant` falls in, the next one is later.
        let start = instant.trunc_subsecs(0).with_timezone(&tz);
        occurrence(cron.find_next_occurrence(&start, false), &self.cron)
    }

    /// The latest tick at or before `instant`; `None` when the expression never fired before.
    /// [`Error::InvalidInput`] when the expression or time zone does not parse.
    pub fn latest_at_or_before(&self, instant: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let (cron, tz) = self.compile()?;
        let start = instant.trunc_subsecs(0).with_timezone(&tz);
        occurrence(cron.find_previous_occurrence(&start, true), &self.cron)
    }

    /// The parsed expression and time zone.
    fn compile(&self) -> Result<(Cron, Tz)> {
        let tz = Tz::from_str(&self.timezone).map_err(|_| {
            Error::invalid(
                "timezone",
                format_args!(
                    "`{}` is not an IANA time zone name; use e.g. \"UTC\", \"Europe/Berlin\" \
                     or \"America/New_York\"",
                    self.timezone
                ),
            )
        })?;
        let fields = self.cron.split_whitespace().count();
        let nickname = self.cron.trim_start().starts_with('@');
        if !nickname && !(6..=7).contains(&fields) {
            return Err(Error::invalid(
                "cron",
                format_args!(
                    "`{}` has {fields} fields; write 6 (second minute hour day-of-month month \
                     day-of-week) or 7 (with a year), e.g. \"0 */5 * * * *\" for every five \
                     minutes",
                    self.cron
                ),
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Optional)
            .build()
            .parse(&self.cron)
            .map_err(|e| {
                Error::invalid(
                    "cron",
                    format_args!(
                        "`{}` does not parse ({e}); write second minute hour day-of-month \
                         month day-of-week [year], e.g. \"0 */5 * * * *\"",
                        self.cron
                    ),
                )
            })?;
        Ok((cron, tz))
    }
}

/// A search result in UTC: "no such tick" is `None`, anything else an input error.
fn occurrence<Z: TimeZone>(
    found: std::result::Result<DateTime<Z>, CronError>,
    expr: &str,
) -> Result<Option<DateTime<Utc>>> {
    match found {
        Ok(t) => Ok(Some(t.with_timezone(&Utc))),
        Err(CronError::TimeSearchLimitExceeded) => Ok(None),
        Err(e) => Err(Error::invalid(
            "cron",
            format_args!("`{expr}` cannot be evaluated: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("rfc3339")
            .with_timezone(&Utc)
    }

    fn reason(e: Error) -> (String, String) {
        match e {
            Error::InvalidInput { field, reason } => (field, reason),
            other => panic!("not InvalidInput: {other:?}"),
        }
    }

    #[test]
    fn document_round_trips_with_defaults() {
        let doc = br#"{"cron": "0 */5 * * * *", "queue": "emails", "payload": {"to": "ops"}}"#;
        let spec = ScheduleSpec::from_json(doc).expect("parse");
        assert_eq!(spec.timezone, "UTC");
        assert_eq!(spec.priority, 0);
        assert_eq!(spec.catch_up, CatchUp::Latest);
        assert!(spec.enabled);
        assert_eq!(spec.created_at, 0);
        let full = json!({"cron": "0 */5 * * * *", "timezone": "Europe/Berlin", "queue": "emails",
            "payload": [1, "x"], "priority": -3, "catch_up": "skip", "enabled": false,
            "created_at": 1795999426.75});
        let spec = ScheduleSpec::from_json(full.to_string().as_bytes()).expect("parse");
        assert_eq!(spec.created_at, 1795999426);
        assert_eq!(spec.catch_up, CatchUp::Skip);
        assert_eq!(spec.tier(), Priority::Low);
        let back: serde_json::Value = serde_json::from_slice(&spec.to_json()).expect("json");
        assert_eq!(
            back,
            json!({"cron": "0 */5 * * * *", "timezone": "Europe/Berlin", "queue": "emails",
                "payload": [1, "x"], "priority": -3, "catch_up": "skip", "enabled": false,
                "created_at": 1795999426})
        );
    }

    #[test]
    fn bad_documents_say_what_to_fix() {
        let cases: [(&[u8], &str, &str); 7] = [
            (b"{", "schedule", "not a schedule document"),
            (
                br#"{"cron": "0 * * * * *", "queue": "q", "timezon": "UTC"}"#,
                "schedule",
                "timezon",
            ),
            (
                br#"{"cron": "*/5 * * * *", "queue": "q"}"#,
                "cron",
                "has 5 fields",
            ),
            (
                br#"{"cron": "0 61 * * * *", "queue": "q"}"#,
                "cron",
                "does not parse",
            ),
            (
                br#"{"cron": "0 0 0 1 1 * 2001", "queue": "q"}"#,
                "cron",
                "never fires",
            ),
            (
                br#"{"cron": "0 * * * * *", "queue": "q", "timezone": "Mars/Olympus"}"#,
                "timezone",
                "IANA",
            ),
            (
                br#"{"cron": "0 * * * * *", "queue": ""}"#,
                "queue",
                "must name",
            ),
        ];
        for (doc, field, text) in cases {
            let (f, r) = reason(ScheduleSpec::from_json(doc).expect_err("invalid"));
            assert_eq!(f, field, "{}", String::from_utf8_lossy(doc));
            assert!(r.contains(text), "{r}");
        }
        let big = ScheduleSpec::new("0 * * * * *", "q", json!("x".repeat(70_000)));
        let (f, r) = reason(big.validate().expect_err("too big"));
        assert_eq!(f, "payload");
        assert!(r.contains("65536"), "{r}");
    }

    #[test]
    fn ticks_in_utc() {
        let spec = ScheduleSpec::new("0 */5 * * * *", "q", json!(null));
        let t = at("2026-12-01T10:07:30.250Z");
        assert_eq!(
            spec.next_after(t).expect("next"),
            Some(at("2026-12-01T10:10:00Z"))
        );
        assert_eq!(
            spec.latest_at_or_before(t).expect("latest"),
            Some(at("2026-12-01T10:05:00Z"))
        );
        // On a tick: it is the latest at-or-before, and the next is strictly later.
        let tick = at("2026-12-01T10:05:00Z");
        assert_eq!(spec.latest_at_or_before(tick).expect("latest"), Some(tick));
        assert_eq!(
            spec.next_after(tick).expect("next"),
            Some(at("2026-12-01T10:10:00Z"))
        );
        let every = ScheduleSpec::new("* * * * * *", "q", json!(null));
        let t = at("2026-12-01T10:07:30.999Z");
        assert_eq!(
            every.next_after(t).expect("next"),
            Some(at("2026-12-01T10:07:31Z"))
        );
        assert_eq!(
            every.latest_at_or_before(t).expect("latest"),
            Some(at("2026-12-01T10:07:30Z"))
        );
    }

    #[test]
    fn ticks_in_a_time_zone_across_daylight_saving() {
        // 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
        let spec = ScheduleSpec::new("0 0 9 * * *", "q", json!(null)).timezone("Europe/Berlin");
        assert_eq!(
            spec.next_after(at("2026-12-01T12:00:00Z")).expect("next"),
            Some(at("2026-12-02T08:00:00Z"))
        );
        assert_eq!(
            spec.next_after(at("2026-07-01T12:00:00Z")).expect("next"),
            Some(at("2026-07-02T07:00:00Z"))
        );
        assert_eq!(
            spec.latest_at_or_before(at("2026-07-01T06:59:59Z"))
                .expect("latest"),
            Some(at("2026-06-30T07:00:00Z"))
        );
        // 02:30 does not exist on 2026-03-29 in Berlin: that day's tick fires right after the gap.
        let gap = ScheduleSpec::new("0 30 2 * * *", "q", json!(null)).timezone("Europe/Berlin");
        let fired = gap
            .next_after(at("2026-03-28T12:00:00Z"))
            .expect("next")
            .expect("some");
        assert!(
            fired >= at("2026-03-29T01:00:00Z") && fired <= at("2026-03-29T02:00:00Z"),
            "{fired}"
        );
    }

    #[test]
    fn seven_fields_and_nicknames() {
        let spec = ScheduleSpec::new("0 0 12 1 1 * 2030", "q", json!(null));
        assert_eq!(
            spec.next_after(at("2026-12-01T00:00:00Z")).expect("next"),
            Some(at("2030-01-01T12:00:00Z"))
        );
        assert_eq!(
            spec.next_after(at("2030-01-02T00:00:00Z")).expect("next"),
            None
        );
        let hourly = ScheduleSpec::new("@hourly", "q", json!(null));
        hourly.validate().expect("valid");
        assert_eq!(
            hourly.next_after(at("2026-12-01T10:07:00Z")).expect("next"),
            Some(at("2026-12-01T11:00:00Z"))
        );
    }
}
