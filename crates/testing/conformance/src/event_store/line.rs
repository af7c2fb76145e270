//! Guarantees `line.order`, `claim.enqueue` and `claim.interrupt` (ADR 0394): a session's line of
//! waiting runs, and the multitask strategies written over it.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::join_all;
use switchyard_core::event::{Payload, RunCancelled};
use switchyard_core::store::{Claimed, MAX_LINE, Multitask, QueuedRun, Turn};
use switchyard_core::{Error, EventStore, RunContext, RunStatus};

use crate::event_store::Factory;
use crate::event_store::common::{
    HOUR, ORIGIN, completed, session_ctx, start_run, started, store, text,
};

fn entry(run_id: &str) -> QueuedRun {
    QueuedRun {
        run_id: run_id.into(),
        opening: started(),
        origin: ORIGIN.into(),
        stale_after: HOUR,
    }
}

fn ids(line: &[QueuedRun]) -> Vec<&str> {
    line.iter().map(|r| r.run_id.as_str()).collect()
}

/// Guarantee `line.order`: pushes answer their places in order, a run id already waiting is
/// refused, reads page from the head, removals answer whether the run was there, lines of
/// different logs and namespaces stay apart, concurrent pushes get distinct places in the order
/// of the line, and a full line refuses more with nothing written.
pub async fn line_keeps_claim_order(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = |run: &str| session_ctx("s", run);
    for (n, run) in ["a", "b", "c"].into_iter().enumerate() {
        let place = store.line_push(&ctx(run), &entry(run)).await.expect("push");
        assert_eq!(place, n as u64 + 1, "the place of {run}");
    }
    let again = store.line_push(&ctx("b"), &entry("b")).await;
    assert!(
        matches!(again, Err(Error::AlreadyExists { ref id, .. }) if id == "b"),
        "{again:?}"
    );
    let line = store.line_read(&ctx("x"), MAX_LINE).await.expect("read");
    assert_eq!(ids(&line), ["a", "b", "c"]);
    assert_eq!(line[0], entry("a"), "an entry reads back as it was pushed");
    assert_eq!(
        ids(&store.line_read(&ctx("x"), 2).await.expect("read")),
        ["a", "b"]
    );
    assert!(store.line_remove(&ctx("b"), "b").await.expect("remove"));
    assert!(!store.line_remove(&ctx("b"), "b").await.expect("remove"));
    assert_eq!(
        ids(&store.line_read(&ctx("x"), MAX_LINE).await.expect("read")),
        ["a", "c"]
    );
    // Other logs, namespaces and runs without a session have lines of their own.
    let elsewhere = [
        session_ctx("t", "x"),
        session_ctx("s", "x")
            .with_namespace("other")
            .expect("namespace"),
        RunContext::new("x"),
    ];
    for other in &elsewhere {
        assert!(
            store
                .line_read(other, MAX_LINE)
                .await
                .expect("read")
                .is_empty(),
            "{other:?} sees another log's line"
        );
    }
    assert_eq!(
        store
            .line_push(&elsewhere[0], &entry("x"))
            .await
            .expect("push"),
        1
    );
    assert_eq!(
        ids(&store.line_read(&ctx("x"), MAX_LINE).await.expect("read")),
        ["a", "c"]
    );

    // Concurrent pushes to one line: every place once, the line in the order of the places.
    let pushes = (0..16).map(|n| {
        let store = store.clone();
        async move {
            let run = format!("p{n}");
            let place = store
                .line_push(&session_ctx("u", &run), &entry(&run))
                .await
                .expect("concurrent push");
            (place, run)
        }
    });
    let mut placed = join_all(pushes).await;
    placed.sort();
    let places: Vec<u64> = placed.iter().map(|(p, _)| *p).collect();
    assert_eq!(places, (1..=16).collect::<Vec<_>>());
    let line = store
        .line_read(&session_ctx("u", "x"), MAX_LINE)
        .await
        .expect("read");
    let in_order: Vec<&str> = placed.iter().map(|(_, run)| run.as_str()).collect();
    assert_eq!(ids(&line), in_order);

    // A full line refuses the next push and keeps what it held.
    let full = session_ctx("full", "x");
    for chunk in (0..MAX_LINE).collect::<Vec<_>>().chunks(50) {
        let pushes = chunk.iter().map(|n| {
            let store = store.clone();
            let run = format!("f{n:04}");
            async move {
                store
                    .line_push(&session_ctx("full", &run), &entry(&run))
                    .await
                    .expect("push below the bound")
            }
        });
        join_all(pushes).await;
    }
    let refused = store.line_push(&full, &entry("x")).await;
    assert!(
        matches!(refused, Err(Error::Rejected { .. })),
        "{refused:?}"
    );
    let line = store.line_read(&full, MAX_LINE).await.expect("read");
    assert_eq!(line.len(), MAX_LINE);
    assert!(!ids(&line).contains(&"x"));
}

/// Ends the run `run` of session `s` with `run.completed`.
async fn complete(store: &dyn EventStore, run: &str) {
    let stored = store
        .append_if_open(&session_ctx("s", run), vec![completed()], ORIGIN)
        .await
        .expect("end the run");
    assert!(stored.is_stored(), "{run} was not open: {stored:?}");
}

async fn run_starts(store: &dyn EventStore, run: &str) -> usize {
    store
        .read_run(&session_ctx("s", run), 0)
        .await
        .expect("read_run")
        .iter()
        .filter(|e| e.kind() == "run.started")
        .count()
}

/// Guarantee `claim.enqueue`: on a free session an enqueue claim starts at once; on a held one,
/// concurrent enqueue claims wait with distinct places; while the holder is open no hand-off
/// starts anything; after each run ends, of concurrent hand-offs exactly one starts the next
/// waiting run, in the order of the places, and each waiting run starts exactly once. A
/// waiting run holds nothing (its status is pending) and `turn` follows it from waiting to
/// started.
pub async fn claim_enqueue_starts_in_claim_order(factory: Factory<'_>) {
    let store = store(factory).await;
    let at_once = store
        .claim(
            &session_ctx("free", "f1"),
            started(),
            ORIGIN,
            HOUR,
            Multitask::Enqueue,
        )
        .await
        .expect("claim");
    assert!(
        matches!(at_once, Claimed::Started { ref event, .. } if event.run_id == "f1"),
        "{at_once:?}"
    );

    start_run(&*store, &session_ctx("s", "holder")).await;
    const WAITERS: usize = 8;
    let claims = (0..WAITERS).map(|n| {
        let store = store.clone();
        async move {
            let run = format!("w{n}");
            let claimed = store
                .claim(
                    &session_ctx("s", &run),
                    started(),
                    ORIGIN,
                    HOUR,
                    Multitask::Enqueue,
                )
                .await
                .expect("enqueue claim");
            match claimed {
                Claimed::Queued {
                    position,
                    handed_off: None,
                } => (position, run),
                other => panic!("{run} did not wait behind a fresh holder: {other:?}"),
            }
        }
    });
    let mut waiting = join_all(claims).await;
    waiting.sort();
    let places: Vec<u64> = waiting.iter().map(|(p, _)| *p).collect();
    assert_eq!(places, (1..=WAITERS as u64).collect::<Vec<_>>());
    let order: Vec<String> = waiting.into_iter().map(|(_, run)| run).collect();
    let w0 = session_ctx("s", &order[0]);
    assert_eq!(
        store.run_status(&w0).await.expect("status"),
        RunStatus::Pending
    );
    assert_eq!(
        store.turn(&w0).await.expect("turn"),
        (Turn::Waiting { position: 1 }, None)
    );
    let again = store
        .claim(&w0, started(), ORIGIN, HOUR, Multitask::Enqueue)
        .await;
    assert!(
        matches!(again, Err(Error::AlreadyExists { .. })),
        "{again:?}"
    );
    assert!(
        store
            .hand_off(&session_ctx("s", "x"))
            .await
            .expect("hand_off")
            .is_none(),
        "a hand-off started a run while the holder is open"
    );

    let mut current = "holder".to_string();
    for next in &order {
        // The current run works a little more, then ends; concurrent hand-offs follow.
        store
            .append(&session_ctx("s", &current), vec![text(1)], ORIGIN)
            .await
            .expect("append");
        complete(&*store, &current).await;
        let hand_offs = (0..4).map(|_| {
            let store = store.clone();
            async move { store.hand_off(&session_ctx("s", "x")).await }
        });
        let started_now: Vec<String> = join_all(hand_offs)
            .await
            .into_iter()
            .filter_map(|r| r.expect("hand_off"))
            .map(|h| h.event.run_id)
            .collect();
        assert_eq!(
            started_now,
            std::slice::from_ref(next),
            "after {current} ended, the hand-offs started {started_now:?}"
        );
        assert!(
            store
                .hand_off(&session_ctx("s", "x"))
                .await
                .expect("hand_off")
                .is_none(),
            "{next} is open and fresh, yet a hand-off started another run"
        );
        current = next.clone();
    }
    let last = session_ctx("s", &current);
    assert!(matches!(
        store.turn(&last).await.expect("turn"),
        (Turn::Started { ref event }, None) if event.run_id == current
    ));
    for run in &order {
        assert_eq!(run_starts(&*store, run).await, 1, "{run} started twice");
    }
    assert!(
        store
            .line_read(&last, MAX_LINE)
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(
        store
            .turn(&session_ctx("s", "never"))
            .await
            .expect("turn")
            .0,
        Turn::NotWaiting
    );
}

/// Guarantee `claim.interrupt`: an `interrupt` claim ends the open run `cancelled` (reason
/// `interrupted by run …`), stored before its start, and starts; a `rollback` claim does the same with `rolled back for
/// run …`; the ended run's worker is refused its next conditional append; a `reject` claim is
/// `claim_start`'s refusal.
pub async fn claim_interrupt_and_rollback_end_open_runs(factory: Factory<'_>) {
    let store: Arc<dyn EventStore> = store(factory).await;
    start_run(&*store, &session_ctx("s", "r1")).await;
    let refused = store
        .claim(
            &session_ctx("s", "r0"),
            started(),
            ORIGIN,
            HOUR,
            Multitask::Reject,
        )
        .await
        .expect("claim");
    assert_eq!(
        refused,
        Claimed::Held {
            held_by: "r1".into()
        }
    );
    for (strategy, run, before, reason) in [
        (Multitask::Interrupt, "r2", "r1", "interrupted by run r2"),
        (Multitask::Rollback, "r3", "r2", "rolled back for run r3"),
    ] {
        let claimed = store
            .claim(&session_ctx("s", run), started(), ORIGIN, HOUR, strategy)
            .await
            .expect("claim");
        let Claimed::Started { event, ended, .. } = claimed else {
            panic!("{strategy:?} did not start {run}: {claimed:?}");
        };
        assert_eq!((event.run_id.as_str(), event.kind()), (run, "run.started"));
        let ended: Vec<(&str, &Payload)> = ended
            .iter()
            .map(|e| (e.run_id.as_str(), &e.payload))
            .collect();
        let cancelled = Payload::RunCancelled(RunCancelled {
            reason: Some(reason.into()),
        });
        assert_eq!(ended, [(before, &cancelled)]);
        // The holder's end is stored before the new run's start.
        let log = store
            .read(&session_ctx("s", "x"), 0, None)
            .await
            .expect("read");
        let at = |run: &str, kind: &str| {
            log.iter()
                .position(|e| e.run_id == run && e.kind() == kind)
                .unwrap_or_else(|| panic!("no {kind} of {run} in the log"))
        };
        assert!(
            at(before, "run.cancelled") < at(run, "run.started"),
            "{run} started before {before} ended"
        );
        let before_ctx = session_ctx("s", before);
        assert_eq!(
            store.run_status(&before_ctx).await.expect("status"),
            RunStatus::Cancelled
        );
        let late = store
            .append_if_open(&before_ctx, vec![text(9)], ORIGIN)
            .await
            .expect("append_if_open");
        assert_eq!(late.not_open(), Some(RunStatus::Cancelled));
    }
    let open: BTreeSet<String> = store
        .list_runs(&session_ctx("s", "x"), Some(RunStatus::Running))
        .await
        .expect("list_runs")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(open, BTreeSet::from(["r3".to_string()]));
}
