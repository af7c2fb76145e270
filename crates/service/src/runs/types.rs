//! The requests and answers of the run rules. The gateway reads its bodies into the requests and
//! writes the answers as its JSON, so `/openapi.json` is generated from these types.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_core::store::Multitask;
use switchyard_core::{Event, RunContext, RunStatus, RunSummary};
use utoipa::ToSchema;

/// Start a run: claim its log (the session, or the run's own log without one) and store its
/// `run.started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// The run's id (default: a new random one); never reused within its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The session whose log the run goes into (default: its own log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The namespace (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Who is writing, in every event's envelope (default: `invocable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// An open run of the log whose latest event is older than this many seconds is stale and
    /// closed by the claim (default: the service's `stale_after`; at most ten years).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 315_360_000)]
    pub stale_after_secs: Option<u64>,
    /// What to do when an open run holds the session (ADR 0394): `reject` (the default: 409
    /// `session_busy`), `enqueue` (wait in the session's line and start when its turn comes:
    /// 202 with the place), `interrupt` or `rollback` (end the open run `cancelled` and start
    /// now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multitask_strategy: Option<Multitask>,
    /// The name of the agent, workflow or skill that runs.
    pub invocable: String,
    /// What `invocable` is: `agent`, `workflow` or `skill`.
    pub kind_of_invocable: String,
    /// The run's input: content blocks, as the event model describes them.
    #[schema(value_type = Vec<switchyard_core::event::Block>)]
    pub input: Value,
}

/// Resume a run that waits for a human or is paused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRun {
    /// Why it resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The answer it was waiting for: content blocks, stored in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<switchyard_core::event::Block>>)]
    pub value: Option<Value>,
    /// Who is writing (default: the service's default origin, `gateway` in the gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// The outcome of [`Runs::start`](super::Runs::start): a lost claim is data, not an error.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per start, matched once; the common case is Started
pub enum StartOutcome {
    /// The claim won and the run is started.
    Started(Started),
    /// A fresh open run holds the log; nothing was written.
    Held(Held),
    /// The run waits in the session's line (strategy `enqueue`).
    Queued(Queued),
}

/// A run waiting in its session's line (ADR 0394): it has no event yet, so its status is
/// `pending`, and it starts when its turn comes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Queued {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: Option<String>,
    /// Its namespace, if it has one.
    pub namespace: Option<String>,
    /// The log it waits for: its session.
    pub log_key: String,
    /// Always `pending` while it waits.
    pub status: RunStatus,
    /// Its place in the line, 1 for the next to start.
    pub position: u64,
}

/// Where a run that was enqueued stands (`POST /v1/runs/{run_id}/turn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunTurn {
    /// The run.
    pub run_id: String,
    /// `pending` while it waits, else its status since it started.
    pub status: RunStatus,
    /// Its place in the line while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Its stored `run.started` once it has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
}

/// A started run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Started {
    /// The run.
    pub run_id: String,
    /// Its session, if it has one.
    pub session_id: Option<String>,
    /// Its namespace, if it has one.
    pub namespace: Option<String>,
    /// The log it lives in: its session, else its own id.
    pub log_key: String,
    /// Always `running`.
    pub status: RunStatus,
    /// The stored `run.started` event.
    pub event: Event,
    /// The stale runs the claim closed with `run.failed` (`cancelled_hard`), by run id.
    pub overridden: Vec<String>,
    /// The runs an `interrupt` or `rollback` claim ended with `run.cancelled`, by run id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ended: Vec<String>,
    /// How many stored events the stream bridge did not take (logged; the store has them).
    #[serde(skip)]
    pub unpublished: usize,
}

/// Who holds a log a claim lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The log that was claimed.
    pub log_key: String,
    /// The fresh open run that holds it.
    pub held_by: String,
}

/// Events stored by an append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AppendedEvents {
    /// The run.
    pub run_id: String,
    /// The run's status after the append (a terminal event ends it).
    pub status: RunStatus,
    /// The stored events, in order.
    pub events: Vec<Event>,
    /// How many stored events the stream bridge did not take (logged; the store has them).
    #[serde(skip)]
    pub unpublished: usize,
}

/// A resumed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Resumed {
    /// The run.
    pub run_id: String,
    /// Always `running`.
    pub status: RunStatus,
    /// The stored `run.resumed` event.
    pub event: Event,
    /// How many stored events the stream bridge did not take (logged; the store has them).
    #[serde(skip)]
    pub unpublished: usize,
}

/// A run read from the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// The run.
    pub run_id: String,
    /// Its session, if it has one.
    pub session_id: Option<String>,
    /// Its namespace, if it has one.
    pub namespace: Option<String>,
    /// The log it lives in.
    pub log_key: String,
    /// Folded from all its lifecycle events (not only the ones read).
    pub status: RunStatus,
    /// Its events with `seq >= from_seq`, in order.
    pub events: Vec<Event>,
}

impl RunView {
    pub(super) fn new(ctx: &RunContext, status: RunStatus, events: Vec<Event>) -> Self {
        RunView {
            run_id: ctx.run_id().into(),
            session_id: ctx.session_id().map(Into::into),
            namespace: ctx.namespace().map(Into::into),
            log_key: ctx.log_key().into(),
            status,
            events,
        }
    }
}

/// The runs of a namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    /// The namespace listed (none: the runs without one).
    pub namespace: Option<String>,
    /// Its runs, sorted by log and run id.
    pub runs: Vec<RunEntry>,
}

/// One run of a [`RunList`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunEntry {
    /// The run.
    pub run_id: String,
    /// The log it lives in.
    pub log_key: String,
    /// Its session: the log key when that is not the run id.
    pub session_id: Option<String>,
    /// Folded from its latest lifecycle event.
    pub status: RunStatus,
}

impl From<&RunSummary> for RunEntry {
    fn from(r: &RunSummary) -> Self {
        RunEntry {
            run_id: r.run_id.clone(),
            log_key: r.log_key.clone(),
            session_id: r.session_id().map(Into::into),
            status: r.status,
        }
    }
}

/// The runs waiting for a session, in the order they start (`GET /v1/sessions/{session}/line`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionLine {
    /// The session.
    pub session_id: String,
    /// Its namespace, if it has one.
    pub namespace: Option<String>,
    /// The waiting runs, the next to start first.
    pub runs: Vec<LineEntry>,
}

/// One run waiting in a session's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LineEntry {
    /// The run.
    pub run_id: String,
    /// Its place, 1 for the next to start.
    pub position: u64,
    /// Who asked for it (the origin of its events).
    pub origin: String,
    /// The agent, workflow or skill it will run.
    pub invocable: String,
}
