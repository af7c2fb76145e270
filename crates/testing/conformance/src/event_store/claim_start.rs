//! Guarantees `claim.atomic` and `claim.bounded_cost`: `claim_start`, the one-open-run-per-session
//! claim.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::TimeDelta;
use switchyard_core::RunStatus;
use switchyard_core::event::{ErrorCode, Payload, RunFailed, RunPaused};

use crate::event_store::Factory;
use crate::event_store::common::{
    HOUR, ORIGIN, completed, interrupted, manual_clock, session_ctx, start_run, started, store,
    store_with_clock, text,
};
use crate::harness::unique_id;

/// Guarantee `claim.atomic`: a claim on a free log wins and appends the opening event.
pub async fn claim_start_on_free_log_wins(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r1");
    let (claim, event) = store
        .claim_start(&ctx, started(), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won());
    assert!(claim.overridden.is_empty());
    let event = event.expect("the opening event");
    assert_eq!(
        (event.kind(), event.seq, event.run_id.as_str()),
        ("run.started", 0, "r1")
    );
    assert_eq!(store.read(&ctx, 0, None).await.expect("read"), vec![event]);
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Running
    );
}

/// Guarantee `claim.atomic`: a fresh open run refuses the claim, and nothing is written.
pub async fn claim_start_refused_by_fresh_open_run(factory: Factory<'_>) {
    let store = store(factory).await;
    let first = session_ctx("s", "r1");
    start_run(&*store, &first).await;
    let second = session_ctx("s", "r2");
    let (claim, event) = store
        .claim_start(&second, started(), ORIGIN, HOUR)
        .await
        .expect("losing is data, not an error");
    assert_eq!(claim.held_by.as_deref(), Some("r1"));
    assert!(claim.overridden.is_empty());
    assert!(event.is_none());
    assert_eq!(store.read(&first, 0, None).await.expect("read").len(), 1);
    assert_eq!(
        store.run_status(&second).await.expect("status"),
        RunStatus::Pending
    );
}

/// Guarantee `claim.atomic`: with several fresh open runs, the holder is the smallest run id.
pub async fn claim_start_names_holder_deterministically(factory: Factory<'_>) {
    let store = store(factory).await;
    for run in ["r-c", "r-a", "r-b"] {
        // Open runs appended directly, as a seed process or a takeover could leave them.
        let ctx = session_ctx("s", run);
        store
            .append(&ctx, vec![Payload::RunStarted(started())], ORIGIN)
            .await
            .expect("append");
    }
    for _ in 0..3 {
        let (claim, _) = store
            .claim_start(&session_ctx("s", "new"), started(), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert_eq!(claim.held_by.as_deref(), Some("r-a"));
    }
}

/// Guarantee `claim.atomic`: stale open runs are stepped over and reported with their last event.
pub async fn claim_start_steps_over_stale_runs(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = store_with_clock(factory, clock.clone()).await;
    let b = session_ctx("s", "r-b");
    let a = session_ctx("s", "r-a");
    store
        .append(&b, vec![Payload::RunStarted(started()), text(1)], ORIGIN)
        .await
        .expect("append");
    store
        .append(&a, vec![Payload::RunStarted(started())], ORIGIN)
        .await
        .expect("append");
    clock.advance(TimeDelta::seconds(10));
    let tail_a = store
        .append(&a, vec![interrupted()], ORIGIN)
        .await
        .expect("append");
    clock.advance(TimeDelta::hours(2));
    let (claim, event) = store
        .claim_start(&session_ctx("s", "r-new"), started(), ORIGIN, HOUR)
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
    assert_eq!(store.read_run(&b, 0).await.expect("read_run").len(), 2);
    assert_eq!(
        store.run_status(&a).await.expect("status"),
        RunStatus::WaitingHuman
    );
}

/// Guarantee `claim.atomic`: `ts == stale_before` is stale; one millisecond later it is fresh.
pub async fn claim_start_stale_edge_is_strict(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = store_with_clock(factory, clock.clone()).await;
    let stale_after = Duration::from_secs(60);
    start_run(&*store, &session_ctx("s", "old")).await;
    clock.advance(TimeDelta::seconds(60) - TimeDelta::milliseconds(1));
    let (claim, _) = store
        .claim_start(&session_ctx("s", "early"), started(), ORIGIN, stale_after)
        .await
        .expect("claim_start");
    assert_eq!(
        claim.held_by.as_deref(),
        Some("old"),
        "ts > stale_before is fresh"
    );
    clock.advance(TimeDelta::milliseconds(1));
    let (claim, event) = store
        .claim_start(&session_ctx("s", "exact"), started(), ORIGIN, stale_after)
        .await
        .expect("claim_start");
    assert!(claim.won(), "ts == stale_before is stale: {claim:?}");
    assert_eq!(claim.overridden.len(), 1);
    assert_eq!(claim.overridden[0].run_id, "old");
    assert!(event.is_some());
}

/// Guarantee `claim.atomic`: completed, failed, cancelled and pending runs hold nothing.
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
        store.append(&ctx, vec![end], ORIGIN).await.expect("append");
    }
    // A pending run: events, but no lifecycle event.
    store
        .append(&session_ctx("s", "pending"), vec![text(0)], ORIGIN)
        .await
        .expect("append");
    let (claim, event) = store
        .claim_start(&session_ctx("s", "next"), started(), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won(), "{claim:?}");
    assert!(
        claim.overridden.is_empty(),
        "closed runs are not overridden"
    );
    assert!(event.is_some());
}

/// Guarantee `claim.atomic`: paused and waiting runs are open and hold the session while fresh.
pub async fn claim_start_suspended_runs_hold_until_stale(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = store_with_clock(factory, clock.clone()).await;
    let waiting = session_ctx("s1", "waiting");
    start_run(&*store, &waiting).await;
    store
        .append(&waiting, vec![interrupted()], ORIGIN)
        .await
        .expect("append");
    let paused = session_ctx("s2", "paused");
    start_run(&*store, &paused).await;
    store
        .append(
            &paused,
            vec![Payload::RunPaused(RunPaused { reason: None })],
            ORIGIN,
        )
        .await
        .expect("append");
    for (log, holder) in [("s1", "waiting"), ("s2", "paused")] {
        let (claim, _) = store
            .claim_start(&session_ctx(log, "next"), started(), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert_eq!(claim.held_by.as_deref(), Some(holder));
    }
    clock.advance(TimeDelta::hours(1));
    for (log, holder) in [("s1", "waiting"), ("s2", "paused")] {
        let (claim, _) = store
            .claim_start(&session_ctx(log, "next"), started(), ORIGIN, HOUR)
            .await
            .expect("claim_start");
        assert!(claim.won());
        assert_eq!(claim.overridden[0].run_id, holder);
    }
}

/// Guarantee `claim.bounded_cost`: a long closed history changes no outcome (its cost is measured
/// by the benchmark).
pub async fn claim_start_with_long_closed_history(factory: Factory<'_>) {
    let store = store(factory).await;
    for i in 0..200 {
        let ctx = session_ctx("s", &format!("closed-{i:03}"));
        start_run(&*store, &ctx).await;
        store
            .append(&ctx, vec![completed()], ORIGIN)
            .await
            .expect("append");
    }
    let open = session_ctx("s", "open");
    start_run(&*store, &open).await;
    let (claim, _) = store
        .claim_start(&session_ctx("s", "late"), started(), ORIGIN, HOUR)
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

/// Guarantee `claim.atomic`: of 64 concurrent claims on one free log, exactly one wins.
pub async fn claim_start_concurrent_one_winner(factory: Factory<'_>) {
    let store = store(factory).await;
    let session = unique_id("session");
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            let session = session.clone();
            tokio::spawn(async move {
                let ctx = session_ctx(&session, &format!("r{i:02}"));
                store.claim_start(&ctx, started(), ORIGIN, HOUR).await
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
    assert_eq!(store.read(&ctx, 0, None).await.expect("read").len(), 1);
}
