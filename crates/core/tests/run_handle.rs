//! The run handle, the payload constructors and `publish_event`, on the memory adapters.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};
use switchyard_core::event::{InterruptReason, InvocableKind, RunResumed, RunStarted, Usage};
use switchyard_core::{
    EventStore, MemoryEventStore, MemoryStreamBridge, Payload, RunContext, RunStatus, StreamBridge,
    StreamItem, stream::run_stream_id,
};

#[tokio::test]
async fn a_run_handle_derives_the_log_key() {
    let store: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
    let ctx = RunContext::new("r1")
        .with_session("s1")
        .with_namespace("acme")
        .expect("ns");
    let run = store.run(&ctx).origin("router");
    assert_eq!(run.log_key(), "s1");
    let (claim, started) = run
        .start(
            RunStarted::new("helper", InvocableKind::Agent, vec![]),
            Duration::from_secs(60),
        )
        .await
        .expect("start");
    assert!(claim.won());
    assert_eq!(started.expect("started").origin, "router");
    let events = run
        .append(vec![
            Payload::text_delta("m1", "hi"),
            Payload::interrupted("i1", InterruptReason::Approval),
        ])
        .await
        .expect("append");
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(run.status().await.expect("status"), RunStatus::WaitingHuman);
    let resumed = run
        .resume(RunResumed::new("approved"))
        .await
        .expect("resume");
    assert_eq!(resumed.map(|e| e.seq), Some(3));
    assert_eq!(
        run.resume(RunResumed::new("again")).await.expect("resume"),
        None
    );
    assert_eq!(run.read(2).await.expect("read").len(), 2);

    // The same events, through the port with the key spelled out.
    let direct = store.read_run(&ctx, 0).await.expect("read_run");
    assert_eq!(direct.len(), 4);

    let in_acme = store.list_runs_in(Some("acme"), None).await.expect("list");
    assert_eq!(in_acme.len(), 1);
    assert_eq!(
        (in_acme[0].log_key.as_str(), in_acme[0].run_id.as_str()),
        ("s1", "r1")
    );
    assert!(
        store
            .list_runs_in(None, None)
            .await
            .expect("list")
            .is_empty()
    );
}

#[test]
fn tool_call_completed_from_a_result() {
    let result = "é".repeat(5000);
    let Payload::ToolCallCompleted(p) = Payload::tool_call_completed_from("c1", "search", &result)
    else {
        panic!("kind");
    };
    assert_eq!(p.result_preview.chars().count(), 4096);
    assert!(result.starts_with(&p.result_preview));
    assert_eq!(p.result_size, 10_000, "bytes of the UTF-8 result");
    assert_eq!(
        p.result_sha256,
        hex::encode(Sha256::digest(result.as_bytes()))
    );
    Payload::ToolCallCompleted(p).validate().expect("valid");

    let Payload::ToolCallCompleted(small) = Payload::tool_call_completed_from("c2", "t", "ok")
    else {
        panic!("kind");
    };
    assert_eq!(
        (small.result_preview.as_str(), small.result_size),
        ("ok", 2)
    );
}

#[test]
fn constructors_build_valid_payloads_of_their_kind() {
    let cases = [
        (
            Payload::started("a", InvocableKind::Skill, vec![]),
            "run.started",
        ),
        (
            Payload::completed(vec![], Usage::tokens(1, 2)),
            "run.completed",
        ),
        (
            Payload::failed(switchyard_core::event::ErrorCode::ToolError, "x", true),
            "run.failed",
        ),
        (Payload::paused(None), "run.paused"),
        (Payload::cancelled(Some("user".into())), "run.cancelled"),
        (Payload::resumed(RunResumed::new("ok")), "run.resumed"),
        (
            Payload::interrupted("i", InterruptReason::Human),
            "run.interrupted",
        ),
        (Payload::text_delta("m", "t"), "text.delta"),
        (Payload::thought_delta("m", "t"), "thought.delta"),
        (Payload::message_completed("m", "t"), "message.completed"),
        (
            Payload::tool_call_started("c", "t", Default::default()),
            "tool.call.started",
        ),
        (
            Payload::usage_reported("gpt", Usage::tokens(3, 4)),
            "usage.reported",
        ),
        (Payload::status("thinking"), "status.reported"),
        (
            Payload::progress("step", Some(1), Some(2)),
            "progress.reported",
        ),
        (Payload::custom("acme.ping", Default::default()), "custom"),
    ];
    for (payload, kind) in cases {
        assert_eq!(payload.kind(), kind);
        payload.validate().expect(kind);
    }
}

#[tokio::test]
async fn publish_event_names_shapes_and_ends_like_the_gateway() {
    let store: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
    let bridge: Arc<dyn StreamBridge> = Arc::new(MemoryStreamBridge::new(100).expect("bridge"));
    let ctx = RunContext::new("r1").with_session("s1");
    let run = store.run(&ctx);
    let (_, started) = run
        .start(
            RunStarted::new("helper", InvocableKind::Agent, vec![]),
            Duration::from_secs(60),
        )
        .await
        .expect("start");
    let mut events = vec![started.expect("started")];
    events.extend(
        run.append(vec![
            Payload::text_delta("m1", "hi"),
            Payload::completed(vec![], Usage::tokens(1, 1)),
        ])
        .await
        .expect("append"),
    );
    for event in &events {
        bridge.publish_event(event).await.expect("publish");
    }
    let items: Vec<_> = bridge
        .subscribe(&run_stream_id(&ctx), None, Duration::from_secs(5))
        .map(|i| i.expect("item"))
        .collect()
        .await;
    assert_eq!(items.len(), 4, "three events, then the end: {items:?}");
    for (item, event) in items.iter().zip(&events) {
        let StreamItem::Event(got) = item else {
            panic!("event, got {item:?}");
        };
        assert_eq!(got.event, event.kind());
        assert_eq!(got.data, serde_json::to_value(event).expect("json"));
    }
    assert!(matches!(items[3], StreamItem::End));
}
