//! The `EventStore` suite: one case per guarantee of [`EventStore`], run on every adapter.
//!
//! ```ignore
//! async fn factory(clock: Option<Arc<dyn Clock>>) -> EventStoreFixture { /* fresh store */ }
//! switchyard_conformance::event_store_suite!(factory);             // memory
//! switchyard_conformance::event_store_suite!(factory, corruptible); // adapters with raw storage
//! ```
//! The factory gets `Some(clock)` when a case needs to pin time (stale edges, timestamps) and `None`
//! when the store should use its own clock.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, TimeZone, Utc};
use futures::future::BoxFuture;
use switchyard_core::event::{
    Block, ControlRequested, ControlVerb, ErrorCode, InterruptReason, InvocableKind, MessageText,
    Payload, RunCompleted, RunFailed, RunInterrupted, RunPaused, RunResumed, RunStarted,
    StatusReported, Usage,
};
use switchyard_core::{Clock, Error, EventStore, ManualClock, RunContext, RunStatus};

use crate::harness::unique_id;

mod limits;
pub use limits::{claim_start_huge_stale_after, claim_start_refuses_existing_run_id};

/// What a case gets from an adapter's factory.
pub struct EventStoreFixture {
    /// A fresh store (its own prefix, file or instance).
    pub store: Arc<dyn EventStore>,
    /// Writes one undecodable record into the adapter's storage, bypassing validation. Only for
    /// adapters whose storage can hold one (`event_store_suite!(factory, corruptible)`).
    pub corrupt: Option<CorruptFn>,
}

impl std::fmt::Debug for EventStoreFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStoreFixture")
            .field("store", &self.store)
            .field("corrupt", &self.corrupt.is_some())
            .finish()
    }
}

/// See [`EventStoreFixture::corrupt`].
pub type CorruptFn = Arc<dyn Fn(CorruptRecord) -> BoxFuture<'static, ()> + Send + Sync>;

/// Where to put the corrupt record.
#[derive(Debug, Clone)]
pub struct CorruptRecord {
    /// The namespace key (`""` for none).
    pub namespace_key: String,
    /// The log.
    pub log_key: String,
    /// The run the record claims to belong to.
    pub run_id: String,
}

/// The factory every case is given.
pub type Factory<'a> =
    &'a (dyn Fn(Option<Arc<dyn Clock>>) -> BoxFuture<'static, EventStoreFixture> + Send + Sync);

/// Stamps out one `#[tokio::test]` per guarantee for an adapter factory
/// (`async fn(Option<Arc<dyn Clock>>) -> EventStoreFixture`). Add `corruptible` when the adapter's
/// fixture can write a corrupt record.
#[macro_export]
macro_rules! event_store_suite {
    ($factory:path) => {
        $crate::event_store_suite!(@cases $factory;
            dense_seqs_from_zero_per_run,
            batch_shares_one_store_timestamp,
            store_clock_stamps_ts,
            empty_batch_returns_nothing,
            invalid_payload_writes_nothing,
            envelope_comes_from_context,
            read_pages_by_offset_and_limit,
            read_refuses_negative_limit,
            read_run_from_seq,
            isolation_with_hostile_ids,
            claim_start_on_free_log_wins,
            claim_start_refused_by_fresh_open_run,
            claim_start_names_holder_deterministically,
            claim_start_steps_over_stale_runs,
            claim_start_stale_edge_is_strict,
            claim_start_terminal_and_pending_runs_hold_nothing,
            claim_start_suspended_runs_hold_until_stale,
            claim_start_with_long_closed_history,
            claim_start_concurrent_one_winner,
            claim_resume_waiting_or_paused_only,
            claim_resume_refuses_other_run_id,
            claim_resume_concurrent_exactly_once,
            list_runs_by_value,
            run_status_folds_and_unknown_is_pending,
            concurrent_appenders_one_run_dense,
            claim_start_huge_stale_after,
            claim_start_refuses_existing_run_id,
        );
    };
    ($factory:path, corruptible) => {
        $crate::event_store_suite!($factory);
        $crate::event_store_suite!(@cases $factory; corrupt_record_is_typed_and_contained,);
    };
    (@cases $factory:path; $($case:ident),+ $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                $crate::event_store::$case(&|clock| ::std::boxed::Box::pin($factory(clock))).await;
            }
        )+
    };
}

const ORIGIN: &str = "helper";
const HOUR: Duration = Duration::from_secs(3600);

fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn text(n: usize) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("chunk {n}"),
    })
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: Some(0.25),
        },
    })
}

fn interrupted() -> Payload {
    Payload::RunInterrupted(RunInterrupted {
        interrupt_id: "i1".into(),
        reason: InterruptReason::Human,
        payload: Default::default(),
        thread_id: None,
        expected_resume: None,
    })
}

fn resumed() -> RunResumed {
    RunResumed {
        reason: Some("answered".into()),
        value: Some(vec![Block::text("yes")]),
    }
}

fn session_ctx(session: &str, run: &str) -> RunContext {
    RunContext::new(run).with_session(session)
}

/// A clock standing at a millisecond-aligned instant, so every backend's precision keeps it.
fn manual_clock() -> Arc<ManualClock> {
    let start = Utc
        .with_ymd_and_hms(2030, 1, 2, 3, 4, 5)
        .single()
        .expect("valid date")
        + TimeDelta::milliseconds(678);
    Arc::new(ManualClock::new(start))
}

async fn fixture(factory: Factory<'_>) -> EventStoreFixture {
    factory(None).await
}

async fn store(factory: Factory<'_>) -> Arc<dyn EventStore> {
    fixture(factory).await.store
}

async fn start_run(store: &dyn EventStore, ctx: &RunContext) {
    let (claim, event) = store
        .claim_start(ctx.log_key(), started(), ctx, ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(
        claim.won(),
        "setup claim for {} lost: {claim:?}",
        ctx.run_id()
    );
    assert!(event.is_some());
}

/// Guarantee 1: seqs are 0, 1, 2, … per run, across batches, independent between runs.
pub async fn dense_seqs_from_zero_per_run(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "run-a");
    let b = session_ctx("s", "run-b");
    let first = store
        .append("s", vec![text(0), text(1)], &a, ORIGIN)
        .await
        .expect("append");
    let other = store
        .append("s", vec![text(0)], &b, ORIGIN)
        .await
        .expect("append");
    let second = store
        .append("s", vec![text(2), text(3), text(4)], &a, ORIGIN)
        .await
        .expect("append");
    let seqs: Vec<u64> = first.iter().chain(&second).map(|e| e.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_eq!(other[0].seq, 0, "another run starts at 0");
    let stored: Vec<u64> = store
        .read_run("s", "run-a", &a, 0)
        .await
        .expect("read_run")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored, vec![0, 1, 2, 3, 4]);
}

/// Guarantee 2: one `ts` for a whole batch.
pub async fn batch_shares_one_store_timestamp(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("solo");
    let events = store
        .append("solo", (0..20).map(text).collect(), &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(events.len(), 20);
    assert!(events.iter().all(|e| e.ts == events[0].ts), "{events:?}");
}

/// Guarantee 2: the store's clock stamps `ts`, not the caller's.
pub async fn store_clock_stamps_ts(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = factory(Some(clock.clone())).await.store;
    let ctx = RunContext::new("r");
    let events = store
        .append("r", vec![text(0)], &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(events[0].ts, clock.now().fixed_offset());
    clock.advance(TimeDelta::seconds(90));
    let later = store
        .append("r", vec![text(1)], &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(later[0].ts, clock.now().fixed_offset());
    let stored = store.read_run("r", "r", &ctx, 0).await.expect("read_run");
    assert_eq!(
        stored[1].ts,
        clock.now().fixed_offset(),
        "the stored ts is the stamped one"
    );
}

/// Guarantee 3: an empty batch returns `[]` and writes nothing.
pub async fn empty_batch_returns_nothing(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    assert!(
        store
            .append("r", vec![], &ctx, ORIGIN)
            .await
            .expect("append")
            .is_empty()
    );
    assert!(
        store
            .read("r", &ctx, 0, None)
            .await
            .expect("read")
            .is_empty()
    );
    let next = store
        .append("r", vec![text(0)], &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(next[0].seq, 0, "an empty batch consumes no seq");
}

/// Guarantees 3 and 4: a batch with one invalid payload is refused whole, naming the field.
pub async fn invalid_payload_writes_nothing(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    let bad = Payload::StatusReported(StatusReported {
        message: String::new(),
    });
    let err = store
        .append("r", vec![text(0), bad], &ctx, ORIGIN)
        .await
        .expect_err("an empty status message is invalid");
    match err {
        Error::InvalidInput { field, .. } => assert_eq!(field, "payload.message"),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    let nan = Payload::RunCompleted(RunCompleted {
        output: vec![],
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            usd: Some(f64::NAN),
        },
    });
    assert!(matches!(
        store.append("r", vec![nan], &ctx, ORIGIN).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(
        store
            .read("r", &ctx, 0, None)
            .await
            .expect("read")
            .is_empty()
    );
}

/// Guarantee 5: the envelope is filled from the context and the origin.
pub async fn envelope_comes_from_context(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("run-1")
        .with_session("sess-1")
        .with_namespace("acme")
        .expect("namespace");
    let events = store
        .append("sess-1", vec![text(0)], &ctx, "planner")
        .await
        .expect("append");
    let e = &events[0];
    assert_eq!(e.run_id, "run-1");
    assert_eq!(e.session_id.as_deref(), Some("sess-1"));
    assert_eq!(e.namespace.as_deref(), Some("acme"));
    assert_eq!(e.origin, "planner");
    assert_eq!(e.kind(), "text.delta");
    let stored = store.read("sess-1", &ctx, 0, None).await.expect("read");
    assert_eq!(stored, events, "what is read back is what was returned");
    let bare = RunContext::new("solo");
    let solo = store
        .append("solo", vec![text(0)], &bare, ORIGIN)
        .await
        .expect("append");
    assert_eq!(solo[0].session_id, None);
    assert_eq!(solo[0].namespace, None);
}

/// Guarantee 6: `read` pages in append order by event offset.
pub async fn read_pages_by_offset_and_limit(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "a");
    let b = session_ctx("s", "b");
    // Interleave two runs so offsets count events of the log, not seqs of a run.
    for i in 0..3 {
        store
            .append("s", vec![text(i)], &a, ORIGIN)
            .await
            .expect("append");
        store
            .append("s", vec![text(i)], &b, ORIGIN)
            .await
            .expect("append");
    }
    let all = store.read("s", &a, 0, None).await.expect("read");
    let order: Vec<(String, u64)> = all.iter().map(|e| (e.run_id.clone(), e.seq)).collect();
    let expected: Vec<(String, u64)> = (0..3)
        .flat_map(|i| [("a".to_string(), i), ("b".to_string(), i)])
        .collect();
    assert_eq!(order, expected);
    let page = store.read("s", &a, 2, Some(3)).await.expect("read");
    assert_eq!(page, all[2..5].to_vec());
    assert!(
        store
            .read("s", &a, 0, Some(0))
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(
        store.read("s", &a, -5, Some(1)).await.expect("read"),
        all[..1].to_vec()
    );
    assert!(
        store
            .read("s", &a, 99, None)
            .await
            .expect("read")
            .is_empty()
    );
    assert!(
        store
            .read("nothing-here", &a, 0, None)
            .await
            .expect("read")
            .is_empty()
    );
}

/// Guarantee 6: a negative limit is invalid input.
pub async fn read_refuses_negative_limit(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    store
        .append("r", vec![text(0)], &ctx, ORIGIN)
        .await
        .expect("append");
    assert!(matches!(
        store.read("r", &ctx, 0, Some(-1)).await,
        Err(Error::InvalidInput { .. })
    ));
}

/// Guarantee 7: `read_run` returns one run's events from a seq.
pub async fn read_run_from_seq(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "a");
    let b = session_ctx("s", "b");
    store
        .append("s", (0..5).map(text).collect(), &a, ORIGIN)
        .await
        .expect("append");
    store
        .append("s", (0..5).map(text).collect(), &b, ORIGIN)
        .await
        .expect("append");
    store
        .append("s", (5..8).map(text).collect(), &a, ORIGIN)
        .await
        .expect("append");
    let tail = store.read_run("s", "a", &a, 4).await.expect("read_run");
    assert_eq!(
        tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![4, 5, 6, 7]
    );
    assert!(tail.iter().all(|e| e.run_id == "a"));
    assert!(
        store
            .read_run("s", "a", &a, 8)
            .await
            .expect("read_run")
            .is_empty()
    );
    assert_eq!(
        store
            .read_run("s", "a", &a, 0)
            .await
            .expect("read_run")
            .len(),
        8
    );
    assert!(
        store
            .read_run("s", "ghost", &a, 0)
            .await
            .expect("read_run")
            .is_empty()
    );
}

/// Guarantee 8: nothing leaks between namespaces, logs and runs, whatever the ids contain.
pub async fn isolation_with_hostile_ids(factory: Factory<'_>) {
    let store = store(factory).await;
    let long = "x".repeat(2_000);
    let ids = [
        "a:b",
        "a",
        "b:c",
        "%3A",
        ":",
        "{t}",
        "{",
        "}",
        "a/b",
        "a b",
        "é日本🦀",
        "%",
        &long,
    ];
    let mut written = Vec::new();
    for (i, ns) in ids.iter().enumerate() {
        for (j, log) in ids.iter().enumerate() {
            // Keep the cross product small but cover every id as namespace and as log.
            if (i + j) % 4 != 0 {
                continue;
            }
            let ctx = RunContext::new(format!("{log}#run"))
                .with_session(*log)
                .with_namespace(*ns)
                .expect("namespace");
            let events = store
                .append(log, vec![text(i * 100 + j)], &ctx, ORIGIN)
                .await
                .expect("append");
            store
                .claim_start(
                    log,
                    started(),
                    &ctx.for_run(format!("{log}#open"), Some(log.to_string())),
                    ORIGIN,
                    HOUR,
                )
                .await
                .expect("claim_start");
            written.push((ctx, events[0].clone()));
        }
    }
    for (ctx, event) in &written {
        let log = store.read(ctx.log_key(), ctx, 0, None).await.expect("read");
        assert_eq!(
            log.len(),
            2,
            "log {:?} in {:?}",
            ctx.log_key(),
            ctx.namespace()
        );
        assert_eq!(&log[0], event);
        let run = store
            .read_run(ctx.log_key(), ctx.run_id(), ctx, 0)
            .await
            .expect("read_run");
        assert_eq!(run, vec![event.clone()]);
        let runs = store.list_runs(ctx, None).await.expect("list_runs");
        assert!(
            runs.iter().all(|r| ids.iter().any(|id| r.log_key == *id)),
            "{runs:?}"
        );
        let own: Vec<_> = runs.iter().filter(|r| r.log_key == ctx.log_key()).collect();
        assert_eq!(
            own.len(),
            1,
            "one open run per log in {:?}: {runs:?}",
            ctx.namespace()
        );
    }
    // No namespace is its own namespace, distinct from every named one.
    let plain = RunContext::new("a:b#run").with_session("a:b");
    assert!(
        store
            .read("a:b", &plain, 0, None)
            .await
            .expect("read")
            .is_empty()
    );
}

/// Guarantee 9: a claim on a free log wins and appends the opening event.
pub async fn claim_start_on_free_log_wins(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r1");
    let (claim, event) = store
        .claim_start("s", started(), &ctx, ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won());
    assert!(claim.overridden.is_empty());
    let event = event.expect("the opening event");
    assert_eq!(
        (event.kind(), event.seq, event.run_id.as_str()),
        ("run.started", 0, "r1")
    );
    assert_eq!(
        store.read("s", &ctx, 0, None).await.expect("read"),
        vec![event]
    );
    assert_eq!(
        store.run_status("s", "r1", &ctx).await.expect("status"),
        RunStatus::Running
    );
}

/// Guarantee 9: a fresh open run refuses the claim, and nothing is written.
pub async fn claim_start_refused_by_fresh_open_run(factory: Factory<'_>) {
    let store = store(factory).await;
    let first = session_ctx("s", "r1");
    start_run(&*store, &first).await;
    let second = session_ctx("s", "r2");
    let (claim, event) = store
        .claim_start("s", started(), &second, ORIGIN, HOUR)
        .await
        .expect("losing is data, not an error");
    assert_eq!(claim.held_by.as_deref(), Some("r1"));
    assert!(claim.overridden.is_empty());
    assert!(event.is_none());
    assert_eq!(
        store.read("s", &first, 0, None).await.expect("read").len(),
        1
    );
    assert_eq!(
        store.run_status("s", "r2", &second).await.expect("status"),
        RunStatus::Pending
    );
}

/// Guarantee 9: with several fresh open runs, the holder is the smallest run id.
pub async fn claim_start_names_holder_deterministically(factory: Factory<'_>) {
    let store = store(factory).await;
    for run in ["r-c", "r-a", "r-b"] {
        // Open runs appended directly, as a seed process or a takeover could leave them.
        let ctx = session_ctx("s", run);
        store
            .append("s", vec![Payload::RunStarted(started())], &ctx, ORIGIN)
            .await
            .expect("append");
    }
    for _ in 0..3 {
        let (claim, _) = store
            .claim_start("s", started(), &session_ctx("s", "new"), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert_eq!(claim.held_by.as_deref(), Some("r-a"));
    }
}

/// Guarantee 9: stale open runs are stepped over and reported with their last event.
pub async fn claim_start_steps_over_stale_runs(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = factory(Some(clock.clone())).await.store;
    let b = session_ctx("s", "r-b");
    let a = session_ctx("s", "r-a");
    store
        .append(
            "s",
            vec![Payload::RunStarted(started()), text(1)],
            &b,
            ORIGIN,
        )
        .await
        .expect("append");
    store
        .append("s", vec![Payload::RunStarted(started())], &a, ORIGIN)
        .await
        .expect("append");
    clock.advance(TimeDelta::seconds(10));
    let tail_a = store
        .append("s", vec![interrupted()], &a, ORIGIN)
        .await
        .expect("append");
    clock.advance(TimeDelta::hours(2));
    let (claim, event) = store
        .claim_start("s", started(), &session_ctx("s", "r-new"), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won(), "{claim:?}");
    let tails: Vec<(String, u64, String)> = claim
        .overridden
        .iter()
        .map(|e| (e.run_id.clone(), e.seq, e.kind().to_string()))
        .collect();
    assert_eq!(
        tails,
        vec![
            ("r-a".to_string(), 1, "run.interrupted".to_string()),
            ("r-b".to_string(), 1, "text.delta".to_string()),
        ]
    );
    assert_eq!(claim.overridden[0], tail_a[0]);
    assert!(event.is_some());
    // The store wrote nothing for the stale runs: closing them is the caller's job.
    assert_eq!(
        store
            .read_run("s", "r-b", &b, 0)
            .await
            .expect("read_run")
            .len(),
        2
    );
    assert_eq!(
        store.run_status("s", "r-a", &a).await.expect("status"),
        RunStatus::WaitingHuman
    );
}

/// Guarantee 9: `ts == stale_before` is stale; one millisecond later it is fresh.
pub async fn claim_start_stale_edge_is_strict(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = factory(Some(clock.clone())).await.store;
    let stale_after = Duration::from_secs(60);
    start_run(&*store, &session_ctx("s", "old")).await;
    clock.advance(TimeDelta::seconds(60) - TimeDelta::milliseconds(1));
    let (claim, _) = store
        .claim_start(
            "s",
            started(),
            &session_ctx("s", "early"),
            ORIGIN,
            stale_after,
        )
        .await
        .expect("claim_start");
    assert_eq!(
        claim.held_by.as_deref(),
        Some("old"),
        "ts > stale_before is fresh"
    );
    clock.advance(TimeDelta::milliseconds(1));
    let (claim, event) = store
        .claim_start(
            "s",
            started(),
            &session_ctx("s", "exact"),
            ORIGIN,
            stale_after,
        )
        .await
        .expect("claim_start");
    assert!(claim.won(), "ts == stale_before is stale: {claim:?}");
    assert_eq!(claim.overridden.len(), 1);
    assert_eq!(claim.overridden[0].run_id, "old");
    assert!(event.is_some());
}

/// Guarantee 9: completed, failed, cancelled and pending runs hold nothing.
pub async fn claim_start_terminal_and_pending_runs_hold_nothing(factory: Factory<'_>) {
    let store = store(factory).await;
    let failed = Payload::RunFailed(RunFailed {
        error_code: ErrorCode::EngineError,
        message: "boom".into(),
        retryable: false,
    });
    let cancelled = Payload::RunCancelled(switchyard_core::event::RunCancelled { reason: None });
    for (run, end) in [
        ("done", completed()),
        ("failed", failed),
        ("cancelled", cancelled),
    ] {
        let ctx = session_ctx("s", run);
        start_run(&*store, &ctx).await;
        store
            .append("s", vec![end], &ctx, ORIGIN)
            .await
            .expect("append");
    }
    // A pending run: events, but no lifecycle event.
    store
        .append("s", vec![text(0)], &session_ctx("s", "pending"), ORIGIN)
        .await
        .expect("append");
    let (claim, event) = store
        .claim_start("s", started(), &session_ctx("s", "next"), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won(), "{claim:?}");
    assert!(
        claim.overridden.is_empty(),
        "closed runs are not overridden"
    );
    assert!(event.is_some());
}

/// Guarantee 9: paused and waiting runs are open and hold the session while fresh.
pub async fn claim_start_suspended_runs_hold_until_stale(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = factory(Some(clock.clone())).await.store;
    let waiting = session_ctx("s1", "waiting");
    start_run(&*store, &waiting).await;
    store
        .append("s1", vec![interrupted()], &waiting, ORIGIN)
        .await
        .expect("append");
    let paused = session_ctx("s2", "paused");
    start_run(&*store, &paused).await;
    store
        .append(
            "s2",
            vec![Payload::RunPaused(RunPaused { reason: None })],
            &paused,
            ORIGIN,
        )
        .await
        .expect("append");
    for (log, holder) in [("s1", "waiting"), ("s2", "paused")] {
        let (claim, _) = store
            .claim_start(log, started(), &session_ctx(log, "next"), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert_eq!(claim.held_by.as_deref(), Some(holder));
    }
    clock.advance(TimeDelta::hours(1));
    for (log, holder) in [("s1", "waiting"), ("s2", "paused")] {
        let (claim, _) = store
            .claim_start(log, started(), &session_ctx(log, "next"), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert!(claim.won());
        assert_eq!(claim.overridden[0].run_id, holder);
    }
}

/// Guarantee 10: a long closed history changes no outcome (its cost is measured by the benchmark).
pub async fn claim_start_with_long_closed_history(factory: Factory<'_>) {
    let store = store(factory).await;
    for i in 0..200 {
        let ctx = session_ctx("s", &format!("closed-{i:03}"));
        start_run(&*store, &ctx).await;
        store
            .append("s", vec![completed()], &ctx, ORIGIN)
            .await
            .expect("append");
    }
    let open = session_ctx("s", "open");
    start_run(&*store, &open).await;
    let (claim, _) = store
        .claim_start("s", started(), &session_ctx("s", "late"), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert_eq!(claim.held_by.as_deref(), Some("open"));
    let running = store
        .list_runs(&open, Some(RunStatus::Running))
        .await
        .expect("list_runs");
    assert_eq!(running.len(), 1);
    assert_eq!(
        store.list_runs(&open, None).await.expect("list_runs").len(),
        201
    );
}

/// Guarantee 9: of 64 concurrent claims on one free log, exactly one wins.
pub async fn claim_start_concurrent_one_winner(factory: Factory<'_>) {
    let store = store(factory).await;
    let session = unique_id("session");
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            let session = session.clone();
            tokio::spawn(async move {
                let ctx = session_ctx(&session, &format!("r{i:02}"));
                store
                    .claim_start(&session, started(), &ctx, ORIGIN, HOUR)
                    .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut holders = BTreeSet::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let (claim, event) = task.await.expect("join").expect("claim_start");
        match claim.held_by {
            None => winners.push((i, event.expect("a winner gets its event"))),
            Some(holder) => {
                assert!(event.is_none());
                holders.insert(holder);
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    let winner = format!("r{:02}", winners[0].0);
    assert!(
        holders.iter().all(|h| *h == winner),
        "losers name the winner: {holders:?}"
    );
    let ctx = session_ctx(&session, &winner);
    assert_eq!(
        store
            .read(&session, &ctx, 0, None)
            .await
            .expect("read")
            .len(),
        1
    );
}

/// Guarantee 11: only a waiting or paused run resumes.
pub async fn claim_resume_waiting_or_paused_only(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    assert!(
        store
            .claim_resume("s", "r", resumed(), &ctx, ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "unknown run"
    );
    start_run(&*store, &ctx).await;
    assert!(
        store
            .claim_resume("s", "r", resumed(), &ctx, ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "running"
    );
    store
        .append("s", vec![interrupted()], &ctx, ORIGIN)
        .await
        .expect("append");
    let event = store
        .claim_resume("s", "r", resumed(), &ctx, ORIGIN)
        .await
        .expect("resume")
        .expect("a waiting run resumes");
    assert_eq!((event.kind(), event.seq), ("run.resumed", 2));
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::Running
    );
    store
        .append(
            "s",
            vec![Payload::RunPaused(RunPaused { reason: None })],
            &ctx,
            ORIGIN,
        )
        .await
        .expect("append");
    assert!(
        store
            .claim_resume("s", "r", resumed(), &ctx, ORIGIN)
            .await
            .expect("resume")
            .is_some(),
        "paused resumes too"
    );
    store
        .append("s", vec![completed()], &ctx, ORIGIN)
        .await
        .expect("append");
    assert!(
        store
            .claim_resume("s", "r", resumed(), &ctx, ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "terminal"
    );
}

/// Guarantee 11: resuming another run than the context's is invalid input.
pub async fn claim_resume_refuses_other_run_id(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    start_run(&*store, &ctx).await;
    store
        .append("s", vec![interrupted()], &ctx, ORIGIN)
        .await
        .expect("append");
    assert!(matches!(
        store
            .claim_resume("s", "other", resumed(), &ctx, ORIGIN)
            .await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::WaitingHuman
    );
}

/// Guarantee 11: of concurrent resumes of one waiting run, exactly one gets the event.
pub async fn claim_resume_concurrent_exactly_once(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    start_run(&*store, &ctx).await;
    store
        .append("s", vec![interrupted()], &ctx, ORIGIN)
        .await
        .expect("append");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move { store.claim_resume("s", "r", resumed(), &ctx, ORIGIN).await })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        if task.await.expect("join").expect("resume").is_some() {
            won += 1;
        }
    }
    assert_eq!(won, 1);
    let kinds: Vec<String> = store
        .read_run("s", "r", &ctx, 0)
        .await
        .expect("read_run")
        .iter()
        .map(|e| e.kind().to_string())
        .collect();
    assert_eq!(kinds, ["run.started", "run.interrupted", "run.resumed"]);
}

/// Guarantee 12: every run with a lifecycle event, across logs, filtered by value.
pub async fn list_runs_by_value(factory: Factory<'_>) {
    let store = store(factory).await;
    let ns = |run: &str, session: &str| {
        RunContext::new(run)
            .with_session(session)
            .with_namespace("tenant")
            .expect("namespace")
    };
    let running = ns("running", "s1");
    start_run(&*store, &running).await;
    let waiting = ns("waiting", "s2");
    start_run(&*store, &waiting).await;
    store
        .append("s2", vec![interrupted()], &waiting, ORIGIN)
        .await
        .expect("append");
    let done = ns("done", "s1");
    store
        .append(
            "s1",
            vec![Payload::RunStarted(started()), completed()],
            &done,
            ORIGIN,
        )
        .await
        .expect("append");
    let solo = RunContext::new("solo")
        .with_namespace("tenant")
        .expect("namespace");
    start_run(&*store, &solo).await;
    // A run with no lifecycle event is not listed; another namespace is not listed.
    store
        .append("s3", vec![text(0)], &ns("quiet", "s3"), ORIGIN)
        .await
        .expect("append");
    start_run(&*store, &session_ctx("s1", "elsewhere")).await;
    let control = Payload::ControlRequested(ControlRequested {
        verb: ControlVerb::Cancel,
        reason: None,
    });
    store
        .append("s1", vec![control], &running, ORIGIN)
        .await
        .expect("append");

    let mut all: Vec<(String, String, RunStatus)> = store
        .list_runs(&solo, None)
        .await
        .expect("list_runs")
        .into_iter()
        .map(|r| (r.log_key, r.run_id, r.status))
        .collect();
    all.sort();
    assert_eq!(
        all,
        vec![
            ("s1".into(), "done".into(), RunStatus::Completed),
            ("s1".into(), "running".into(), RunStatus::Running),
            ("s2".into(), "waiting".into(), RunStatus::WaitingHuman),
            ("solo".into(), "solo".into(), RunStatus::Running),
        ]
    );
    let waiting_only = store
        .list_runs(&solo, Some(RunStatus::WaitingHuman))
        .await
        .expect("list_runs");
    assert_eq!(waiting_only.len(), 1);
    assert_eq!(waiting_only[0].run_id, "waiting");
    let parsed: RunStatus = "running".parse().expect("parse");
    assert_eq!(
        store
            .list_runs(&solo, Some(parsed))
            .await
            .expect("list_runs")
            .len(),
        2
    );
    assert!(
        store
            .list_runs(&solo, Some(RunStatus::Paused))
            .await
            .expect("list_runs")
            .is_empty()
    );
}

/// Guarantee 13: `run_status` folds the run; an unknown run is pending.
pub async fn run_status_folds_and_unknown_is_pending(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::Pending
    );
    store
        .append("s", vec![text(0)], &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::Pending
    );
    store
        .append(
            "s",
            vec![Payload::RunStarted(started()), completed(), text(1)],
            &ctx,
            ORIGIN,
        )
        .await
        .expect("append");
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::Completed
    );
    // No transition is validated: a late lifecycle event moves the status again.
    store
        .append("s", vec![Payload::RunResumed(resumed())], &ctx, ORIGIN)
        .await
        .expect("append");
    assert_eq!(
        store.run_status("s", "r", &ctx).await.expect("status"),
        RunStatus::Running
    );
}

/// Guarantee 1: 100 concurrent appenders to one run all succeed with dense, unique seqs.
pub async fn concurrent_appenders_one_run_dense(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "hot");
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move {
                store
                    .append("s", vec![text(i), text(i)], &ctx, ORIGIN)
                    .await
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for task in tasks {
        let events = task.await.expect("join").expect("no appender may fail");
        assert_eq!(events[1].seq, events[0].seq + 1, "a batch is contiguous");
        seqs.extend(events.iter().map(|e| e.seq));
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..200).collect::<Vec<u64>>());
    let stored = store.read_run("s", "hot", &ctx, 0).await.expect("read_run");
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..200).collect::<Vec<u64>>()
    );
}

/// Guarantee 14: a corrupt record is `Error::Corrupt` for its log only.
pub async fn corrupt_record_is_typed_and_contained(factory: Factory<'_>) {
    let fixture = fixture(factory).await;
    let corrupt = fixture
        .corrupt
        .clone()
        .expect("a `corruptible` fixture provides `corrupt`");
    let store = fixture.store;
    let bad = session_ctx("bad", "r");
    let good = session_ctx("good", "r");
    start_run(&*store, &bad).await;
    start_run(&*store, &good).await;
    corrupt(CorruptRecord {
        namespace_key: String::new(),
        log_key: "bad".into(),
        run_id: "r".into(),
    })
    .await;
    match store.read("bad", &bad, 0, None).await {
        Err(Error::Corrupt { location, .. }) => assert!(!location.is_empty()),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(
        store.read_run("bad", "r", &bad, 0).await,
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(
        store
            .read("good", &good, 0, None)
            .await
            .expect("other logs stay readable")
            .len(),
        1
    );
    assert_eq!(
        store.run_status("good", "r", &good).await.expect("status"),
        RunStatus::Running
    );
}
