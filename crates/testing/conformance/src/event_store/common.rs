//! Helpers every area of the event store suite shares.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, TimeZone, Utc};
use switchyard_core::event::{
    Block, InterruptReason, InvocableKind, MessageText, Payload, RunCompleted, RunInterrupted,
    RunResumed, RunStarted, Usage,
};
use switchyard_core::{Clock, EventStore, ManualClock, RunContext};

use crate::event_store::{EventStoreFixture, EventStoreSetup, Factory};

pub(super) const ORIGIN: &str = "helper";
pub(super) const HOUR: Duration = Duration::from_secs(3600);

pub(super) fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

pub(super) fn text(n: usize) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("chunk {n}"),
    })
}

pub(super) fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: Some(0.25),
        },
    })
}

pub(super) fn interrupted() -> Payload {
    Payload::RunInterrupted(RunInterrupted {
        interrupt_id: "i1".into(),
        reason: InterruptReason::Human,
        payload: Default::default(),
        thread_id: None,
        expected_resume: None,
    })
}

pub(super) fn resumed() -> RunResumed {
    RunResumed {
        reason: Some("answered".into()),
        value: Some(vec![Block::text("yes")]),
    }
}

pub(super) fn session_ctx(session: &str, run: &str) -> RunContext {
    RunContext::new(run).with_session(session)
}

/// A clock standing at a millisecond-aligned instant, so every backend's precision keeps it.
pub(super) fn manual_clock() -> Arc<ManualClock> {
    let start = Utc
        .with_ymd_and_hms(2030, 1, 2, 3, 4, 5)
        .single()
        .expect("valid date")
        + TimeDelta::milliseconds(678);
    Arc::new(ManualClock::new(start))
}

/// A fixture built with the store's own clock.
pub(super) async fn fixture(factory: Factory<'_>) -> EventStoreFixture {
    build(factory, EventStoreSetup::default()).await
}

/// A fresh store on its own clock.
pub(super) async fn store(factory: Factory<'_>) -> Arc<dyn EventStore> {
    fixture(factory).await.store
}

/// A fresh store that stamps events with `clock`.
pub(super) async fn store_with_clock(
    factory: Factory<'_>,
    clock: Arc<ManualClock>,
) -> Arc<dyn EventStore> {
    let setup = EventStoreSetup {
        clock: Some(clock as Arc<dyn Clock>),
    };
    build(factory, setup).await.store
}

async fn build(factory: Factory<'_>, setup: EventStoreSetup) -> EventStoreFixture {
    factory(setup)
        .await
        .unwrap_or_else(|e| panic!("the adapter's factory could not build a store: {e}"))
}

pub(super) async fn start_run(store: &dyn EventStore, ctx: &RunContext) {
    let (claim, event) = store
        .claim_start(ctx, started(), ORIGIN, HOUR)
        .await
        .expect("claim_start");
    assert!(
        claim.won(),
        "setup claim for {} lost: {claim:?}",
        ctx.run_id()
    );
    assert!(event.is_some());
}
