//! The run rules on the memory adapters.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use futures::StreamExt;
use serde_json::json;
use switchyard_core::clock::ManualClock;
use switchyard_core::event::{ErrorCode, InvocableKind, RunStarted};
use switchyard_core::store::EventStore;
use switchyard_core::stream::{MemoryStreamBridge, StreamBridge, StreamItem, run_stream_id};
use switchyard_core::{MemoryEventStore, Payload, RunContext, RunStatus};

use super::*;

struct Fixture {
    runs: Runs,
    clock: Arc<ManualClock>,
    bridge: Arc<dyn StreamBridge>,
}

fn fixture(stream_grace: Duration) -> Fixture {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let store: Arc<dyn EventStore> = Arc::new(MemoryEventStore::with_clock(clock.clone()));
    let bridge: Arc<dyn StreamBridge> =
        Arc::new(MemoryStreamBridge::new(1_000).expect("memory bridge"));
    let runs = Runs::new(
        store,
        bridge.clone(),
        RunSettings {
            stale_after: Duration::from_secs(60),
            stream_grace,
        },
    );
    Fixture {
        runs,
        clock,
        bridge,
    }
}

fn start_request(run_id: &str, session: Option<&str>) -> StartRun {
    StartRun {
        run_id: Some(run_id.into()),
        session_id: session.map(Into::into),
        namespace: None,
        origin: None,
        stale_after_secs: None,
        multitask_strategy: None,
        invocable: "helper".into(),
        kind_of_invocable: "agent".into(),
        input: json!([]),
    }
}

async fn started(runs: &Runs, run_id: &str, session: Option<&str>) -> Started {
    match runs.start(start_request(run_id, session)).await {
        Ok(StartOutcome::Started(s)) => s,
        other => panic!("{run_id} did not start: {other:?}"),
    }
}

/// The kinds a cursor-less subscriber replays from a stream, up to its end (or a quiet moment).
async fn streamed_kinds(bridge: &Arc<dyn StreamBridge>, ctx: &RunContext) -> Vec<String> {
    let mut items = bridge.subscribe(&run_stream_id(ctx), None, Duration::from_millis(100));
    let mut kinds = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::from_secs(2), items.next()).await {
        match item.expect("stream item") {
            StreamItem::Event(e) => kinds.push(e.event),
            StreamItem::End | StreamItem::Heartbeat => break,
            StreamItem::Gap(gap) => panic!("a gap: {gap:?}"),
        }
    }
    kinds
}

fn code_and_field(e: &Error) -> (&'static str, String) {
    match e {
        Error::Invalid { code, field, .. } => (code, field.clone()),
        other => (other.code(), String::new()),
    }
}

#[tokio::test]
async fn a_start_stores_and_publishes_the_opening_event() {
    let f = fixture(Duration::from_secs(60));
    let s = started(&f.runs, "r1", Some("s1")).await;
    assert_eq!(s.log_key, "s1");
    assert_eq!(s.status, RunStatus::Running);
    assert_eq!(s.event.kind(), "run.started");
    assert_eq!(s.event.origin, "helper", "origin defaults to the invocable");
    assert!(s.overridden.is_empty());
    assert_eq!(s.unpublished, 0);
    let ctx = RunContext::new("r1").with_session("s1");
    assert_eq!(streamed_kinds(&f.bridge, &ctx).await, ["run.started"]);
    let body = serde_json::to_value(&s).expect("json");
    assert_eq!(body["status"], "running");
    assert_eq!(body["overridden"], json!([]));
    assert!(body.get("unpublished").is_none(), "{body}");
}

#[tokio::test]
async fn a_lost_claim_is_data_and_writes_nothing() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", Some("s1")).await;
    let outcome = f
        .runs
        .start(start_request("r2", Some("s1")))
        .await
        .expect("start");
    assert_eq!(
        outcome,
        StartOutcome::Held(Held {
            log_key: "s1".into(),
            held_by: "r1".into()
        })
    );
    let r2 = RunContext::new("r2").with_session("s1");
    assert_eq!(
        f.runs.status(&r2).await.expect("status"),
        RunStatus::Pending
    );
}

#[tokio::test]
async fn a_claim_over_a_stale_run_closes_and_publishes_it() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", Some("s1")).await;
    f.clock.advance(TimeDelta::seconds(61));
    let s = started(&f.runs, "r2", Some("s1")).await;
    assert_eq!(s.overridden, ["r1"]);
    let r1 = RunContext::new("r1").with_session("s1");
    let view = f.runs.read(&r1, 0).await.expect("read r1");
    assert_eq!(view.status, RunStatus::Failed);
    let last = view.events.last().expect("events");
    let Payload::RunFailed(failed) = &last.payload else {
        panic!("not run.failed: {last:?}");
    };
    assert_eq!(failed.error_code, ErrorCode::CancelledHard);
    assert!(failed.message.contains("r2"), "{}", failed.message);
    assert_eq!(
        last.origin, "helper",
        "closed under the stale run's own origin"
    );
    assert_eq!(
        streamed_kinds(&f.bridge, &r1).await,
        ["run.started", "run.failed"]
    );
}

#[tokio::test]
async fn appends_land_only_while_the_run_is_open() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", None).await;
    let ctx = RunContext::new("r1");
    let a = f
        .runs
        .append(&ctx, vec![Payload::text_delta("m", "hi")], None)
        .await
        .expect("append");
    assert_eq!((a.status, a.events.len()), (RunStatus::Running, 1));
    assert_eq!(a.events[0].origin, DEFAULT_ORIGIN);
    let done = f
        .runs
        .end(&ctx, Payload::cancelled(Some("enough".into())), Some("me"))
        .await
        .expect("end");
    assert_eq!(done.status, RunStatus::Cancelled);
    assert_eq!(done.events[0].origin, "me");
    let late = f
        .runs
        .append(&ctx, vec![Payload::text_delta("m", "late")], None)
        .await
        .expect_err("finished");
    let Error::Conflict { code, details, .. } = &late else {
        panic!("a conflict: {late:?}");
    };
    assert_eq!(*code, "run_finished");
    assert_eq!(details["status"], "cancelled");
    assert_eq!(f.runs.read(&ctx, 0).await.expect("read").events.len(), 3);
    let ghost = f
        .runs
        .append(&RunContext::new("ghost"), vec![Payload::status("x")], None)
        .await
        .expect_err("unknown");
    assert_eq!(ghost.code(), "unknown_run");
    assert_eq!(
        streamed_kinds(&f.bridge, &ctx).await,
        ["run.started", "text.delta", "run.cancelled"]
    );
}

#[tokio::test]
async fn appends_refuse_what_other_calls_write_and_oversized_batches() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", None).await;
    let ctx = RunContext::new("r1");
    let opening = Payload::started("h", InvocableKind::Agent, vec![]);
    let e = f
        .runs
        .append(&ctx, vec![opening.clone()], None)
        .await
        .expect_err("run.started");
    assert_eq!(code_and_field(&e), ("invalid_input", "kind".into()));
    let resumed = Payload::resumed(switchyard_core::event::RunResumed::new("go"));
    let e = f
        .runs
        .append(&ctx, vec![Payload::status("ok"), resumed], None)
        .await
        .expect_err("run.resumed");
    assert_eq!(
        code_and_field(&e),
        ("invalid_input", "events[1].kind".into())
    );
    let many = vec![Payload::status("x"); MAX_APPEND_EVENTS + 1];
    let e = f.runs.append(&ctx, many, None).await.expect_err("too many");
    assert_eq!(code_and_field(&e), ("too_many_events", "events".into()));
    let e = f
        .runs
        .end(&ctx, Payload::status("not an end"), None)
        .await
        .expect_err("not terminal");
    assert_eq!(code_and_field(&e), ("invalid_input", "kind".into()));
    assert_eq!(f.runs.read(&ctx, 0).await.expect("read").events.len(), 1);
}

#[tokio::test]
async fn a_finished_runs_stream_is_released_after_the_grace_period() {
    let f = fixture(Duration::ZERO);
    started(&f.runs, "r1", None).await;
    let ctx = RunContext::new("r1");
    assert_eq!(
        f.runs.stream(&ctx).await.expect("open"),
        run_stream_id(&ctx)
    );
    f.runs
        .end(
            &ctx,
            Payload::failed(ErrorCode::EngineError, "boom", false),
            None,
        )
        .await
        .expect("end");
    let mut released = false;
    for _ in 0..100 {
        if !f
            .bridge
            .stream_exists(&run_stream_id(&ctx))
            .await
            .expect("exists")
        {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(released, "the finished run's stream was not released");
    assert_eq!(
        f.runs.stream(&ctx).await.expect_err("released").code(),
        "no_stream"
    );
    let ghost = f.runs.stream(&RunContext::new("ghost")).await;
    assert_eq!(ghost.expect_err("unknown").code(), "unknown_run");
}

#[tokio::test]
async fn an_open_run_with_nothing_published_is_followed() {
    let f = fixture(Duration::from_secs(60));
    let ctx = RunContext::new("r1");
    // Written by another process: in the store, not on this bridge.
    f.runs
        .store()
        .claim_start(
            &ctx,
            RunStarted::new("h", InvocableKind::Agent, vec![]),
            "h",
            Duration::from_secs(60),
        )
        .await
        .expect("claim");
    assert_eq!(
        f.runs.stream(&ctx).await.expect("open"),
        run_stream_id(&ctx)
    );
}

#[tokio::test]
async fn resumes_win_once_and_name_the_state_that_refuses() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", None).await;
    let ctx = RunContext::new("r1");
    let e = f
        .runs
        .resume(&ctx, ResumeRun::default())
        .await
        .expect_err("running");
    let Error::Conflict { code, details, .. } = &e else {
        panic!("a conflict: {e:?}");
    };
    assert_eq!(
        (*code, &details["status"]),
        ("not_resumable", &json!("running"))
    );
    f.runs
        .append(&ctx, vec![Payload::paused(None)], None)
        .await
        .expect("pause");
    let request = ResumeRun {
        reason: Some("go".into()),
        value: Some(json!([{"type": "text", "text": "yes"}])),
        origin: Some("human".into()),
    };
    let r = f.runs.resume(&ctx, request.clone()).await.expect("resume");
    assert_eq!(
        (r.status, r.event.kind()),
        (RunStatus::Running, "run.resumed")
    );
    assert_eq!(r.event.origin, "human");
    let again = f.runs.resume(&ctx, request).await.expect_err("once");
    assert_eq!(again.code(), "not_resumable");
    let ghost = f
        .runs
        .resume(&RunContext::new("ghost"), ResumeRun::default())
        .await;
    assert_eq!(ghost.expect_err("unknown").code(), "unknown_run");
    let bad = ResumeRun {
        value: Some(json!([{"type": "text"}])),
        ..ResumeRun::default()
    };
    let e = f.runs.resume(&ctx, bad).await.expect_err("bad value");
    assert!(code_and_field(&e).1.starts_with("value[0]"), "{e:?}");
}

#[tokio::test]
async fn reads_fold_the_status_and_refuse_unknown_runs() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "r1", Some("s1")).await;
    let ctx = RunContext::new("r1").with_session("s1");
    f.runs
        .append(&ctx, vec![Payload::status("a"), Payload::status("b")], None)
        .await
        .expect("append");
    let tail = f.runs.read(&ctx, 1).await.expect("read");
    assert_eq!(
        tail.status,
        RunStatus::Running,
        "from the store, not the tail"
    );
    assert_eq!(
        tail.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(
        f.runs
            .read(&RunContext::new("r1"), 0)
            .await
            .expect_err("other log")
            .code(),
        "unknown_run"
    );
    let e = f.runs.read(&ctx, MAX_SEQ + 1).await.expect_err("seq");
    assert_eq!(code_and_field(&e), ("invalid_input", "from_seq".into()));
}

#[tokio::test]
async fn lists_are_sorted_and_filtered_by_status() {
    let f = fixture(Duration::from_secs(60));
    started(&f.runs, "b", None).await;
    started(&f.runs, "a", Some("s")).await;
    started(&f.runs, "c", None).await;
    f.runs
        .end(&RunContext::new("c"), Payload::cancelled(None), None)
        .await
        .expect("end");
    let all = f.runs.list(None, None).await.expect("list");
    let order: Vec<_> = all
        .runs
        .iter()
        .map(|r| (r.log_key.as_str(), r.run_id.as_str()))
        .collect();
    assert_eq!(order, [("b", "b"), ("c", "c"), ("s", "a")]);
    assert_eq!(all.runs[2].session_id.as_deref(), Some("s"));
    assert_eq!(all.runs[0].session_id, None);
    let running = f
        .runs
        .list(None, Some(RunStatus::Running))
        .await
        .expect("list");
    assert_eq!(running.runs.len(), 2);
    assert!(
        f.runs
            .list(Some("elsewhere"), None)
            .await
            .expect("list")
            .runs
            .is_empty()
    );
}

#[tokio::test]
async fn a_start_refuses_what_breaks_a_rule_and_names_the_field() {
    let f = fixture(Duration::from_secs(60));
    let cases = [
        (json!({"kind_of_invocable": "robot"}), "kind_of_invocable"),
        (json!({"input": [{"type": "text"}]}), "input[0]"),
        (json!({"run_id": ""}), "run_id"),
        (json!({"session_id": "a\nb"}), "session_id"),
        (
            json!({"stale_after_secs": crate::MAX_DURATION_SECS + 1}),
            "stale_after_secs",
        ),
    ];
    for (patch, field) in cases {
        let mut body = serde_json::to_value(start_request("x", None)).expect("json");
        for (k, v) in patch.as_object().expect("object") {
            body[k] = v.clone();
        }
        let request: StartRun = serde_json::from_value(body).expect("request");
        let e = f.runs.start(request).await.expect_err(field);
        let (code, got) = code_and_field(&e);
        assert_eq!(code, "invalid_input", "{field}: {e:?}");
        assert!(got.starts_with(field), "{field}: {e:?}");
    }
    assert!(f.runs.list(None, None).await.expect("list").runs.is_empty());
    let typo = serde_json::from_value::<StartRun>(
        json!({"invocable": "h", "kind_of_invocable": "agent", "input": [], "colour": 1}),
    );
    assert!(typo.is_err(), "unknown fields are refused");
}
