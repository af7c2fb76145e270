//! Runs: start (claim), append, end, resume, read, list, and what reaches the stream bridge.
//!
//! Every write goes to the store first, the source of truth, and then to the bridge for live
//! readers; a publish that fails is logged and counted in the answer (`unpublished`), never turned
//! into an error for a write that is already durable.

mod cancel;
mod refusals;
mod types;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use switchyard_core::event::{ErrorCode, RunFailed, RunResumed, RunStarted};
use switchyard_core::fleet::FleetBackend;
use switchyard_core::status::{is_lifecycle, lifecycle_status};
use switchyard_core::store::{Claimed, EventStore, HandedOff, Multitask, Turn};
use switchyard_core::stream::{StreamBridge, run_stream_id};
use switchyard_core::{Appended, Event, Payload, RunContext, RunStatus, status_of};

use crate::{Error, MAX_DURATION_SECS, Result};

pub use cancel::{
    CancelDone, CancelRun, CancelRunAnswer, DEFAULT_CANCEL_GRACE_SECS, MAX_CANCEL_GRACE_SECS,
    RUN_CANCELS_QUEUE, TaskRef, is_signal,
};
pub use refusals::{
    DEFAULT_ORIGIN, not_waiting, read_payload, resumed_here, started_here, too_many_events,
    unknown_run,
};
use refusals::{at_most, body_id, payload_error};
pub use types::{
    AppendedEvents, Held, LineEntry, Queued, ResumeRun, Resumed, RunEntry, RunList, RunTurn,
    RunView, SessionLine, StartOutcome, StartRun, Started,
};

/// The most events one append may carry. A batch is one atomic write and one answer holding
/// every stored event, so without a bound nothing would limit how long one call holds the run's
/// log and how large its answer grows.
pub const MAX_APPEND_EVENTS: usize = 1_000;

/// How often a waiting run's `turn` looks again while the caller waits.
const TURN_POLL: Duration = Duration::from_millis(50);

/// The longest a `turn` call may wait for its run to start, in seconds.
pub const MAX_TURN_WAIT_SECS: u64 = 30;

/// The largest `from_seq` of a read: stores keep seqs as signed 64-bit integers.
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// How runs behave where the caller does not say.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// A claim takes over an open run whose latest event is older than this.
    pub stale_after: Duration,
    /// How long a finished run's stream stays replayable before it is released.
    pub stream_grace: Duration,
}

/// The run rules over an event store and a stream bridge (cheap to clone).
#[derive(Debug, Clone)]
pub struct Runs {
    store: Arc<dyn EventStore>,
    bridge: Arc<dyn StreamBridge>,
    settings: RunSettings,
    /// Where a cancel's grace period is kept (a delayed task) and a run's task is cancelled.
    fleet: Option<Arc<dyn FleetBackend>>,
    /// Told of every published event, to deliver run ends to their subscribers.
    webhooks: Option<crate::webhooks::Webhooks>,
}

impl Runs {
    /// The rules over `store` (the source of truth) and `bridge` (where stored events are
    /// published for live readers).
    pub fn new(
        store: Arc<dyn EventStore>,
        bridge: Arc<dyn StreamBridge>,
        settings: RunSettings,
    ) -> Self {
        Runs {
            store,
            bridge,
            settings,
            fleet: None,
            webhooks: None,
        }
    }

    /// The rules with a fleet backend: a cancel's grace period becomes a delayed task on it
    /// (durable across restarts), and a cancel may name the queue task carrying the run.
    pub fn with_fleet(mut self, fleet: Arc<dyn FleetBackend>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// Enqueues the webhook deliveries of every run end these rules publish.
    pub fn with_webhooks(mut self, webhooks: crate::webhooks::Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// The event store the rules write to.
    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.store
    }

    /// The stream bridge stored events are published to.
    pub fn bridge(&self) -> &Arc<dyn StreamBridge> {
        &self.bridge
    }

    /// The settings in force.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// Claims the run's log and stores its `run.started`. A fresh open run holding the log is
    /// [`StartOutcome::Held`] (nothing written); every stale open run the claim stepped over is
    /// closed with `run.failed` (`cancelled_hard`) and published, then the opening event is
    /// published. A run id the log already holds is a backend `AlreadyExists`.
    pub async fn start(&self, request: StartRun) -> Result<StartOutcome> {
        let run_id = match request.run_id {
            Some(id) => body_id("run_id", id)?,
            None => switchyard_fleet::uuid4_hex(),
        };
        let session = request
            .session_id
            .map(|s| body_id("session_id", s))
            .transpose()?;
        let namespace = request
            .namespace
            .map(|n| body_id("namespace", n))
            .transpose()?;
        let origin = request.origin.map(|o| body_id("origin", o)).transpose()?;
        let stale_after = match request.stale_after_secs {
            Some(secs) => {
                Duration::from_secs(at_most("stale_after_secs", secs, MAX_DURATION_SECS)?)
            }
            None => self.settings.stale_after,
        };
        let mut opening = Map::new();
        opening.insert("kind".into(), "run.started".into());
        opening.insert("invocable".into(), request.invocable.into());
        opening.insert("kind_of_invocable".into(), request.kind_of_invocable.into());
        opening.insert("input".into(), request.input);
        let Payload::RunStarted(opening) = read_payload(&Value::Object(opening), "")? else {
            return Err(Error::invalid(
                "kind",
                "the opening event is not run.started",
            ));
        };
        let origin = origin.unwrap_or_else(|| opening.invocable.clone());
        let mut ctx = RunContext::new(run_id);
        if let Some(session) = session {
            ctx = ctx.with_session(session);
        }
        if let Some(namespace) = namespace {
            ctx = ctx.with_namespace(namespace)?;
        }
        let strategy = request.multitask_strategy.unwrap_or_default();
        self.claim(&ctx, opening, &origin, stale_after, strategy)
            .await
    }

    /// [`start`](Self::start) with a typed opening event, for library callers that hold one.
    pub async fn start_run(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Option<Duration>,
    ) -> Result<StartOutcome> {
        Payload::RunStarted(opening.clone())
            .validate()
            .map_err(|e| payload_error(e, ""))?;
        let stale_after = stale_after.unwrap_or(self.settings.stale_after);
        self.claim(ctx, opening, origin, stale_after, Multitask::Reject)
            .await
    }

    /// [`start_run`](Self::start_run) with a multitask strategy (ADR 0394): what to do when an
    /// open run holds the session.
    pub async fn start_run_with(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Option<Duration>,
        strategy: Multitask,
    ) -> Result<StartOutcome> {
        Payload::RunStarted(opening.clone())
            .validate()
            .map_err(|e| payload_error(e, ""))?;
        let stale_after = stale_after.unwrap_or(self.settings.stale_after);
        self.claim(ctx, opening, origin, stale_after, strategy)
            .await
    }

    async fn claim(
        &self,
        ctx: &RunContext,
        opening: RunStarted,
        origin: &str,
        stale_after: Duration,
        strategy: Multitask,
    ) -> Result<StartOutcome> {
        let claimed = self
            .store
            .claim(ctx, opening, origin, stale_after, strategy)
            .await?;
        let (started, overridden, ended) = match claimed {
            Claimed::Held { held_by } => {
                return Ok(StartOutcome::Held(Held {
                    log_key: ctx.log_key().into(),
                    held_by,
                }));
            }
            Claimed::Queued {
                position,
                handed_off,
            } => {
                // The claim's hand-off may have started the run before this one.
                if let Some(h) = handed_off {
                    self.started_by_hand_off(ctx, h).await;
                }
                return Ok(StartOutcome::Queued(Queued {
                    run_id: ctx.run_id().into(),
                    session_id: ctx.session_id().map(Into::into),
                    namespace: ctx.namespace().map(Into::into),
                    log_key: ctx.log_key().into(),
                    status: RunStatus::Pending,
                    position,
                }));
            }
            Claimed::Started {
                event,
                overridden,
                ended,
            } => (event, overridden, ended),
        };
        let mut unpublished = self.close_overridden(ctx, &overridden).await;
        // The runs an interrupt or rollback ended: their followers see the end.
        for event in &ended {
            let ended_ctx = ctx.for_run(event.run_id.clone(), event.session_id.clone());
            unpublished += self.publish(&ended_ctx, std::slice::from_ref(event)).await;
        }
        unpublished += self.publish(ctx, std::slice::from_ref(&started)).await;
        Ok(StartOutcome::Started(Started {
            run_id: ctx.run_id().into(),
            session_id: ctx.session_id().map(Into::into),
            namespace: ctx.namespace().map(Into::into),
            log_key: ctx.log_key().into(),
            status: RunStatus::Running,
            event: started,
            overridden: overridden.iter().map(|t| t.run_id.clone()).collect(),
            ended: ended.iter().map(|e| e.run_id.clone()).collect(),
            unpublished,
        }))
    }

    /// As the agentdeck runtime does: closes every stale run a claim of `ctx`'s run stepped
    /// over, so no reader waits on a run nobody writes to any more. Returns how many events the
    /// bridge did not take.
    async fn close_overridden(&self, ctx: &RunContext, overridden: &[Event]) -> usize {
        let mut unpublished = 0;
        for tail in overridden {
            let tail_ctx = ctx.for_run(tail.run_id.clone(), tail.session_id.clone());
            let failed = Payload::RunFailed(RunFailed {
                error_code: ErrorCode::CancelledHard,
                message: format!(
                    "abandoned: the session was taken over by run {}",
                    ctx.run_id()
                ),
                retryable: false,
            });
            match self
                .store
                .append(&tail_ctx, vec![failed], &tail.origin)
                .await
            {
                Ok(events) => unpublished += self.publish(&tail_ctx, &events).await,
                // It stays open and stale: the next claim steps over it and closes it again.
                Err(e) => {
                    tracing::warn!(run_id = %tail.run_id, error = %e, "closing a stale run failed")
                }
            }
        }
        unpublished
    }

    /// Publishes a run a hand-off started (its `run.started`), after closing the stale runs its
    /// claim stepped over.
    async fn started_by_hand_off(&self, ctx: &RunContext, handed: HandedOff) {
        let started_ctx = ctx.for_run(handed.event.run_id.clone(), handed.event.session_id.clone());
        self.close_overridden(&started_ctx, &handed.overridden)
            .await;
        self.publish(&started_ctx, std::slice::from_ref(&handed.event))
            .await;
    }

    /// Starts the next run waiting for the session of `ctx` if it is free (ADR 0394), and
    /// publishes it. Runs after every append here that ends a run, so a waiting run starts in
    /// the request that ended the one before it. A failure is logged, never the caller's: the
    /// ending append is durable, and the waiting run's own polls move the line.
    async fn hand_off(&self, ctx: &RunContext) {
        if ctx.session_id().is_none() {
            return;
        }
        match self.store.hand_off(ctx).await {
            Ok(Some(handed)) => self.started_by_hand_off(ctx, handed).await,
            Ok(None) => {}
            Err(e) => tracing::warn!(
                log_key = ctx.log_key(),
                error = %e,
                "starting the next waiting run failed; it starts at its next poll"
            ),
        }
    }

    /// Where the enqueued run of `ctx` stands (ADR 0394), after moving the line if the run
    /// before it ended without a hand-off. With `wait`, keeps looking (every 50 ms) until the
    /// run has started or `wait` has passed. A run that neither waits nor has started is
    /// `not_waiting` (404).
    pub async fn turn(&self, ctx: &RunContext, wait: Duration) -> Result<RunTurn> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            // In a task of its own: a caller that goes away mid-look must not cut a start off
            // from its publish.
            let step = {
                let (runs, ctx) = (self.clone(), ctx.clone());
                tokio::spawn(async move {
                    let (turn, handed) = runs.store.turn(&ctx).await?;
                    if let Some(h) = handed {
                        runs.started_by_hand_off(&ctx, h).await;
                    }
                    Ok::<_, Error>(turn)
                })
            };
            let turn = step.await.map_err(|e| {
                Error::Backend(switchyard_core::Error::corrupt(
                    ctx.log_key(),
                    format!("the look at the line stopped: {e}"),
                ))
            })??;
            match turn {
                Turn::Started { event } => {
                    let status = self.store.run_status(ctx).await?;
                    return Ok(RunTurn {
                        run_id: ctx.run_id().into(),
                        status,
                        position: None,
                        event: Some(event),
                    });
                }
                Turn::NotWaiting => return Err(not_waiting(ctx)),
                Turn::Waiting { position } => {
                    if tokio::time::Instant::now() >= until {
                        return Ok(RunTurn {
                            run_id: ctx.run_id().into(),
                            status: RunStatus::Pending,
                            position: Some(position),
                            event: None,
                        });
                    }
                    tokio::time::sleep(
                        TURN_POLL.min(until.saturating_duration_since(tokio::time::Instant::now())),
                    )
                    .await;
                }
            }
        }
    }

    /// The runs waiting for the session of `ctx` (its run id is not looked at), the next to
    /// start first (ADR 0394).
    pub async fn line(&self, ctx: &RunContext) -> Result<SessionLine> {
        let Some(session) = ctx.session_id() else {
            return Err(Error::invalid(
                "session",
                "a line belongs to a session: name one",
            ));
        };
        let line = self
            .store
            .line_read(ctx, switchyard_core::store::MAX_LINE)
            .await?;
        Ok(SessionLine {
            session_id: session.to_string(),
            namespace: ctx.namespace().map(Into::into),
            runs: line
                .into_iter()
                .zip(1..)
                .map(|(r, position)| LineEntry {
                    run_id: r.run_id,
                    position,
                    origin: r.origin,
                    invocable: r.opening.invocable,
                })
                .collect(),
        })
    }

    /// Takes the enqueued run of `ctx` out of its session's line before it starts (ADR 0394).
    /// A run that is not waiting (it started, or never waited) is `not_waiting` (404).
    pub async fn leave_line(&self, ctx: &RunContext) -> Result<()> {
        if self.store.line_remove(ctx, ctx.run_id()).await? {
            Ok(())
        } else {
            Err(not_waiting(ctx))
        }
    }

    /// Appends `payloads` to the run of `ctx` while it is open, in one step with the check
    /// (guarantee `store.append_if_open`), and publishes them; a terminal event ends the run and
    /// its stream is released after the grace period. A pending or unknown run is `unknown_run`
    /// (404), a finished one `run_finished` (409, `status`). `run.started` and `run.resumed`
    /// are refused: [`start`](Self::start) claims the log, [`resume`](Self::resume) resumes
    /// exactly once. At most [`MAX_APPEND_EVENTS`]; `origin` defaults to `gateway`.
    pub async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: Option<&str>,
    ) -> Result<AppendedEvents> {
        if payloads.len() > MAX_APPEND_EVENTS {
            return Err(too_many_events(payloads.len()));
        }
        let lone = payloads.len() == 1;
        for (i, payload) in payloads.iter().enumerate() {
            let field = if lone {
                "kind".to_string()
            } else {
                format!("events[{i}].kind")
            };
            match payload.kind() {
                "run.started" => return Err(started_here(field)),
                "run.resumed" => return Err(resumed_here(field)),
                _ => {}
            }
        }
        let origin = match origin {
            Some(o) => body_id("origin", o.to_string())?,
            None => DEFAULT_ORIGIN.to_string(),
        };
        // One atomic step: a run that is pending or finished takes nothing, and no event can
        // land after a terminal one (ADR 0365).
        match self.store.append_if_open(ctx, payloads, &origin).await? {
            Appended::Stored { events, status } => {
                let unpublished = self.publish(ctx, &events).await;
                if status.is_terminal() {
                    self.hand_off(ctx).await;
                }
                Ok(AppendedEvents {
                    run_id: ctx.run_id().into(),
                    status,
                    events,
                    unpublished,
                })
            }
            Appended::NotOpen(RunStatus::Pending) => Err(unknown_run(ctx)),
            Appended::NotOpen(status) => Err(Error::conflict(
                "run_finished",
                format!(
                    "run {:?} is {status}; it takes no more events",
                    ctx.run_id()
                ),
            )
            .with("status", status.as_str())),
        }
    }

    /// Ends the run of `ctx` with `terminal` (`run.completed`, `run.failed` or
    /// `run.cancelled`) while it is open: [`append`](Self::append) of that one event, refused
    /// as `append` refuses, and any other kind is `invalid_input` on `kind`.
    pub async fn end(
        &self,
        ctx: &RunContext,
        terminal: Payload,
        origin: Option<&str>,
    ) -> Result<AppendedEvents> {
        if !lifecycle_status(terminal.kind()).is_some_and(RunStatus::is_terminal) {
            return Err(Error::invalid(
                "kind",
                format!(
                    "a run ends with run.completed, run.failed or run.cancelled, not {}",
                    terminal.kind()
                ),
            ));
        }
        self.append(ctx, vec![terminal], origin).await
    }

    /// Resumes the run of `ctx` if it waits for a human or is paused, exactly once (guarantee
    /// `claim.resume_once`), and publishes the `run.resumed`. Of concurrent resumes one gets the
    /// event; the others, and a run in any other state, get `not_resumable` (409, `status`); an
    /// unknown run is `unknown_run` (404).
    pub async fn resume(&self, ctx: &RunContext, request: ResumeRun) -> Result<Resumed> {
        let origin = match request.origin {
            Some(o) => body_id("origin", o)?,
            None => DEFAULT_ORIGIN.to_string(),
        };
        let mut resumed = Map::new();
        resumed.insert("kind".into(), "run.resumed".into());
        if let Some(reason) = request.reason {
            resumed.insert("reason".into(), reason.into());
        }
        if let Some(value) = request.value.filter(|v| !v.is_null()) {
            resumed.insert("value".into(), value);
        }
        let Payload::RunResumed(resumed) = read_payload(&Value::Object(resumed), "")? else {
            return Err(Error::invalid(
                "kind",
                "the resume event is not run.resumed",
            ));
        };
        self.resume_with(ctx, resumed, &origin).await
    }

    async fn resume_with(
        &self,
        ctx: &RunContext,
        resumed: RunResumed,
        origin: &str,
    ) -> Result<Resumed> {
        match self.store.claim_resume(ctx, resumed, origin).await? {
            Some(event) => {
                let unpublished = self.publish(ctx, std::slice::from_ref(&event)).await;
                Ok(Resumed {
                    run_id: ctx.run_id().into(),
                    status: RunStatus::Running,
                    event,
                    unpublished,
                })
            }
            None => {
                let status = self.store.run_status(ctx).await?;
                if status == RunStatus::Pending {
                    return Err(unknown_run(ctx));
                }
                Err(Error::conflict(
                    "not_resumable",
                    format!(
                        "run {:?} is {status}; only waiting_human or paused runs resume",
                        ctx.run_id()
                    ),
                )
                .with("status", status.as_str()))
            }
        }
    }

    /// The run of `ctx` with its status and its events from `from_seq` (at most [`MAX_SEQ`]);
    /// a run with no lifecycle event is `unknown_run` (404).
    pub async fn read(&self, ctx: &RunContext, from_seq: u64) -> Result<RunView> {
        let from_seq = at_most("from_seq", from_seq, MAX_SEQ)?;
        let events = self.store.read_run(ctx, from_seq).await?;
        // From the start, the events read are the whole run and fold to its status; from a
        // later seq they may miss the lifecycle events, so the store folds them.
        let status = if from_seq == 0 {
            status_of(&events)
        } else {
            self.store.run_status(ctx).await?
        };
        if status == RunStatus::Pending && events.iter().all(|e| !is_lifecycle(e.kind())) {
            return Err(unknown_run(ctx));
        }
        Ok(RunView::new(ctx, status, events))
    }

    /// The runs of `namespace` (none: the runs without one), only those in `status` if given,
    /// sorted by log and run id.
    pub async fn list(
        &self,
        namespace: Option<&str>,
        status: Option<RunStatus>,
    ) -> Result<RunList> {
        let mut runs = self.store.list_runs_in(namespace, status).await?;
        runs.sort_by(|a, b| (&a.log_key, &a.run_id).cmp(&(&b.log_key, &b.run_id)));
        Ok(RunList {
            namespace: namespace.map(Into::into),
            runs: runs.iter().map(RunEntry::from).collect(),
        })
    }

    /// The folded status of the run of `ctx` ([`RunStatus::Pending`] for an unknown run).
    pub async fn status(&self, ctx: &RunContext) -> Result<RunStatus> {
        Ok(self.store.run_status(ctx).await?)
    }

    /// The id of the run's stream on the bridge, when there is something to follow there: the
    /// stream exists, or the run is open and its first publish may be a moment away (another
    /// process writes it, or an in-process bridge restarted under it). A run that finished and
    /// whose stream was released is `no_stream` (404: read it instead); an unknown run is
    /// `unknown_run` (404).
    pub async fn stream(&self, ctx: &RunContext) -> Result<String> {
        let stream_id = run_stream_id(ctx);
        if self.bridge.stream_exists(&stream_id).await? {
            return Ok(stream_id);
        }
        let status = self.store.run_status(ctx).await?;
        if status == RunStatus::Pending {
            return Err(unknown_run(ctx));
        }
        if status.is_terminal() {
            return Err(Error::not_found(
                "no_stream",
                format!(
                    "run {:?} is {status} and its stream was released; read its events with \
                     GET /v1/runs/{{run_id}}",
                    ctx.run_id()
                ),
            ));
        }
        Ok(stream_id)
    }

    /// Publishes stored events to the run's stream (event name = kind, data = the event JSON,
    /// the stream ended after a terminal lifecycle event; ADR 0253), addressed like the run
    /// (ADR 0190). A finished run's stream is released after the grace period (ADR 0192): late
    /// subscribers still replay the end within it, and read the run from the store after.
    /// Returns how many events the bridge did not take.
    async fn publish(&self, ctx: &RunContext, events: &[Event]) -> usize {
        let mut failed = 0;
        let mut ended = false;
        for event in events {
            if let Err(e) = self.bridge.publish_event(event).await {
                failed += 1;
                tracing::warn!(run_id = ctx.run_id(), seq = event.seq, error = %e, "publish to the stream failed");
            }
            let ends = lifecycle_status(event.kind()).is_some_and(RunStatus::is_terminal);
            if ends && let Some(webhooks) = &self.webhooks {
                webhooks.run_event(event).await;
            }
            ended |= ends;
        }
        if ended {
            let stream_id = run_stream_id(ctx);
            let bridge = self.bridge.clone();
            let grace = self.settings.stream_grace;
            tokio::spawn(async move {
                if let Err(e) = bridge.cleanup(&stream_id, grace).await {
                    tracing::debug!(%stream_id, error = %e, "releasing a finished stream failed");
                }
            });
        }
        failed
    }
}
