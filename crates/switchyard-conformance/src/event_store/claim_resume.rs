//! Guarantee 11: `claim_resume`, exactly one resume of a waiting or paused run.

use switchyard_core::event::{Payload, RunPaused};
use switchyard_core::{Error, RunStatus};

use crate::event_store::Factory;
use crate::event_store::common::{
    ORIGIN, completed, interrupted, resumed, session_ctx, start_run, store,
};

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
