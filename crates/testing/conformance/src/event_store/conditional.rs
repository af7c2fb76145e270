//! Guarantee `store.append_if_open`: `append_if_open`, an append that happens only while the run
//! is open, checked and written in one step (ADR 0365).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use switchyard_core::event::{
    ErrorCode, Payload, RunCancelled, RunFailed, RunPaused, StatusReported,
};
use switchyard_core::{Appended, Error, Event, EventStore, RunContext, RunStatus};

use crate::event_store::Factory;
use crate::event_store::common::{
    ORIGIN, completed, interrupted, resumed, session_ctx, start_run, store, text,
};

/// Conditional appends by concurrent tasks racing the terminal append.
const RACERS: usize = 8;
/// Events stored before the terminal append goes in, so it lands among running racers.
const BEFORE_TERMINAL: usize = 24;
/// A racer that is never refused gives up after this long (the case then fails).
const RACE_DEADLINE: Duration = Duration::from_secs(60);

async fn conditional(store: &dyn EventStore, ctx: &RunContext, payloads: Vec<Payload>) -> Appended {
    store
        .append_if_open(ctx, payloads, ORIGIN)
        .await
        .unwrap_or_else(|e| panic!("append_if_open on {}: {e}", ctx.run_id()))
}

async fn stored(store: &dyn EventStore, ctx: &RunContext, payloads: Vec<Payload>) -> Vec<Event> {
    match conditional(store, ctx, payloads).await {
        Appended::Stored { events, .. } => events,
        other => panic!(
            "{}: an open run must take the batch, got {other:?}",
            ctx.run_id()
        ),
    }
}

/// [`stored`], and the outcome names `status` as the run's status after the batch.
async fn stored_as(
    store: &dyn EventStore,
    ctx: &RunContext,
    payloads: Vec<Payload>,
    status: RunStatus,
) -> Vec<Event> {
    match conditional(store, ctx, payloads).await {
        Appended::Stored {
            events,
            status: after,
        } => {
            assert_eq!(
                after,
                status,
                "{}: the status after the batch",
                ctx.run_id()
            );
            events
        }
        other => panic!(
            "{}: an open run must take the batch, got {other:?}",
            ctx.run_id()
        ),
    }
}

async fn run_events(store: &dyn EventStore, ctx: &RunContext) -> Vec<Event> {
    store.read_run(ctx, 0).await.expect("read_run")
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

/// Refused with `status`, and the run's events (read back through the store) are unchanged.
async fn refused(store: &dyn EventStore, ctx: &RunContext, status: RunStatus) {
    let before = run_events(store, ctx).await;
    for batch in [vec![text(90)], vec![text(91), completed()], vec![]] {
        assert_eq!(
            conditional(store, ctx, batch).await,
            Appended::NotOpen(status),
            "{}: a {status} run refuses",
            ctx.run_id()
        );
    }
    assert_eq!(
        run_events(store, ctx).await,
        before,
        "{}: a refused append writes nothing",
        ctx.run_id()
    );
}

/// Guarantee `store.append_if_open`: running, paused and waiting runs take the batch with dense
/// seqs; pending and finished runs refuse it with their status and nothing is written; a batch
/// ending the run is stored and refuses the next one; of conditional appends racing a terminal
/// append, none is stored after the terminal event.
pub async fn append_if_open_only_while_open(factory: Factory<'_>) {
    let store = store(factory).await;
    let store = &*store;

    // Pending: never started, unknown, or with events but no lifecycle event.
    let unknown = session_ctx("s", "never-started");
    refused(store, &unknown, RunStatus::Pending).await;
    assert!(
        store
            .read(&unknown, 0, None)
            .await
            .expect("read")
            .is_empty(),
        "nothing reaches the log of a refused run"
    );
    let bare = session_ctx("s-bare", "no-lifecycle");
    store
        .append(&bare, vec![text(0), text(1)], ORIGIN)
        .await
        .expect("append");
    refused(store, &bare, RunStatus::Pending).await;

    // Running: dense seqs after run.started (seq 0), one ts per batch, the envelope.
    let ctx = RunContext::new("r")
        .with_session("s-open")
        .with_namespace("acme")
        .expect("namespace");
    start_run(store, &ctx).await;
    let first = stored(store, &ctx, vec![text(1), text(2)]).await;
    assert_eq!(seqs(&first), [1, 2]);
    assert_eq!(first[0].ts, first[1].ts, "one ts per batch");
    assert_eq!(
        (
            first[0].run_id.as_str(),
            first[0].session_id.as_deref(),
            first[0].namespace.as_deref(),
            first[0].origin.as_str()
        ),
        ("r", Some("s-open"), Some("acme"), ORIGIN)
    );
    // The same run id in another session is another run: pending.
    refused(store, &session_ctx("s-elsewhere", "r"), RunStatus::Pending).await;
    // An invalid payload is refused as by `append`, before anything is written.
    let bad = Payload::StatusReported(StatusReported {
        message: String::new(),
    });
    assert!(matches!(
        store.append_if_open(&ctx, vec![text(3), bad], ORIGIN).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        conditional(store, &ctx, vec![]).await,
        Appended::Stored {
            events: Vec::new(),
            status: RunStatus::Running
        },
        "an empty batch on an open run"
    );

    // Paused, then waiting for a human: still open.
    let paused = Payload::RunPaused(RunPaused { reason: None });
    let paused = stored_as(store, &ctx, vec![paused], RunStatus::Paused).await;
    assert_eq!(seqs(&paused), [3]);
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Paused
    );
    // A batch without a lifecycle event keeps the status the run had, and says so.
    let during_pause = stored_as(store, &ctx, vec![text(4)], RunStatus::Paused).await;
    assert_eq!(seqs(&during_pause), [4]);
    let waiting = stored_as(store, &ctx, vec![interrupted()], RunStatus::WaitingHuman).await;
    assert_eq!(seqs(&waiting), [5]);
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::WaitingHuman
    );
    let while_waiting =
        stored_as(store, &ctx, vec![text(6), text(7)], RunStatus::WaitingHuman).await;
    assert_eq!(seqs(&while_waiting), [6, 7]);
    store
        .claim_resume(&ctx, resumed(), ORIGIN)
        .await
        .expect("resume")
        .expect("a waiting run resumes");

    // A batch whose last event ends the run is stored; the next conditional append is refused.
    let ended = stored_as(
        store,
        &ctx,
        vec![text(9), completed()],
        RunStatus::Completed,
    )
    .await;
    assert_eq!(seqs(&ended), [9, 10]);
    refused(store, &ctx, RunStatus::Completed).await;
    let all = run_events(store, &ctx).await;
    assert_eq!(seqs(&all), (0..=10).collect::<Vec<_>>());
    assert_eq!(all.last().map(Event::kind), Some("run.completed"));

    // Failed and cancelled runs refuse too.
    let failed = session_ctx("s-failed", "f");
    start_run(store, &failed).await;
    let failure = Payload::RunFailed(RunFailed {
        error_code: ErrorCode::EngineError,
        message: "the tool broke".into(),
        retryable: false,
    });
    store
        .append(&failed, vec![failure], ORIGIN)
        .await
        .expect("append");
    refused(store, &failed, RunStatus::Failed).await;
    let cancelled = session_ctx("s-cancelled", "c");
    start_run(store, &cancelled).await;
    store
        .append(
            &cancelled,
            vec![Payload::RunCancelled(RunCancelled { reason: None })],
            ORIGIN,
        )
        .await
        .expect("append");
    refused(store, &cancelled, RunStatus::Cancelled).await;
    // The last lifecycle event wins: a finished run that `append` resumes is open again.
    store
        .append(&cancelled, vec![Payload::RunResumed(resumed())], ORIGIN)
        .await
        .expect("append");
    assert_eq!(seqs(&stored(store, &cancelled, vec![text(0)]).await), [3]);

    race_the_terminal_append(factory).await;
}

/// Conditional appenders race one terminal append: none of their events follows it.
async fn race_the_terminal_append(factory: Factory<'_>) {
    let store: Arc<dyn EventStore> = self::store(factory).await;
    let ctx = session_ctx("s-race", "hot");
    start_run(&*store, &ctx).await;
    let go = Arc::new(AtomicBool::new(false));
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            let (store, ctx, go) = (store.clone(), ctx.clone(), go.clone());
            tokio::spawn(async move {
                while !go.load(Ordering::Acquire) {
                    tokio::task::yield_now().await;
                }
                let mut written = Vec::new();
                let deadline = tokio::time::Instant::now() + RACE_DEADLINE;
                for call in 0.. {
                    if tokio::time::Instant::now() > deadline {
                        break;
                    }
                    match store
                        .append_if_open(&ctx, vec![text(i), text(call)], ORIGIN)
                        .await
                        .expect("append_if_open")
                    {
                        // A store whose calls never wait (memory) must still let the
                        // terminal appender's timer run.
                        Appended::Stored { events, .. } => {
                            written.extend(events);
                            tokio::task::yield_now().await;
                        }
                        Appended::NotOpen(status) => return (written, Some(status)),
                    }
                }
                (written, None)
            })
        })
        .collect();
    go.store(true, Ordering::Release);
    // Let the racers store some events first, so the terminal append lands among them.
    let waited = tokio::time::Instant::now();
    while store.read_run(&ctx, 0).await.expect("read_run").len() < BEFORE_TERMINAL
        && waited.elapsed() < RACE_DEADLINE / 2
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let terminal = store
        .append(&ctx, vec![completed()], ORIGIN)
        .await
        .expect("the terminal append")
        .pop()
        .expect("one event");
    let mut returned = Vec::new();
    for racer in racers {
        let (written, refused_by) = racer.await.expect("join");
        assert_eq!(
            refused_by,
            Some(RunStatus::Completed),
            "every racer ends refused by the completed run"
        );
        returned.extend(written);
    }
    for event in &returned {
        assert!(
            event.seq < terminal.seq,
            "a conditional append was stored at seq {} after the terminal event at seq {}",
            event.seq,
            terminal.seq
        );
    }
    let all = run_events(&*store, &ctx).await;
    assert_eq!(
        seqs(&all),
        (0..=terminal.seq).collect::<Vec<_>>(),
        "dense, and nothing after the terminal event"
    );
    assert_eq!(all.last(), Some(&terminal));
    assert_eq!(
        returned.len() as u64,
        terminal.seq - 1,
        "every stored event but run.started and the terminal one came from a racer"
    );
}
