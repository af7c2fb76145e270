//! Multitask strategies (ADR 0394): what a claim does when another run holds its session, and
//! the session's *line* of runs waiting for their turn.
//!
//! The verbs here are written once, over the port: a claim with a strategy ([`claim`]), the
//! hand-off that starts the next waiting run once the session is free ([`hand_off`]) and a
//! waiting run's turn ([`turn`]). Adapters keep only the line itself (guarantee `line.order`:
//! [`EventStore::line_push`], [`EventStore::line_read`], [`EventStore::line_remove`]), stored
//! beside the log and never in it, so a seed process sharing the store sees only events it
//! knows, and a waiting run, which has no event, holds nothing for it.
//!
//! Exactly once rests on two guarantees the adapters already keep: a waiting run is started by
//! the ordinary [`EventStore::claim_start`] of its own id, which one caller at most wins
//! (`claim.atomic`) and which refuses an id that has events (`claim.run_ids_unique`); and only
//! the head of the line is ever tried. A hand-off that dies between the start and the head's
//! removal leaves a head whose id is taken; the next hand-off finds it so and removes it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::EventStore;
use crate::context::RunContext;
use crate::event::{Event, Payload, RunCancelled, RunStarted};
use crate::status::RunStatus;
use crate::{Error, Result};

/// The most runs one session's line holds (guarantee `line.order`): a push past it is refused.
/// A line is read whole to find a run's position, so it is bounded like every other thing a
/// client controls.
pub const MAX_LINE: usize = 1_000;

/// What a claim does when an open run holds its session (ADR 0394; LangGraph Platform's
/// `multitask_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Multitask {
    /// Refuse: the claim answers who holds the session and writes nothing (guarantee
    /// `claim.atomic`). The default, and the seed's only behaviour.
    #[default]
    Reject,
    /// Wait in the session's line: the run starts when its turn comes, exactly once, in claim
    /// order, after the run before it ended (guarantee `claim.enqueue`).
    Enqueue,
    /// End the open runs `cancelled` (reason `interrupted by run …`) and start now (guarantee
    /// `claim.interrupt`).
    Interrupt,
    /// End the open runs `cancelled` and marked rolled back (reason `rolled back for run …`),
    /// then start now (guarantee `claim.interrupt`).
    Rollback,
}

impl Multitask {
    /// The wire name, e.g. `enqueue`.
    pub fn as_str(self) -> &'static str {
        match self {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
            Multitask::Rollback => "rollback",
        }
    }
}

impl std::str::FromStr for Multitask {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "reject" => Ok(Multitask::Reject),
            "enqueue" => Ok(Multitask::Enqueue),
            "interrupt" => Ok(Multitask::Interrupt),
            "rollback" => Ok(Multitask::Rollback),
            other => Err(Error::invalid(
                "multitask_strategy",
                format!("must be reject, enqueue, interrupt or rollback, not {other:?}"),
            )),
        }
    }
}

/// A run waiting in its session's line: what its claim asked, kept until its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedRun {
    /// The waiting run.
    pub run_id: String,
    /// Its opening event, stamped when it starts.
    pub opening: RunStarted,
    /// The origin its events carry.
    pub origin: String,
    /// The claim's `stale_after`, used when its turn comes (a stale holder is stepped over).
    pub stale_after: Duration,
}

impl QueuedRun {
    /// The entry as adapters store it: one JSON object, `{"run_id", "origin", "stale_after_ms",
    /// "opening"}` (the opening as its event payload).
    pub fn to_json(&self) -> String {
        let opening =
            serde_json::to_value(Payload::RunStarted(self.opening.clone())).unwrap_or(Value::Null);
        let stale_after_ms = u64::try_from(self.stale_after.as_millis()).unwrap_or(u64::MAX);
        json!({
            "run_id": self.run_id,
            "origin": self.origin,
            "stale_after_ms": stale_after_ms,
            "opening": opening,
        })
        .to_string()
    }

    /// An entry [`to_json`](Self::to_json) wrote; anything else is [`Error::Corrupt`] at
    /// `location`.
    pub fn from_json(text: &str, location: &str) -> Result<Self> {
        let bad = |reason: String| Error::corrupt(location, reason);
        let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let field = |name: &str| {
            value
                .get(name)
                .ok_or_else(|| bad(format!("no {name:?} in the line entry")))
        };
        let text_of = |name: &str| {
            field(name)?
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| bad(format!("{name:?} is not a string")))
        };
        let stale_after_ms = field("stale_after_ms")?
            .as_u64()
            .ok_or_else(|| bad("\"stale_after_ms\" is not a count".into()))?;
        let Payload::RunStarted(opening) = Payload::from_value(field("opening")?)
            .map_err(|e| bad(format!("the opening does not decode: {e}")))?
        else {
            return Err(bad("the opening is not run.started".into()));
        };
        Ok(QueuedRun {
            run_id: text_of("run_id")?,
            origin: text_of("origin")?,
            stale_after: Duration::from_millis(stale_after_ms),
            opening,
        })
    }
}

/// A waiting run the hand-off started: its `run.started`, and the stale runs its claim stepped
/// over (as [`SessionClaim::overridden`](crate::context::SessionClaim::overridden): closing them
/// is the caller's job).
#[derive(Debug, Clone, PartialEq)]
pub struct HandedOff {
    /// The started run's stored `run.started`.
    pub event: Event,
    /// The last event of each stale open run the start stepped over.
    pub overridden: Vec<Event>,
}

/// What a claim with a strategy did.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a claim may have started nothing: look at the outcome"]
pub enum Claimed {
    /// The run started.
    Started {
        /// Its stored `run.started`.
        event: Event,
        /// The last event of each stale open run the claim stepped over (closing them is the
        /// caller's job, as with [`EventStore::claim_start`]).
        overridden: Vec<Event>,
        /// The `run.cancelled` events that ended the runs an `interrupt` or `rollback` claim
        /// took the session from, by run id.
        ended: Vec<Event>,
    },
    /// A fresh open run holds the session and the strategy is `reject`: nothing was written.
    Held {
        /// The holder (guarantee `claim.atomic`).
        held_by: String,
    },
    /// The run waits in the session's line (strategy `enqueue`).
    Queued {
        /// Its place, 1 for the next to start.
        position: u64,
        /// Another waiting run the claim's hand-off started meanwhile, for the caller to
        /// publish.
        handed_off: Option<HandedOff>,
    },
}

/// Where a waiting run stands ([`turn`]).
// One answer per poll, never stored in bulk: boxing the event would only cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// It waits; 1 is the next to start.
    Waiting {
        /// Its place in the line.
        position: u64,
    },
    /// It has started: its stored `run.started`.
    Started {
        /// The event.
        event: Event,
    },
    /// It is neither waiting nor started: taken out of the line (cancelled) or never in it.
    NotWaiting,
}

/// The reason an `interrupt` or `rollback` claim ends a run with.
fn ended_reason(strategy: Multitask, by: &str) -> String {
    match strategy {
        Multitask::Rollback => format!("rolled back for run {by}"),
        _ => format!("interrupted by run {by}"),
    }
}

/// Claims the log of `ctx` for its run with `strategy` (guarantees `claim.atomic`,
/// `claim.enqueue` and `claim.interrupt`; ADR 0394).
///
/// * `reject` is [`EventStore::claim_start`].
/// * `interrupt` and `rollback` end the run that holds the session with `run.cancelled` (only
///   while it is still open), then claim, and again until the claim wins (at most 16 rounds,
///   then [`Error::Contended`]); stale runs the winning claim stepped over are ended the same
///   way. The ending events come back in `ended`, stored before the new run's start.
/// * `enqueue` puts the run at the end of the line and hands off: when the session is free and
///   the run is first, it starts at once; otherwise it waits, and starts when a hand-off after
///   the runs before it finds the session free. A run without a session is its own log, which
///   nothing holds: it starts at once.
pub async fn claim<S: EventStore + ?Sized>(
    store: &S,
    ctx: &RunContext,
    opening: RunStarted,
    origin: &str,
    stale_after: Duration,
    strategy: Multitask,
) -> Result<Claimed> {
    match strategy {
        Multitask::Reject => {
            let (claim, event) = store.claim_start(ctx, opening, origin, stale_after).await?;
            started_or_held(ctx, claim.held_by, claim.overridden, event, Vec::new())
        }
        Multitask::Interrupt | Multitask::Rollback => {
            take_over(store, ctx, opening, origin, stale_after, strategy).await
        }
        Multitask::Enqueue if ctx.session_id().is_none() => {
            let (claim, event) = store.claim_start(ctx, opening, origin, stale_after).await?;
            started_or_held(ctx, claim.held_by, claim.overridden, event, Vec::new())
        }
        Multitask::Enqueue => {
            if !store.read_run(ctx, 0).await?.is_empty() {
                return Err(Error::AlreadyExists {
                    what: "run",
                    id: ctx.run_id().to_string(),
                });
            }
            let entry = QueuedRun {
                run_id: ctx.run_id().to_string(),
                opening,
                origin: origin.to_string(),
                stale_after,
            };
            store.line_push(ctx, &entry).await?;
            let handed_off = hand_off(store, ctx).await?;
            if let Some(h) = &handed_off
                && h.event.run_id == ctx.run_id()
            {
                return Ok(Claimed::Started {
                    event: h.event.clone(),
                    overridden: h.overridden.clone(),
                    ended: Vec::new(),
                });
            }
            match turn_of(store, ctx).await? {
                Turn::Waiting { position } => Ok(Claimed::Queued {
                    position,
                    handed_off,
                }),
                // A concurrent hand-off started it between the two steps.
                Turn::Started { event } => Ok(Claimed::Started {
                    event,
                    overridden: Vec::new(),
                    ended: Vec::new(),
                }),
                Turn::NotWaiting => Err(Error::corrupt(
                    ctx.log_key(),
                    "a run put in the line is neither waiting nor started",
                )),
            }
        }
    }
}

/// How many holders an `interrupt` or `rollback` claim ends before it gives up: each round ends
/// the run that refused it, so only claims that keep arriving between its rounds exhaust them.
const TAKE_OVER_ROUNDS: u32 = 16;

/// `interrupt` and `rollback`: end the run that holds the session, then claim, until the claim
/// wins; the runs it stepped over as stale are ended the same way. The holder's end is stored
/// before the new run's start, so the log reads in the order things happened.
async fn take_over<S: EventStore + ?Sized>(
    store: &S,
    ctx: &RunContext,
    opening: RunStarted,
    origin: &str,
    stale_after: Duration,
    strategy: Multitask,
) -> Result<Claimed> {
    let reason = ended_reason(strategy, ctx.run_id());
    let mut ended = Vec::new();
    for _ in 0..TAKE_OVER_ROUNDS {
        let (claim, event) = store
            .claim_start(ctx, opening.clone(), origin, stale_after)
            .await?;
        let Some(holder) = claim.held_by else {
            for tail in &claim.overridden {
                ended.extend(end_run(store, ctx, &tail.run_id, origin, &reason).await?);
            }
            return started_or_held(ctx, None, Vec::new(), event, ended);
        };
        ended.extend(end_run(store, ctx, &holder, origin, &reason).await?);
    }
    Err(Error::Contended {
        op: "claim",
        key: ctx.log_key().to_string(),
        attempts: TAKE_OVER_ROUNDS,
    })
}

/// Ends run `run_id` of the log of `ctx` with `run.cancelled` for `reason`, while it is open
/// (written by `origin`, the claim's); the stored event, if any.
async fn end_run<S: EventStore + ?Sized>(
    store: &S,
    ctx: &RunContext,
    run_id: &str,
    origin: &str,
    reason: &str,
) -> Result<Vec<Event>> {
    let run_ctx = ctx.for_run(run_id, ctx.session_id().map(str::to_string));
    let cancelled = Payload::RunCancelled(RunCancelled {
        reason: Some(reason.to_string()),
    });
    Ok(store
        .append_if_open(&run_ctx, vec![cancelled], origin)
        .await?
        .into_stored()
        .unwrap_or_default())
}

fn started_or_held(
    ctx: &RunContext,
    held_by: Option<String>,
    overridden: Vec<Event>,
    event: Option<Event>,
    ended: Vec<Event>,
) -> Result<Claimed> {
    if let Some(held_by) = held_by {
        return Ok(Claimed::Held { held_by });
    }
    // The port returns the opening event whenever the claim wins (guarantee `claim.atomic`);
    // an adapter that does not is broken, not busy.
    let event = event
        .ok_or_else(|| Error::corrupt(ctx.log_key(), "the claim won but returned no event"))?;
    Ok(Claimed::Started {
        event,
        overridden,
        ended,
    })
}

/// Starts the first waiting run of the log of `ctx` if the session is free: no fresh open run
/// holds it (guarantee `claim.enqueue`). Answers the run it started, or `None` when the line is
/// empty or the session is held.
///
/// Call it after a run of the session ended (the gateway does after every append that ends
/// one) and while a run waits ([`turn`] does); any number of callers may run it at once, and
/// each waiting run starts once.
pub async fn hand_off<S: EventStore + ?Sized>(
    store: &S,
    ctx: &RunContext,
) -> Result<Option<HandedOff>> {
    if ctx.session_id().is_none() {
        return Ok(None);
    }
    // Each round removes a head or stops, so the line's bound bounds the rounds.
    for _ in 0..=MAX_LINE {
        let Some(head) = store.line_read(ctx, 1).await?.into_iter().next() else {
            return Ok(None);
        };
        let head_ctx = ctx.for_run(head.run_id.clone(), ctx.session_id().map(str::to_string));
        match store
            .claim_start(
                &head_ctx,
                head.opening.clone(),
                &head.origin,
                head.stale_after,
            )
            .await
        {
            Ok((claim, Some(event))) if claim.won() => {
                store.line_remove(&head_ctx, &head.run_id).await?;
                return Ok(Some(HandedOff {
                    event,
                    overridden: claim.overridden,
                }));
            }
            // The head started already (a hand-off died before removing it): take it out and
            // look at the next.
            Ok((claim, _)) if claim.held_by.as_deref() == Some(head.run_id.as_str()) => {
                store.line_remove(&head_ctx, &head.run_id).await?;
            }
            Err(Error::AlreadyExists { .. }) => {
                store.line_remove(&head_ctx, &head.run_id).await?;
            }
            Ok(_) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Where the run of `ctx` stands after a hand-off: waiting (with its place), started, or not
/// waiting. Also answers what the hand-off started, for the caller to publish. A waiting
/// caller polls this; it moves the line itself when the run before it ended without a
/// hand-off (its process died, or a seed process ended it).
pub async fn turn<S: EventStore + ?Sized>(
    store: &S,
    ctx: &RunContext,
) -> Result<(Turn, Option<HandedOff>)> {
    let handed_off = hand_off(store, ctx).await?;
    if let Some(h) = &handed_off
        && h.event.run_id == ctx.run_id()
    {
        let event = h.event.clone();
        return Ok((Turn::Started { event }, handed_off));
    }
    Ok((turn_of(store, ctx).await?, handed_off))
}

async fn turn_of<S: EventStore + ?Sized>(store: &S, ctx: &RunContext) -> Result<Turn> {
    let line = store.line_read(ctx, MAX_LINE).await?;
    if let Some(at) = line.iter().position(|r| r.run_id == ctx.run_id()) {
        return Ok(Turn::Waiting {
            position: at as u64 + 1,
        });
    }
    let first = store.read_run(ctx, 0).await?.into_iter().next();
    Ok(match first {
        Some(event) if event.kind() == "run.started" => Turn::Started { event },
        _ => Turn::NotWaiting,
    })
}

/// Whether a run with status `status` holds nothing any more, so its session's line may move.
pub fn frees_session(status: RunStatus) -> bool {
    status.is_terminal()
}
