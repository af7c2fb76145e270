//! Guarantee `store.dense_seqs` to 5: what an append writes (dense seqs, one store timestamp per
//! batch, empty and invalid batches, the envelope).

use chrono::TimeDelta;
use switchyard_core::event::{Payload, RunCompleted, StatusReported, Usage};
use switchyard_core::{Clock, Error, RunContext};

use crate::event_store::Factory;
use crate::event_store::common::{
    ORIGIN, manual_clock, session_ctx, store, store_with_clock, text,
};

/// Guarantee `store.dense_seqs`: seqs are 0, 1, 2, … per run, across batches, independent between
/// runs.
pub async fn dense_seqs_from_zero_per_run(factory: Factory<'_>) {
    let store = store(factory).await;
    let a = session_ctx("s", "run-a");
    let b = session_ctx("s", "run-b");
    let first = store
        .append(&a, vec![text(0), text(1)], ORIGIN)
        .await
        .expect("append");
    let other = store
        .append(&b, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    let second = store
        .append(&a, vec![text(2), text(3), text(4)], ORIGIN)
        .await
        .expect("append");
    let seqs: Vec<u64> = first.iter().chain(&second).map(|e| e.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_eq!(other[0].seq, 0, "another run starts at 0");
    let stored: Vec<u64> = store
        .read_run(&a, 0)
        .await
        .expect("read_run")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored, vec![0, 1, 2, 3, 4]);
}

/// Guarantee `store.store_clock`: one `ts` for a whole batch.
pub async fn batch_shares_one_store_timestamp(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("solo");
    let events = store
        .append(&ctx, (0..20).map(text).collect(), ORIGIN)
        .await
        .expect("append");
    assert_eq!(events.len(), 20);
    assert!(events.iter().all(|e| e.ts == events[0].ts), "{events:?}");
}

/// Guarantee `store.store_clock`: the store's clock stamps `ts`, not the caller's.
pub async fn store_clock_stamps_ts(factory: Factory<'_>) {
    let clock = manual_clock();
    let store = store_with_clock(factory, clock.clone()).await;
    let ctx = RunContext::new("r");
    let events = store
        .append(&ctx, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    assert_eq!(events[0].ts, clock.now().fixed_offset());
    clock.advance(TimeDelta::seconds(90));
    let later = store
        .append(&ctx, vec![text(1)], ORIGIN)
        .await
        .expect("append");
    assert_eq!(later[0].ts, clock.now().fixed_offset());
    let stored = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(
        stored[1].ts,
        clock.now().fixed_offset(),
        "the stored ts is the stamped one"
    );
}

/// Guarantee `store.atomic_batches`: an empty batch returns `[]` and writes nothing.
pub async fn empty_batch_returns_nothing(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    assert!(
        store
            .append(&ctx, vec![], ORIGIN)
            .await
            .expect("append")
            .is_empty()
    );
    assert!(store.read(&ctx, 0, None).await.expect("read").is_empty());
    let next = store
        .append(&ctx, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    assert_eq!(next[0].seq, 0, "an empty batch consumes no seq");
}

/// Guarantees `store.atomic_batches` and `store.validated_input`: a batch with one invalid payload
/// is refused whole, naming the field.
pub async fn invalid_payload_writes_nothing(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("r");
    let bad = Payload::StatusReported(StatusReported {
        message: String::new(),
    });
    let err = store
        .append(&ctx, vec![text(0), bad], ORIGIN)
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
        store.append(&ctx, vec![nan], ORIGIN).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(store.read(&ctx, 0, None).await.expect("read").is_empty());
}

/// Guarantee `store.envelope_from_context`: the envelope is filled from the context and the origin.
pub async fn envelope_comes_from_context(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = RunContext::new("run-1")
        .with_session("sess-1")
        .with_namespace("acme")
        .expect("namespace");
    let events = store
        .append(&ctx, vec![text(0)], "planner")
        .await
        .expect("append");
    let e = &events[0];
    assert_eq!(e.run_id, "run-1");
    assert_eq!(e.session_id.as_deref(), Some("sess-1"));
    assert_eq!(e.namespace.as_deref(), Some("acme"));
    assert_eq!(e.origin, "planner");
    assert_eq!(e.kind(), "text.delta");
    let stored = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(stored, events, "what is read back is what was returned");
    let bare = RunContext::new("solo");
    let solo = store
        .append(&bare, vec![text(0)], ORIGIN)
        .await
        .expect("append");
    assert_eq!(solo[0].session_id, None);
    assert_eq!(solo[0].namespace, None);
}

/// Guarantee `store.dense_seqs`: 100 concurrent appenders to one run all succeed with dense, unique
/// seqs.
pub async fn concurrent_appenders_one_run_dense(factory: Factory<'_>) {
    let store = store(factory).await;
    let ctx = session_ctx("s", "hot");
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move { store.append(&ctx, vec![text(i), text(i)], ORIGIN).await })
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
    let stored = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..200).collect::<Vec<u64>>()
    );
}
