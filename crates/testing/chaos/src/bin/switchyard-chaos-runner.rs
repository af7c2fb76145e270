//! `switchyard-chaos-runner URL PREFIX SESSION RUN STALE_MS LOG HOLD_AT`: one run that waits its
//! turn in a session's line (ADR 0394), as a client of the event store. The fault suite's
//! enqueue-kill check (`tests/enqueue_kill.rs`) starts one per run and SIGKILLs some of them.
//!
//! `URL` is `sqlite://PATH`, `redis://…` (keys under `PREFIX`) or `postgres://…?schema=NAME`.
//! The run `RUN` of session `SESSION` claims with `enqueue` and a `stale_after` of `STALE_MS`
//! milliseconds, polls `turn` until it has started, works (appends a few events through
//! `append_if_open`), ends with `run.completed` through `append_if_open` and hands off, as the
//! gateway's run service does after an ending append. It exits 0 after the hand-off.
//!
//! Each step appends one line to `LOG` (one `write` on a file opened for appending, so every
//! line written before a kill is there after it): `queued PLACE` when the claim answered
//! `Queued` (`claimed started` when it started at once), then `started`, `working`, `ended` and
//! `handed`. `HOLD_AT` (`none`, `queued`, `working` or `ended`) names the step after which the
//! process stops doing anything: the check waits for that line and kills it there, so the kill
//! lands at a known point however slow the machine is.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use switchyard_chaos::children::{completed, opening};
use switchyard_core::event::{MessageText, Payload};
use switchyard_core::store::{Claimed, Multitask, Turn};
use switchyard_core::{EventStore, RunContext};

const USAGE: &str =
    "usage: switchyard-chaos-runner URL PREFIX SESSION RUN STALE_MS LOG none|queued|working|ended";
const ORIGIN: &str = "chaos-runner";
/// How often a waiting run asks for its turn.
const POLL: Duration = Duration::from_millis(20);
/// Events a started run appends before it ends, and the pause between them: short beside any
/// `stale_after` the check uses, so a live run never looks stale.
const WORK_EVENTS: usize = 3;
const WORK_PAUSE: Duration = Duration::from_millis(10);

/// The step after which the process stops, for the check to kill it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldAt {
    None,
    Queued,
    Working,
    Ended,
}

impl HoldAt {
    fn parse(s: &str) -> Option<HoldAt> {
        match s {
            "none" => Some(HoldAt::None),
            "queued" => Some(HoldAt::Queued),
            "working" => Some(HoldAt::Working),
            "ended" => Some(HoldAt::Ended),
            _ => None,
        }
    }
}

/// Appends one line to the step log, in one `write`.
struct StepLog(std::fs::File);

impl StepLog {
    fn step(&mut self, line: &str) -> Result<(), String> {
        self.0
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("step log: {e}"))
    }

    /// Logs `line`, then stops for good when the check is to kill the process at this step.
    async fn step_or_hold(
        &mut self,
        line: &str,
        here: HoldAt,
        hold_at: HoldAt,
    ) -> Result<(), String> {
        self.step(line)?;
        if here == hold_at {
            // Nothing more happens in this process: the check kills it here.
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// An append through `append_if_open` that must land: the run is ours and open, so a refusal
/// means something ended it, which nothing in this check should do.
async fn append_open(
    store: &Arc<dyn EventStore>,
    ctx: &RunContext,
    payload: Payload,
) -> Result<(), String> {
    let appended = store
        .append_if_open(ctx, vec![payload], ORIGIN)
        .await
        .map_err(|e| format!("append: {e}"))?;
    match appended.not_open() {
        None => Ok(()),
        Some(status) => Err(format!("{} is {status:?}, not open", ctx.run_id())),
    }
}

async fn one_turn(
    store: &Arc<dyn EventStore>,
    ctx: &RunContext,
    stale_after: Duration,
    log: &mut StepLog,
    hold_at: HoldAt,
) -> Result<(), String> {
    let claimed = store
        .claim(
            ctx,
            opening("one turn"),
            ORIGIN,
            stale_after,
            Multitask::Enqueue,
        )
        .await
        .map_err(|e| format!("claim: {e}"))?;
    match claimed {
        Claimed::Queued { position, .. } => {
            log.step_or_hold(&format!("queued {position}"), HoldAt::Queued, hold_at)
                .await?;
            loop {
                match store.turn(ctx).await.map_err(|e| format!("turn: {e}"))?.0 {
                    Turn::Started { .. } => break,
                    Turn::Waiting { .. } => tokio::time::sleep(POLL).await,
                    Turn::NotWaiting => {
                        return Err(format!("{} is neither waiting nor started", ctx.run_id()));
                    }
                }
            }
        }
        Claimed::Started { .. } => log.step("claimed started")?,
        Claimed::Held { held_by } => {
            return Err(format!("an enqueue claim was refused, held by {held_by}"));
        }
    }
    log.step("started")?;
    for i in 0..WORK_EVENTS {
        let delta = Payload::TextDelta(MessageText {
            message_id: "m".into(),
            text: format!("part {i}"),
        });
        append_open(store, ctx, delta).await?;
        if i == 0 {
            log.step_or_hold("working", HoldAt::Working, hold_at)
                .await?;
        }
        tokio::time::sleep(WORK_PAUSE).await;
    }
    append_open(store, ctx, completed()).await?;
    log.step_or_hold("ended", HoldAt::Ended, hold_at).await?;
    store
        .hand_off(ctx)
        .await
        .map_err(|e| format!("hand_off: {e}"))?;
    log.step("handed")
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, prefix, session, run, stale_ms, log_path, hold_at] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(stale_ms) = stale_ms.parse::<u64>() else {
        eprintln!("STALE_MS must be milliseconds, not {stale_ms:?}; {USAGE}");
        return ExitCode::from(2);
    };
    let Some(hold_at) = HoldAt::parse(hold_at) else {
        eprintln!("unknown HOLD_AT {hold_at:?}; {USAGE}");
        return ExitCode::from(2);
    };
    let mut log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
    {
        Ok(f) => StepLog(f),
        Err(e) => {
            eprintln!("cannot open {log_path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let store = match switchyard_chaos::children::open_event_store(url, prefix).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot open {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ctx = RunContext::new(run.as_str()).with_session(session.as_str());
    match one_turn(
        &store,
        &ctx,
        Duration::from_millis(stale_ms),
        &mut log,
        hold_at,
    )
    .await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-chaos-runner {run}: {e}");
            ExitCode::FAILURE
        }
    }
}
