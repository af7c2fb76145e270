//! The run status, folded from lifecycle events (agentdeck `core/status.py`).
//!
//! Only the seven lifecycle kinds move the status, and the last one wins: no transition is
//! validated, so `completed → run.resumed` gives `running`. Other kinds, unknown kinds included,
//! leave it as it is; no lifecycle event at all gives `pending`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::event::Event;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// No lifecycle event yet. A pending run holds no session.
    Pending,
    /// Started or resumed.
    Running,
    /// Paused; resumable.
    Paused,
    /// Interrupted for a human; resumable.
    WaitingHuman,
    /// Terminal.
    Completed,
    /// Terminal.
    Failed,
    /// Terminal.
    Cancelled,
}

/// The kinds that move the status, in the seed's order.
pub const LIFECYCLE_KINDS: [&str; 7] = [
    "run.started",
    "run.paused",
    "run.resumed",
    "run.interrupted",
    "run.completed",
    "run.failed",
    "run.cancelled",
];

/// Kinds that end a run.
pub const TERMINAL_KINDS: [&str; 3] = ["run.completed", "run.failed", "run.cancelled"];

/// Statuses that end a run.
pub const TERMINAL_STATUSES: [RunStatus; 3] = [
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

/// Statuses from which `claim_resume` succeeds.
pub const RESUMABLE_STATUSES: [RunStatus; 2] = [RunStatus::WaitingHuman, RunStatus::Paused];

impl RunStatus {
    /// Every status.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::WaitingHuman,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// The wire string, e.g. `waiting_human`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::WaitingHuman => "waiting_human",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Completed, failed or cancelled.
    pub fn is_terminal(self) -> bool {
        TERMINAL_STATUSES.contains(&self)
    }

    /// Running, paused or waiting for a human: the run holds its session.
    pub fn is_open(self) -> bool {
        self != RunStatus::Pending && !self.is_terminal()
    }
}

/// True when a run in `status` can be resumed (waiting for a human, or paused).
pub fn can_resume(status: RunStatus) -> bool {
    RESUMABLE_STATUSES.contains(&status)
}

/// The status a lifecycle kind sets, or `None` for every other kind.
pub fn lifecycle_status(kind: &str) -> Option<RunStatus> {
    Some(match kind {
        "run.started" | "run.resumed" => RunStatus::Running,
        "run.paused" => RunStatus::Paused,
        "run.interrupted" => RunStatus::WaitingHuman,
        "run.completed" => RunStatus::Completed,
        "run.failed" => RunStatus::Failed,
        "run.cancelled" => RunStatus::Cancelled,
        _ => return None,
    })
}

/// True for the seven lifecycle kinds.
pub fn is_lifecycle(kind: &str) -> bool {
    lifecycle_status(kind).is_some()
}

/// Folds a run's events, oldest first, into its status.
pub fn status_of<'a>(events: impl IntoIterator<Item = &'a Event>) -> RunStatus {
    fold_kinds(events.into_iter().map(Event::kind))
}

/// The status of a run that was `before` once `events` are appended to it: the last lifecycle
/// event's, else `before`.
pub fn status_after<'a>(
    before: RunStatus,
    events: impl IntoIterator<Item = &'a Event>,
) -> RunStatus {
    events
        .into_iter()
        .filter_map(|e| lifecycle_status(e.kind()))
        .last()
        .unwrap_or(before)
}

/// [`status_of`] over bare kinds.
pub fn fold_kinds<'a>(kinds: impl IntoIterator<Item = &'a str>) -> RunStatus {
    kinds
        .into_iter()
        .filter_map(lifecycle_status)
        .last()
        .unwrap_or(RunStatus::Pending)
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "status",
                    format!(
                        "{s:?} is not a run status (one of {:?})",
                        RunStatus::ALL.map(RunStatus::as_str)
                    ),
                )
            })
    }
}
