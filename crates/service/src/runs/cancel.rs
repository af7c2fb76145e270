//! Cancelling a run so that its worker learns it (ADR 0396): the request is stored as the
//! run's `control.requested` (`verb: cancel`), which reaches whoever follows the run's stream or
//! its signals at once; the task carrying the run, when named, is cancelled through the queue;
//! and the run ends `cancelled` when its worker confirms, or, at the latest, when the grace
//! period runs out, through a delayed task on the fleet's own queue (durable across restarts).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_core::event::{ControlRequested, ControlVerb, RunCancelled};
use switchyard_core::fleet::{CancelOutcome, RunAt};
use switchyard_core::{Appended, Event, Payload, RunContext, RunStatus};
use switchyard_fleet::{Consumer, ConsumerConfig, ConsumerHandle, PushOptions, Queue};
use utoipa::ToSchema;

use super::Runs;
use super::refusals::{DEFAULT_ORIGIN, at_most, body_id, unknown_run};
use crate::{Error, Result};

/// The queue whose delayed tasks end runs whose grace period ran out.
pub const RUN_CANCELS_QUEUE: &str = "switchyard.run-cancels";

/// How long a worker has to confirm a cancel when the request does not say, in seconds.
pub const DEFAULT_CANCEL_GRACE_SECS: u64 = 30;

/// The longest grace period a cancel may give, in seconds (one hour).
pub const MAX_CANCEL_GRACE_SECS: u64 = 3_600;

/// Cancel a run (`POST /v1/runs/{run_id}/cancel`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRun {
    /// Why; stored in the request and in the run's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How long the worker has to confirm (by ending the run) before the run is ended
    /// `cancelled` without it, in seconds: 0 ends it at once. Default 30, at most 3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 3600)]
    pub grace_secs: Option<u64>,
    /// The queue task that carries the run, cancelled with it (its holder learns it at its next
    /// heartbeat, a waiting task never starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskRef>,
    /// Who asks (default `gateway`), in the stored events' envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A queue task, by queue and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRef {
    /// The queue.
    pub queue: String,
    /// The task's id.
    pub id: String,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelDone {
    /// The request is stored and the worker told; the run ends when it confirms, or when the
    /// grace period runs out.
    Requested,
    /// The run was ended `cancelled` now (a grace of 0).
    Ended,
    /// The run was waiting in its session's line: it was taken out and will never start.
    LeftLine,
    /// The run had ended already; nothing changed.
    Finished,
}

/// The answer to a cancel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CancelRunAnswer {
    /// The run.
    pub run_id: String,
    /// What the cancel did.
    pub outcome: CancelDone,
    /// The run's status after it.
    pub status: RunStatus,
    /// The stored `control.requested` (outcome `requested`) or `run.cancelled` (`ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    /// When the grace period runs out, unix seconds on this process's clock (outcome
    /// `requested`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_by: Option<u64>,
    /// What the named task's cancel did: `cancelled`, `cancel_requested`, `finished` or
    /// `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// A run to end once its grace period runs out: the body of a [`RUN_CANCELS_QUEUE`] task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GraceOver {
    run_id: String,
    session_id: Option<String>,
    namespace: Option<String>,
    reason: Option<String>,
    origin: String,
}

fn cancelled_by(reason: Option<&str>, grace: bool) -> Payload {
    let reason = match (reason, grace) {
        (Some(r), true) => format!("cancel requested ({r}); the worker did not confirm in time"),
        (None, true) => "cancel requested; the worker did not confirm in time".to_string(),
        (Some(r), false) => r.to_string(),
        (None, false) => "cancel requested".to_string(),
    };
    Payload::RunCancelled(RunCancelled {
        reason: Some(reason),
    })
}

fn task_word(outcome: CancelOutcome) -> &'static str {
    match outcome {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::CancelRequested => "cancel_requested",
        CancelOutcome::Finished(_) => "finished",
        CancelOutcome::Unknown => "unknown",
    }
}

impl Runs {
    /// Cancels the run of `ctx` (ADR 0396). While it is open, stores its `control.requested`
    /// (`verb: cancel`, published to its stream and signals at once) and schedules its end
    /// `cancelled` after the grace period, unless its worker ends it first; a grace of 0 ends
    /// it at once. A run waiting in its session's line is taken out; a finished run is left as
    /// it is (`finished`); an unknown run is `unknown_run` (404). The named task is cancelled in
    /// every case.
    pub async fn cancel(&self, ctx: &RunContext, request: CancelRun) -> Result<CancelRunAnswer> {
        let grace = match request.grace_secs {
            Some(secs) => at_most("grace_secs", secs, MAX_CANCEL_GRACE_SECS)?,
            None => DEFAULT_CANCEL_GRACE_SECS,
        };
        let origin = match request.origin {
            Some(o) => body_id("origin", o)?,
            None => DEFAULT_ORIGIN.to_string(),
        };
        let reason = request.reason;
        let task = match request.task {
            Some(t) => Some(
                self.cancel_task(body_id("task.queue", t.queue)?, t.id)
                    .await?,
            ),
            None => None,
        };
        let answer = |outcome, status, event, ends_by| CancelRunAnswer {
            run_id: ctx.run_id().into(),
            outcome,
            status,
            event,
            ends_by,
            task: task.map(str::to_string),
        };
        if grace == 0 {
            let end = cancelled_by(reason.as_deref(), false);
            return match self.store.append_if_open(ctx, vec![end], &origin).await? {
                Appended::Stored { events, status } => {
                    self.publish(ctx, &events).await;
                    self.hand_off(ctx).await;
                    Ok(answer(
                        CancelDone::Ended,
                        status,
                        events.into_iter().next(),
                        None,
                    ))
                }
                Appended::NotOpen(status) => self.not_open(ctx, status, answer).await,
            };
        }
        let request = Payload::ControlRequested(ControlRequested {
            verb: ControlVerb::Cancel,
            reason: reason.clone(),
        });
        match self
            .store
            .append_if_open(ctx, vec![request], &origin)
            .await?
        {
            Appended::Stored { events, status } => {
                self.publish(ctx, &events).await;
                let over = GraceOver {
                    run_id: ctx.run_id().into(),
                    session_id: ctx.session_id().map(Into::into),
                    namespace: ctx.namespace().map(Into::into),
                    reason,
                    origin,
                };
                self.schedule_grace(over, Duration::from_secs(grace))
                    .await?;
                let ends_by = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs().saturating_add(grace))
                    .ok();
                Ok(answer(
                    CancelDone::Requested,
                    status,
                    events.into_iter().next(),
                    ends_by,
                ))
            }
            Appended::NotOpen(status) => self.not_open(ctx, status, answer).await,
        }
    }

    /// A cancel of a run that is not open: one waiting in the line leaves it; a finished one
    /// is left as it is; an unknown one is `unknown_run`.
    async fn not_open<F>(
        &self,
        ctx: &RunContext,
        status: RunStatus,
        answer: F,
    ) -> Result<CancelRunAnswer>
    where
        F: Fn(CancelDone, RunStatus, Option<Event>, Option<u64>) -> CancelRunAnswer,
    {
        if status != RunStatus::Pending {
            return Ok(answer(CancelDone::Finished, status, None, None));
        }
        if self.store.line_remove(ctx, ctx.run_id()).await? {
            return Ok(answer(CancelDone::LeftLine, status, None, None));
        }
        Err(unknown_run(ctx))
    }

    async fn cancel_task(&self, queue: String, id: String) -> Result<&'static str> {
        let Some(fleet) = &self.fleet else {
            return Err(Error::invalid(
                "task",
                "this service has no fleet backend to cancel tasks on",
            ));
        };
        crate::queues::tasks::check_task_id("task.id", &id)?;
        Ok(task_word(fleet.task_cancel(&queue, &id).await?))
    }

    /// Puts the run's end on the fleet's own queue, due when the grace period runs out. Without
    /// a fleet backend (a library caller that gave none) a timer of this process does it, which
    /// a restart loses.
    async fn schedule_grace(&self, over: GraceOver, grace: Duration) -> Result<()> {
        if let Some(fleet) = &self.fleet {
            let queue: Queue<GraceOver> = Queue::new(fleet.clone(), RUN_CANCELS_QUEUE);
            queue
                .submit(&over, PushOptions::default(), RunAt::After(grace), None)
                .await?;
            return Ok(());
        }
        let runs = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            runs.grace_over(over).await;
        });
        Ok(())
    }

    /// Ends a run whose grace period ran out, if it is still open.
    async fn grace_over(&self, over: GraceOver) {
        let mut ctx = RunContext::new(over.run_id.clone());
        if let Some(s) = over.session_id {
            ctx = ctx.with_session(s);
        }
        if let Some(n) = over.namespace {
            match ctx.with_namespace(n) {
                Ok(c) => ctx = c,
                Err(e) => {
                    tracing::warn!(run_id = %over.run_id, error = %e, "a grace task names a bad namespace");
                    return;
                }
            }
        }
        let end = cancelled_by(over.reason.as_deref(), true);
        match self
            .store
            .append_if_open(&ctx, vec![end], &over.origin)
            .await
        {
            Ok(Appended::Stored { events, .. }) => {
                self.publish(&ctx, &events).await;
                self.hand_off(&ctx).await;
            }
            // Its worker ended it in time, or it had ended otherwise.
            Ok(Appended::NotOpen(_)) => {}
            Err(e) => {
                tracing::warn!(run_id = %over.run_id, error = %e, "ending a cancelled run failed")
            }
        }
    }

    /// Runs the ends of cancelled runs whose grace period ran out ([`RUN_CANCELS_QUEUE`]) until
    /// the handle is shut down; `None` without a fleet backend. The gateway runs one.
    pub fn spawn_grace_keeper(&self) -> Option<ConsumerHandle> {
        let fleet = self.fleet.clone()?;
        let queue: Queue<GraceOver> = Queue::new(fleet, RUN_CANCELS_QUEUE);
        let runs = self.clone();
        let config = ConsumerConfig {
            concurrency: 4,
            ..ConsumerConfig::default()
        };
        Some(Consumer::spawn(queue, config, move |task| {
            let runs = runs.clone();
            async move {
                runs.grace_over(task.payload).await;
                Ok(())
            }
        }))
    }
}

/// Whether an event stored for a run is one its signals carry (ADR 0396): control requests and
/// the run's end.
pub fn is_signal(kind: &str) -> bool {
    kind.starts_with("control.")
        || switchyard_core::status::lifecycle_status(kind).is_some_and(RunStatus::is_terminal)
}
