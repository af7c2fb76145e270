//! Cases for the guarantees about hostile numbers and reused ids (15 and 16).

use std::time::Duration;

use chrono::TimeDelta;
use switchyard_core::event::{MessageText, Payload};
use switchyard_core::{Error, RunContext};

use super::Factory;
use super::common::{
    HOUR, ORIGIN, completed, manual_clock, session_ctx, start_run, started, store, store_with_clock,
};

/// Guarantee `claim.no_overflow`: a `stale_after` too large for the clock means "never stale" — a
/// claim behind an open run is refused, a claim on a free log wins, and nothing panics.
pub async fn claim_start_huge_stale_after(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = store_with_clock(factory, clock.clone()).await;
    start_run(&*store, &session_ctx("s", "old")).await;
    // Long after any reasonable staleness: only an absurd `stale_after` still keeps "old" fresh.
    clock.advance(TimeDelta::days(365 * 100));
    for stale_after in [
        Duration::from_secs(10_000_000_000_000),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ] {
        let (claim, event) = store
            .claim_start(&session_ctx("s", "new"), started(), ORIGIN, stale_after)
            .await
            .expect("a huge stale_after is not an error");
        assert_eq!(
            claim.held_by.as_deref(),
            Some("old"),
            "nothing is stale under {stale_after:?}"
        );
        assert!(event.is_none());
    }
    let (claim, event) = store
        .claim_start(
            &session_ctx("free", "first"),
            started(),
            ORIGIN,
            Duration::MAX,
        )
        .await
        .expect("claim on a free log");
    assert!(claim.won(), "{claim:?}");
    assert!(event.is_some());
}

/// Guarantee `claim.run_ids_unique`: a run id that has events in the log cannot be started again —
/// finished, open but stale, or pending — and nothing is written; other logs and namespaces may
/// reuse it.
pub async fn claim_start_refuses_existing_run_id(factory: Factory<'_>) {
    let store = store(factory).await;
    let done = session_ctx("s", "done");
    start_run(&*store, &done).await;
    store
        .append(&done, vec![completed()], ORIGIN)
        .await
        .expect("append");
    let pending = RunContext::new("pending");
    store
        .append(
            &pending,
            vec![Payload::TextDelta(MessageText {
                message_id: "m".into(),
                text: "orphan".into(),
            })],
            ORIGIN,
        )
        .await
        .expect("append");
    let stale = session_ctx("t", "stale");
    start_run(&*store, &stale).await;
    for (ctx, stale_after, before) in [
        (&done, HOUR, 2),
        (&pending, HOUR, 1),
        (&stale, Duration::ZERO, 1),
    ] {
        let got = store.claim_start(ctx, started(), ORIGIN, stale_after).await;
        match got {
            Err(Error::AlreadyExists { what, id }) => {
                assert_eq!((what, id.as_str()), ("run", ctx.run_id()));
            }
            other => panic!(
                "restarting {:?} must be refused, got {other:?}",
                ctx.run_id()
            ),
        }
        let events = store.read_run(ctx, 0).await.expect("read_run");
        assert_eq!(
            events.len(),
            before,
            "nothing written for {:?}",
            ctx.run_id()
        );
    }
    // The id is taken in its log only.
    start_run(&*store, &session_ctx("other", "done")).await;
    let elsewhere = session_ctx("s", "done")
        .with_namespace("elsewhere")
        .expect("namespace");
    start_run(&*store, &elsewhere).await;
}
