//! Guarantee `claim.resume_once`: `claim_resume`, exactly one resume of a waiting or paused run.

use switchyard_core::RunStatus;
use switchyard_core::event::{Payload, RunPaused};

use crate::event_store::Factory;
use crate::event_store::common::{
    ORIGIN, completed, interrupted, resumed, session_ctx, start_run, store,
};

/// Guarantee `claim.resume_once`: only a waiting or paused run resumes.
pub async fn claim_resume_waiting_or_paused_only(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    assert!(
        store
            .claim_resume(&ctx, resumed(), ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "unknown run"
    );
    start_run(&*store, &ctx).await;
    assert!(
        store
            .claim_resume(&ctx, resumed(), ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "running"
    );
    store
        .append(&ctx, vec![interrupted()], ORIGIN)
        .await
        .expect("append");
    let event = store
        .claim_resume(&ctx, resumed(), ORIGIN)
        .await
        .expect("resume")
        .expect("a waiting run resumes");
    assert_eq!((event.kind(), event.seq), ("run.resumed", 2));
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Running
    );
    store
        .append(
            &ctx,
            vec![Payload::RunPaused(RunPaused { reason: None })],
            ORIGIN,
        )
        .await
        .expect("append");
    assert!(
        store
            .claim_resume(&ctx, resumed(), ORIGIN)
            .await
            .expect("resume")
            .is_some(),
        "paused resumes too"
    );
    store
        .append(&ctx, vec![completed()], ORIGIN)
        .await
        .expect("append");
    assert!(
        store
            .claim_resume(&ctx, resumed(), ORIGIN)
            .await
            .expect("resume")
            .is_none(),
        "terminal"
    );
}

/// Guarantee `claim.resume_once`: of concurrent resumes of one waiting run, exactly one gets the
/// event.
pub async fn claim_resume_concurrent_exactly_once(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "r");
    start_run(&*store, &ctx).await;
    store
        .append(&ctx, vec![interrupted()], ORIGIN)
        .await
        .expect("append");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move { store.claim_resume(&ctx, resumed(), ORIGIN).await })
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
        .read_run(&ctx, 0)
        .await
        .expect("read_run")
        .iter()
        .map(|e| e.kind().to_string())
        .collect();
    assert_eq!(kinds, ["run.started", "run.interrupted", "run.resumed"]);
}
