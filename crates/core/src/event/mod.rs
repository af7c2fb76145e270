//! The agentdeck-sdk 3.1.0 event model, byte-compatible with the seed's `model_dump_json`.
//!
//! * [`Event`] is the envelope; [`Payload`] one of the 21 known kinds or an unknown kind.
//! * [`Event::to_json`] writes the seed's exact bytes: declaration order, nulls kept, raw UTF-8,
//!   `ts` in ISO-8601 with `Z` for UTC and a 6-digit fraction left out when zero.
//! * [`Event::from_json`] reads like the seed's lax reader: unknown fields dropped, a few
//!   coercions, unknown kinds wrapped as `{kind, raw_payload}`; every refusal is an
//!   [`Error::InvalidInput`] naming the field.

mod build;
mod content;
mod lax;
mod payload;
#[cfg(feature = "openapi")]
mod schema;

use chrono::{DateTime, FixedOffset, SecondsFormat, Timelike, Utc};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use content::{Block, MAX_INLINE_BYTES};
pub use lax::JsonObject;
pub use payload::{
    ArtifactCreated, ControlObserved, ControlRequested, ControlVerb, Custom, ErrorCode, Input,
    InputAppended, InterruptReason, InvocableKind, KNOWN_KINDS, MAX_RESULT_PREVIEW_CHARS,
    MessageText, NodeUpdated, Payload, ProgressReported, RunCancelled, RunCompleted, RunFailed,
    RunInterrupted, RunPaused, RunResumed, RunStarted, SafePoint, StatusReported,
    ToolCallCompleted, ToolCallStarted, UnknownKinds, UnknownPayload, Usage, UsageReported,
    is_known_kind, is_valid_kind,
};

use crate::Error;
use lax::Fields;

/// The schema version every event carries; readers accept major 3 and any minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchemaVersion {
    /// Must be 3.
    pub major: u32,
    /// Any.
    pub minor: u32,
}

impl SchemaVersion {
    /// The version this library writes: 3.1.
    pub const CURRENT: SchemaVersion = SchemaVersion { major: 3, minor: 1 };
}

/// One event of a run's log. Stores assign `seq` and `ts`; callers supply the payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Schema version.
    pub v: SchemaVersion,
    /// Per run, dense, from 0.
    pub seq: u64,
    /// The run.
    pub run_id: String,
    /// The session, if the run has one.
    pub session_id: Option<String>,
    /// The namespace; `None` means none.
    pub namespace: Option<String>,
    /// The invocable (agent, workflow or skill) the caller addressed, which may differ from the
    /// one that ran (a router agent handing over to a specialist keeps the router as origin). It
    /// is the caller's label, written as given and never interpreted by a store; the gateway
    /// writes the `invocable` of the run's `run.started` unless the request names another.
    pub origin: String,
    /// When the store wrote it (microsecond precision at most).
    pub ts: DateTime<FixedOffset>,
    /// What happened.
    pub payload: Payload,
}

impl Event {
    /// The event's kind, which is its payload's kind.
    pub fn kind(&self) -> &str {
        self.payload.kind()
    }

    /// Stamps `payloads` as events of `ctx`'s run from `first_seq` on, all at `ts`: the envelope
    /// every store writes (run, session and namespace from the context, origin from the call).
    pub fn stamp_batch(
        ctx: &crate::RunContext,
        origin: &str,
        first_seq: u64,
        ts: DateTime<FixedOffset>,
        payloads: impl IntoIterator<Item = Payload>,
    ) -> Vec<Event> {
        (first_seq..)
            .zip(payloads)
            .map(|(seq, payload)| Event {
                v: SchemaVersion::CURRENT,
                seq,
                run_id: ctx.run_id().to_string(),
                session_id: ctx.session_id().map(str::to_string),
                namespace: ctx.namespace().map(str::to_string),
                origin: origin.to_string(),
                ts,
                payload,
            })
            .collect()
    }

    /// The seed's `model_dump_json()`: compact JSON, byte-identical.
    pub fn to_json(&self) -> String {
        // Serializing plain data into a String cannot fail: no map has non-string keys and
        // every float was checked finite on the way in (a non-finite one is written as null).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads one stored event (`json.loads` + lax `Event.model_validate`).
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid("event", format!("is not valid JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// Reads an event from an already parsed JSON value.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let f = Fields::of(value, "")?;
        let v = match f.required("v")? {
            Value::Number(_) => {
                return Err(Error::invalid(
                    "v",
                    "is a bare integer: this is a pre-3.0 event, which this reader does not accept",
                ));
            }
            other => {
                let vf = Fields::of(other, "v")?;
                let major = vf.uint("major")?;
                let minor = vf.uint("minor")?;
                if major != 3 {
                    return Err(Error::invalid(
                        "v.major",
                        format!("is {major}; this reader accepts major 3 only"),
                    ));
                }
                SchemaVersion {
                    major: 3,
                    minor: u32::try_from(minor)
                        .map_err(|_| Error::invalid("v.minor", "is out of range"))?,
                }
            }
        };
        let kind = f.string("kind")?;
        if !is_valid_kind(&kind) {
            return Err(Error::invalid(
                "kind",
                format!("{kind:?} is not a valid kind"),
            ));
        }
        let ts_text = f.string("ts")?;
        let event = Event {
            v,
            seq: f.uint("seq")?,
            run_id: f.string("run_id")?,
            session_id: f.opt_string("session_id")?,
            namespace: f.opt_string("namespace")?,
            origin: f.string("origin")?,
            ts: parse_ts(&ts_text)?,
            payload: Payload::from_json(&kind, f.required("payload")?)?,
        };
        Ok(event)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Event", 9)?;
        s.serialize_field("v", &self.v)?;
        s.serialize_field("kind", self.kind())?;
        s.serialize_field("seq", &self.seq)?;
        s.serialize_field("run_id", &self.run_id)?;
        s.serialize_field("session_id", &self.session_id)?;
        s.serialize_field("namespace", &self.namespace)?;
        s.serialize_field("origin", &self.origin)?;
        s.serialize_field("ts", &format_ts(&self.ts))?;
        s.serialize_field("payload", &self.payload)?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Event::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Formats `ts` like Python's `isoformat` as pydantic writes it: `Z` for UTC, `+02:00` otherwise,
/// and a 6-digit fraction only when the microseconds are not zero.
pub fn format_ts(ts: &DateTime<FixedOffset>) -> String {
    use chrono::Datelike;
    use std::fmt::Write;
    let micros = ts.nanosecond() / 1_000 % 1_000_000;
    let offset = ts.offset().local_minus_utc();
    // Every event is serialized with its ts on every write and read, so the common case (UTC,
    // a four-digit year) is written field by field: chrono's `format` parses its pattern again
    // on each call. Other offsets, years and leap seconds take chrono's path, which spells them.
    if offset == 0 && (0..=9999).contains(&ts.year()) && ts.nanosecond() < 1_000_000_000 {
        let mut out = String::with_capacity(27);
        let _ = write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            ts.year(),
            ts.month(),
            ts.day(),
            ts.hour(),
            ts.minute(),
            ts.second()
        );
        if micros != 0 {
            let _ = write!(out, ".{micros:06}");
        }
        out.push('Z');
        return out;
    }
    let base = ts.format("%Y-%m-%dT%H:%M:%S");
    let zone = if offset == 0 {
        "Z".to_string()
    } else {
        ts.format("%:z").to_string()
    };
    if micros == 0 {
        format!("{base}{zone}")
    } else {
        format!("{base}.{micros:06}{zone}")
    }
}

/// Parses an aware ISO-8601 timestamp; a naive one (no offset) is refused. Precision is cut to
/// microseconds, as Python's datetime holds.
pub fn parse_ts(text: &str) -> Result<DateTime<FixedOffset>, Error> {
    let parsed = DateTime::parse_from_rfc3339(text).map_err(|e| {
        let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").is_ok();
        if naive {
            Error::invalid(
                "ts",
                format!("{text:?} has no timezone; naive datetimes are refused"),
            )
        } else {
            Error::invalid("ts", format!("{text:?} is not an ISO-8601 datetime: {e}"))
        }
    })?;
    Ok(truncate_to_micros(parsed))
}

/// Drops sub-microsecond precision.
pub fn truncate_to_micros<Tz: chrono::TimeZone>(ts: DateTime<Tz>) -> DateTime<Tz> {
    let nanos = ts.nanosecond();
    let keep = nanos - nanos % 1_000;
    ts.with_nanosecond(keep).unwrap_or(ts)
}

/// A store's "now" as an event timestamp: UTC, truncated to microseconds.
pub fn stamp(now: DateTime<Utc>) -> DateTime<FixedOffset> {
    truncate_to_micros(now).fixed_offset()
}

/// RFC 3339 with microseconds, for logs and diagnostics.
pub fn ts_for_display(ts: &DateTime<FixedOffset>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[cfg(test)]
mod format_ts_tests {
    use super::format_ts;
    use chrono::{DateTime, FixedOffset, TimeZone};

    /// What the field-by-field path must equal: chrono's own spelling of the same pattern.
    fn by_chrono(ts: &DateTime<FixedOffset>) -> String {
        use chrono::Timelike;
        let micros = ts.nanosecond() / 1_000 % 1_000_000;
        let zone = if ts.offset().local_minus_utc() == 0 {
            "Z".to_string()
        } else {
            ts.format("%:z").to_string()
        };
        let base = ts.format("%Y-%m-%dT%H:%M:%S");
        if micros == 0 {
            format!("{base}{zone}")
        } else {
            format!("{base}.{micros:06}{zone}")
        }
    }

    #[test]
    fn the_fast_path_spells_what_chrono_spells() {
        use chrono::Timelike;
        let utc = FixedOffset::east_opt(0).expect("utc");
        let plus2 = FixedOffset::east_opt(7200).expect("+02:00");
        let mut secs: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
        let mut n = 0u32;
        while secs < 253_402_300_799 {
            for (offset, nanos) in [(utc, 0), (utc, 1_000), (utc, 999_999_999), (plus2, 5_000)] {
                let ts = offset.timestamp_opt(secs, nanos).single().expect("a time");
                assert_eq!(format_ts(&ts), by_chrono(&ts), "{secs} {nanos}");
            }
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            secs += 86_400 * 97 + i64::from(n % 86_400);
        }
        let leap = utc
            .with_ymd_and_hms(2016, 12, 31, 23, 59, 59)
            .single()
            .expect("a time")
            .with_nanosecond(1_500_000_000)
            .expect("a leap second");
        assert_eq!(format_ts(&leap), by_chrono(&leap));
        assert_eq!(
            format_ts(
                &utc.timestamp_opt(1_700_000_000, 123_456_000)
                    .single()
                    .expect("a time")
            ),
            "2023-11-14T22:13:20.123456Z"
        );
    }
}
