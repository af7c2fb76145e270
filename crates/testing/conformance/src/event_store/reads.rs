//! Guarantee `read.append_order` to 8 and 12 to 14: reading back (pages, one run, isolation, run
//! lists, run status, corrupt records).

use switchyard_core::event::{ControlRequested, ControlVerb, Payload};
use switchyard_core::{Error, RunContext, RunStatus};

use crate::event_store::common::{
    HOUR, ORIGIN, completed, fixture, interrupted, resumed, session_ctx, start_run, started, store,
    text,
};
use crate::event_store::{CorruptRecord, Corruption, Factory};

/// Guarantee `read.append_order`: `read` pages in append order by event offset.
pub async fn read_pages_by_offset_and_limit(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "a");
    let b = session_ctx("s", "b");
    // Interleave two runs so offsets count events of the log, not seqs of a run.
    for i in 0..3 {
        store
            .append(&a, vec![text(i)], ORIGIN)
            .await
            .expect("append");
        store
            .append(&b, vec![text(i)], ORIGIN)
            .await
            .expect("append");
    }
    let all = store.read(&a, 0, None).await.expect("read");
    let order: Vec<(String, u64)> = all.iter().map(|e| (e.run_id.clone(), e.seq)).collect();
    let expected: Vec<(String, u64)> = (0..3)
        .flat_map(|i| [("a".to_string(), i), ("b".to_string(), i)])
        .collect();
    assert_eq!(order, expected);
    let page = store.read(&a, 2, Some(3)).await.expect("read");
    assert_eq!(page, all[2..5].to_vec());
    assert!(store.read(&a, 0, Some(0)).await.expect("read").is_empty());
    assert_eq!(
        store.read(&a, -5, Some(1)).await.expect("read"),
        all[..1].to_vec()
    );
    assert!(store.read(&a, 99, None).await.expect("read").is_empty());
    assert!(
        store
            .read(&session_ctx("nothing-here", "a"), 0, None)
            .await
            .expect("read")
            .is_empty()
    );
}

/// Guarantee `read.append_order`: a negative limit is invalid input.
pub async fn read_refuses_negative_limit(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    store
        .append(&ctx, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    assert!(matches!(
        store.read(&ctx, 0, Some(-1)).await,
        Err(Error::InvalidInput { .. })
    ));
}

/// Guarantee `read.run_from_seq`: `read_run` returns one run's events from a seq.
pub async fn read_run_from_seq(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "a");
    let b = session_ctx("s", "b");
    store
        .append(&a, (0..5).map(text).collect(), ORIGIN)
        .await
        .expect("append");
    store
        .append(&b, (0..5).map(text).collect(), ORIGIN)
        .await
        .expect("append");
    store
        .append(&a, (5..8).map(text).collect(), ORIGIN)
        .await
        .expect("append");
    let tail = store.read_run(&a, 4).await.expect("read_run");
    assert_eq!(
        tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![4, 5, 6, 7]
    );
    assert!(tail.iter().all(|e| e.run_id == "a"));
    assert!(store.read_run(&a, 8).await.expect("read_run").is_empty());
    assert_eq!(store.read_run(&a, 0).await.expect("read_run").len(), 8);
    assert!(
        store
            .read_run(&session_ctx("s", "ghost"), 0)
            .await
            .expect("read_run")
            .is_empty()
    );
}

/// Guarantee `read.isolation`: nothing leaks between namespaces, logs and runs, whatever the ids
/// contain.
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
                .append(&ctx, vec![text(i * 100 + j)], ORIGIN)
                .await
                .expect("append");
            store
                .claim_start(
                    &ctx.for_run(format!("{log}#open"), Some(log.to_string())),
                    started(),
                    ORIGIN,
                    HOUR,
                )
                .await
                .expect("claim_start");
            written.push((ctx, events[0].clone()));
        }
    }
    for (ctx, event) in &written {
        let log = store.read(ctx, 0, None).await.expect("read");
        assert_eq!(
            log.len(),
            2,
            "log {:?} in {:?}",
            ctx.log_key(),
            ctx.namespace()
        );
        assert_eq!(&log[0], event);
        let run = store.read_run(ctx, 0).await.expect("read_run");
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
    assert!(store.read(&plain, 0, None).await.expect("read").is_empty());
}

/// Guarantee `read.list_runs`: every run with a lifecycle event, across logs, filtered by value.
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
        .append(&waiting, vec![interrupted()], ORIGIN)
        .await
        .expect("append");
    let done = ns("done", "s1");
    store
        .append(
            &done,
            vec![Payload::RunStarted(started()), completed()],
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
        .append(&ns("quiet", "s3"), vec![text(0)], ORIGIN)
        .await
        .expect("append");
    start_run(&*store, &session_ctx("s1", "elsewhere")).await;
    let control = Payload::ControlRequested(ControlRequested {
        verb: ControlVerb::Cancel,
        reason: None,
    });
    store
        .append(&running, vec![control], ORIGIN)
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

/// Guarantee `read.run_status`: `run_status` folds the run; an unknown run is pending.
pub async fn run_status_folds_and_unknown_is_pending(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Pending
    );
    store
        .append(&ctx, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Pending
    );
    store
        .append(
            &ctx,
            vec![Payload::RunStarted(started()), completed(), text(1)],
            ORIGIN,
        )
        .await
        .expect("append");
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Completed
    );
    // No transition is validated: a late lifecycle event moves the status again.
    store
        .append(&ctx, vec![Payload::RunResumed(resumed())], ORIGIN)
        .await
        .expect("append");
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Running
    );
}

/// Guarantee `read.corrupt_contained`: a corrupt record is `Error::Corrupt` for its log only. On a
/// store whose storage holds only typed values (the fixture says so) no record can be corrupt, and
/// the case checks that both logs read back whole.
pub async fn corrupt_record_is_typed_and_contained(factory: Factory<'_>) {
    let fixture = fixture(factory).await;
    let store = fixture.store.clone();
    let bad = session_ctx("bad", "r");
    let good = session_ctx("good", "r");
    start_run(&*store, &bad).await;
    start_run(&*store, &good).await;
    match &fixture.corruption {
        Corruption::Hook(corrupt) => {
            corrupt(CorruptRecord {
                namespace_key: String::new(),
                log_key: "bad".into(),
                run_id: "r".into(),
            })
            .await;
            match store.read(&bad, 0, None).await {
                Err(Error::Corrupt { location, .. }) => assert!(!location.is_empty()),
                other => panic!("expected Corrupt, got {other:?}"),
            }
            assert!(matches!(
                store.read_run(&bad, 0).await,
                Err(Error::Corrupt { .. })
            ));
        }
        Corruption::TypedStorageOnly => {
            let read = store.read(&bad, 0, None).await.expect("read");
            assert_eq!(read.len(), 1, "the opening event, decoded");
        }
        Corruption::Undeclared => panic!(
            "the fixture must either write a corrupt record (`EventStoreFixture::with_corruption`) \
             or say that its storage holds only typed values (`typed_storage_only`)"
        ),
    }
    assert_eq!(
        store
            .read(&good, 0, None)
            .await
            .expect("other logs stay readable")
            .len(),
        1
    );
    assert_eq!(
        store.run_status(&good).await.expect("status"),
        RunStatus::Running
    );
}
