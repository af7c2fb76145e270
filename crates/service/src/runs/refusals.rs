//! The run rules' refusals and input checks, worded once for every door: the gateway answers
//! them as its JSON errors, the CLI as its messages, a library caller matches on [`Error`].

use serde_json::Value;
use switchyard_core::{Payload, RunContext};

use super::MAX_APPEND_EVENTS;
use crate::{Error, Result};

/// Who wrote an appended or resume event when the caller does not say.
pub const DEFAULT_ORIGIN: &str = "gateway";

const STARTED_HERE: &str = "start runs with POST /v1/runs (it claims the session)";
const RESUMED_HERE: &str =
    "resume runs with POST /v1/runs/{run_id}/resume (exactly one resume wins)";

/// The refusal of an appended `run.started` (on `field`, its `kind`): a start claims the log.
pub fn started_here(field: impl Into<String>) -> Error {
    Error::invalid(field, STARTED_HERE)
}

/// The refusal of an appended `run.resumed` (on `field`, its `kind`): one resume wins.
pub fn resumed_here(field: impl Into<String>) -> Error {
    Error::invalid(field, RESUMED_HERE)
}

/// The refusal of a batch over [`MAX_APPEND_EVENTS`] (`too_many_events` on `events`, with
/// `max_events`).
pub fn too_many_events(got: usize) -> Error {
    Error::invalid_as(
        "too_many_events",
        "events",
        format!(
            "a batch holds at most {MAX_APPEND_EVENTS} events, got {got}; send them in several \
             requests, in order (each is stored atomically)"
        ),
    )
    .with("max_events", MAX_APPEND_EVENTS)
}

/// The run of `ctx` is not in its log.
pub fn unknown_run(ctx: &RunContext) -> Error {
    Error::not_found(
        "unknown_run",
        format!(
            "no run {:?} in log {:?}{}",
            ctx.run_id(),
            ctx.log_key(),
            if ctx.session_id().is_none() {
                " (pass ?session= for a run that has a session)"
            } else {
                ""
            }
        ),
    )
}

/// The run of `ctx` does not wait in its session's line (ADR 0394): it started, was taken
/// out, or never waited.
pub fn not_waiting(ctx: &RunContext) -> Error {
    Error::not_found(
        "not_waiting",
        format!(
            "run {:?} is not waiting for session {:?}; read it with GET /v1/runs/{{run_id}}",
            ctx.run_id(),
            ctx.log_key()
        ),
    )
}

/// Reads and validates one payload; a broken rule names its field under `at` (`events[2]`,
/// or `""` for a lone payload).
pub fn read_payload(value: &Value, at: &str) -> Result<Payload> {
    let payload = Payload::from_value(value).map_err(|e| payload_error(e, at))?;
    payload.validate().map_err(|e| payload_error(e, at))?;
    Ok(payload)
}

/// The event model names a payload's fields under `payload`; the caller is told the field
/// where it sent it.
pub(super) fn payload_error(error: switchyard_core::Error, at: &str) -> Error {
    match error {
        switchyard_core::Error::InvalidInput { field, reason } => {
            let field = match field.strip_prefix("payload") {
                Some(rest) => format!("{at}{rest}"),
                None => field,
            };
            let field = field.trim_start_matches('.');
            let shown = if field.is_empty() { "body" } else { field };
            Error::invalid(shown, format!("invalid input: `{shown}` {reason}"))
        }
        other => Error::Backend(other),
    }
}

/// An id the caller sent in a body (`run_id`, `session_id`, `namespace`, `origin`): the core's
/// rule (`keys::check_id`), refused as `invalid_input` on its field.
pub(super) fn body_id(field: &str, id: String) -> Result<String> {
    match switchyard_core::keys::check_id(field, &id) {
        Ok(()) => Ok(id),
        Err(_) => Err(Error::invalid(
            field,
            format!(
                "`{field}` must be 1..={} bytes without control characters",
                switchyard_core::keys::MAX_ID_BYTES
            ),
        )),
    }
}

/// Refuses a caller's number above `max`, naming `field`.
pub(super) fn at_most(field: &str, value: u64, max: u64) -> Result<u64> {
    if value > max {
        return Err(Error::invalid(
            field,
            format!("`{field}` must be at most {max}, got {value}"),
        ));
    }
    Ok(value)
}
