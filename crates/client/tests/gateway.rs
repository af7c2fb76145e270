//! The client against a real gateway: `switchyard-gateway`'s router over in-memory ports, served
//! on 127.0.0.1:0 in this process, called over HTTP.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchyard_client::{Client, Error, EventStream, Frame, RunClaim, RunRef};
use switchyard_core::fleet::TaskState;
use switchyard_core::{Payload, RunStatus};
use switchyard_gateway::Gateway;
use switchyard_gateway::auth::{AuthError, Authenticator, Principal, Right, async_trait};
use switchyard_service::queues::{
    AckItem, FailBody, PriorityInput, RequeueBody, ReserveBody, RetentionBody, SubmitBody,
};
use switchyard_service::runs::StartRun;

const GOOD: &str = "good-secret-1234";

/// Lets in `Authorization: Bearer GOOD` as a principal that may do everything.
#[derive(Debug)]
struct OneToken;

#[async_trait]
impl Authenticator for OneToken {
    async fn authenticate(
        &self,
        request: &axum::http::request::Parts,
    ) -> Result<Arc<Principal>, AuthError> {
        let header = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if header != format!("Bearer {GOOD}") {
            return Err(AuthError::Unauthenticated("unknown token".into()));
        }
        let admin = Principal::new("admin")
            .with_rights([Right::Read, Right::Write, Right::Metrics])
            .with_namespaces(["*"])
            .and_then(|p| p.with_queues(["*"]))
            .map_err(|e| AuthError::Unauthenticated(e.to_string()))?;
        Ok(Arc::new(admin))
    }
}

/// A gateway on a free port of 127.0.0.1 (behind [`OneToken`] when `auth`); its base URL. The
/// server task ends with the test's runtime.
async fn gateway(auth: bool) -> String {
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let mut builder = Gateway::builder(store, bridge, fleet).console(false);
    if auth {
        builder = builder.authenticator(Arc::new(OneToken));
    }
    let gateway = builder.build().expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    // The whole edge, as `switchyard serve` runs it: request ids, limits, the loopback checks.
    tokio::spawn(gateway.serve(listener, None, std::future::pending()));
    format!("http://{addr}")
}

fn client(base: &str) -> Client {
    Client::builder(base).build().expect("client")
}

fn start(run: &str, session: &str) -> StartRun {
    serde_json::from_value(json!({
        "run_id": run, "session_id": session,
        "invocable": "helper", "kind_of_invocable": "agent", "input": [],
    }))
    .expect("start request")
}

fn submit(body: serde_json::Value) -> SubmitBody {
    serde_json::from_value(body).expect("submit body")
}

async fn next(frames: &mut EventStream) -> Frame {
    tokio::time::timeout(Duration::from_secs(10), frames.next())
        .await
        .expect("a frame within 10 s")
        .expect("the stream goes on")
        .expect("a frame, not an error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_run_is_read_and_listed() {
    let c = client(&gateway(false).await);
    let started = c.start_run(&start("r/1", "s1")).await.expect("start");
    assert_eq!(started.log_key, "s1");
    assert_eq!(started.status, RunStatus::Running);
    let run = RunRef::new("r/1").session("s1");
    let appended = c
        .append_events(&run, &[Payload::text_delta("m1", "Hel")], None)
        .await
        .expect("append");
    assert_eq!(appended.events.len(), 1);
    assert_eq!(appended.events[0].seq, 1);

    // The id holds a `/`: the path segment is percent-encoded, and the run is found.
    let view = c.run(&run, 0).await.expect("read");
    assert_eq!(view.run_id, "r/1");
    assert_eq!(view.status, RunStatus::Running);
    let kinds: Vec<&str> = view.events.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["run.started", "text.delta"]);
    assert_eq!(c.run(&run, 1).await.expect("from seq 1").events.len(), 1);

    let listed = c.runs(None, None).await.expect("list");
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(
        (
            listed.runs[0].run_id.as_str(),
            listed.runs[0].log_key.as_str()
        ),
        ("r/1", "s1")
    );
    let done = c
        .runs(None, Some(RunStatus::Completed))
        .await
        .expect("filtered");
    assert!(done.runs.is_empty());

    // A second start on the held session is refused with who holds it.
    let busy = c.start_run(&start("r2", "s1")).await.expect_err("held");
    assert_eq!(busy.status(), Some(409));
    assert_eq!(busy.code(), Some("session_busy"));
    assert!(!busy.is_retryable());
    match busy {
        Error::Refused { body, .. } => assert_eq!(body["held_by"], "r/1"),
        other => panic!("not a refusal: {other:?}"),
    }
}

/// A claim with a multitask strategy (ADR 0394): `enqueue` on a busy session waits with its
/// place, leaves the line on request, and starts when the holder ends; `interrupt` ends the
/// open run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_wait_their_turn() {
    let c = client(&gateway(false).await);
    let with = |run: &str, strategy: &str| -> StartRun {
        serde_json::from_value(json!({
            "run_id": run, "session_id": "s", "invocable": "helper",
            "kind_of_invocable": "agent", "input": [], "multitask_strategy": strategy,
        }))
        .expect("start request")
    };
    assert!(matches!(
        c.claim_run(&with("holder", "enqueue"))
            .await
            .expect("claim"),
        RunClaim::Started(_)
    ));
    for (run, place) in [("w1", 1), ("w2", 2)] {
        match c.claim_run(&with(run, "enqueue")).await.expect("claim") {
            RunClaim::Queued(q) => {
                assert_eq!((q.position, q.status), (place, RunStatus::Pending));
            }
            other => panic!("{run} did not wait: {other:?}"),
        }
    }
    let w1 = RunRef::new("w1").session("s");
    let w2 = RunRef::new("w2").session("s");
    c.leave_line(&w2).await.expect("leave the line");
    let again = c.leave_line(&w2).await.expect_err("not waiting any more");
    assert_eq!(again.code(), Some("not_waiting"));
    let waiting = c.run_turn(&w1, 0).await.expect("turn");
    assert_eq!(
        (waiting.status, waiting.position),
        (RunStatus::Pending, Some(1))
    );

    let holder = RunRef::new("holder").session("s");
    let done = Payload::from_value(&json!({
        "kind": "run.completed", "output": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null},
    }))
    .expect("payload");
    c.append_events(&holder, &[done], None).await.expect("end");
    // The end's request started the next run.
    let started = c.run_turn(&w1, 0).await.expect("turn");
    assert_eq!(started.status, RunStatus::Running);
    assert_eq!(started.event.map(|e| e.run_id), Some("w1".to_string()));
    assert_eq!(
        c.run_turn(&w2, 0).await.expect_err("left").code(),
        Some("not_waiting")
    );

    match c
        .claim_run(&with("boss", "interrupt"))
        .await
        .expect("claim")
    {
        RunClaim::Started(s) => assert_eq!(s.ended, ["w1"]),
        other => panic!("the interrupt did not start: {other:?}"),
    }
    assert_eq!(
        c.run(&w1, 0).await.expect("read").status,
        RunStatus::Cancelled
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_submitted_reserved_and_acked() {
    let c = client(&gateway(false).await);
    let submitted = c
        .submit("jobs", &submit(json!({"payload": {"n": 1}, "id": "t1"})))
        .await
        .expect("submit");
    assert_eq!((submitted.id.as_str(), submitted.duplicate), ("t1", false));
    assert_eq!(c.queues().await.expect("queues").queues, ["jobs"]);
    assert_eq!(c.queue_stats("jobs").await.expect("stats").waiting, 1);
    assert_eq!(
        c.waiting_tasks("jobs", Some(10)).await.expect("peek").tasks[0]["id"],
        "t1"
    );

    let request = ReserveBody {
        max: Some(5),
        visibility_seconds: Some(30.0),
        wait_seconds: Some(0.0),
    };
    let reserved = c.reserve("jobs", &request).await.expect("reserve");
    assert_eq!(reserved.tasks.len(), 1);
    let task = &reserved.tasks[0];
    assert_eq!((task.id.as_deref(), task.attempt), (Some("t1"), 1));
    assert_eq!(task.payload, json!({"n": 1}));
    c.progress("jobs", &task.receipt, &json!({"done": 3}))
        .await
        .expect("progress");
    let flying = c.in_flight("jobs", None).await.expect("in flight");
    assert_eq!(flying.in_flight[0].progress, json!({"done": 3}));

    c.ack("jobs", &task.receipt).await.expect("ack");
    let stats = c.queue_stats("jobs").await.expect("stats");
    assert_eq!((stats.waiting, stats.in_flight, stats.dead), (0, 0, 0));

    // The receipt is spent: a second ack is the gateway's conflict, not a retryable error.
    let again = c.ack("jobs", &task.receipt).await.expect_err("spent");
    assert_eq!(again.status(), Some(409));
    assert_eq!(again.code(), Some("receipt_not_current"));
    assert!(!again.is_retryable() && !again.is_not_found());

    // Many acks in one request, each answered on its own.
    for id in ["t2", "t3"] {
        c.submit("jobs", &submit(json!({"payload": {}, "id": id})))
            .await
            .expect("submit");
    }
    let reserved = c.reserve("jobs", &request).await.expect("reserve");
    let mut acks: Vec<AckItem> = reserved
        .tasks
        .iter()
        .map(|t| AckItem {
            receipt: t.receipt.clone(),
            result: Some(json!({"id": t.id})),
        })
        .collect();
    acks.push(AckItem {
        receipt: task.receipt.clone(),
        result: None,
    });
    let answer = c.ack_many("jobs", acks).await.expect("ack many");
    let outcomes: Vec<(bool, Option<&str>)> = answer
        .results
        .iter()
        .map(|o| (o.ok, o.error.as_deref()))
        .collect();
    assert_eq!(
        outcomes,
        [
            (true, None),
            (true, None),
            (false, Some("receipt_not_current"))
        ]
    );
    let t3 = c.task("jobs", "t3", None).await.expect("t3");
    assert_eq!(t3.result, json!({"id": "t3"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_requeued_by_ref() {
    let c = client(&gateway(false).await);
    c.submit("jobs", &submit(json!({"payload": "x", "id": "d0"})))
        .await
        .expect("submit");
    let reserved = c
        .reserve("jobs", &ReserveBody::default())
        .await
        .expect("reserve");
    let receipt = &reserved.tasks[0].receipt;
    let reason = FailBody {
        reason: Some("boom".into()),
    };
    c.fail("jobs", receipt, &reason).await.expect("fail");

    let dead = c
        .dead_letters("jobs", Some(10))
        .await
        .expect("dead letters");
    assert_eq!(dead.total, 1);
    assert_eq!(dead.dead_letters[0]["id"], "d0");
    assert_eq!(dead.dead_letters[0]["last_error"]["message"], "boom");
    let letter = dead.dead_letters[0]["ref"]
        .as_str()
        .expect("a ref")
        .to_string();

    let by_ref = RequeueBody {
        limit: None,
        refs: Some(vec![letter.clone()]),
        priority: Some(PriorityInput::Name("high".into())),
    };
    let moved = c.requeue("jobs", &by_ref).await.expect("requeue");
    assert_eq!((moved.requeued, moved.missing.len()), (1, 0));
    let stats = c.queue_stats("jobs").await.expect("stats");
    assert_eq!((stats.dead, stats.tiers.high), (0, 1));

    // Named again, the letter is no longer dead: reported missing, nothing moved.
    let twice = c.requeue("jobs", &by_ref).await.expect("requeue again");
    assert_eq!((twice.requeued, twice.missing), (0, vec![letter]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_run_is_not_found_with_the_request_id() {
    let c = client(&gateway(false).await);
    let missing = c.run(&RunRef::new("nope"), 0).await.expect_err("no run");
    assert!(missing.is_not_found(), "{missing}");
    assert!(!missing.is_unauthorized() && !missing.is_retryable());
    assert_eq!(missing.code(), Some("unknown_run"));
    let id = missing.request_id().expect("a request id").to_string();
    assert!(missing.to_string().contains(&id), "{missing}");
    assert!(
        c.schedule("nightly")
            .await
            .expect_err("no schedule")
            .is_not_found()
    );
    let stream = c.run_stream(&RunRef::new("nope"), None).await;
    assert!(stream.expect_err("no stream").is_not_found());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized_and_never_shown() {
    let base = gateway(true).await;
    let wrong = Client::builder(&base)
        .token("wrong-secret-5678")
        .build()
        .expect("client");
    let refused = wrong.queues().await.expect_err("refused");
    assert!(refused.is_unauthorized(), "{refused}");
    assert_eq!(refused.status(), Some(401));
    assert!(!refused.to_string().contains("wrong-secret-5678"));
    assert!(!format!("{wrong:?}").contains("wrong-secret-5678"));

    let none = client(&base).queues().await.expect_err("no token");
    assert!(none.is_unauthorized());

    let good = Client::builder(&base).token(GOOD).build().expect("client");
    assert!(good.queues().await.expect("admitted").queues.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumes_after_its_last_event_id() {
    let c = client(&gateway(false).await);
    c.start_run(&start("r1", "s1")).await.expect("start");
    let run = RunRef::new("r1").session("s1");
    let deltas = [
        Payload::text_delta("m1", "a"),
        Payload::text_delta("m1", "b"),
        Payload::text_delta("m1", "c"),
    ];
    c.append_events(&run, &deltas, None).await.expect("append");

    let mut frames = c.run_stream(&run, None).await.expect("stream");
    let first = next(&mut frames).await;
    let second = next(&mut frames).await;
    assert_eq!(first.event, "run.started");
    assert_eq!(second.event, "text.delta");
    assert_eq!(second.json().expect("event JSON")["seq"], 1);
    drop(frames);

    // Resumed after the second frame: the third event comes next, nothing repeated.
    let last = second.id.as_deref().expect("an event id");
    let mut resumed = c.run_stream(&run, Some(last)).await.expect("resume");
    let third = next(&mut resumed).await;
    assert_eq!(third.json().expect("event JSON")["seq"], 2);
    assert_ne!(third.id, second.id);
    assert_eq!(next(&mut resumed).await.json().expect("JSON")["seq"], 3);

    // The run ends: its stream says so.
    c.append_events(&run, &[Payload::cancelled(None)], None)
        .await
        .expect("cancel");
    assert_eq!(next(&mut resumed).await.event, "run.cancelled");
    assert_eq!(next(&mut resumed).await.event, "end");
}

#[tokio::test]
async fn nothing_listening_is_unreachable_and_retryable() {
    // A port just bound and released: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    let c = Client::builder(format!("http://{addr}"))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let down = c.queues().await.expect_err("nothing there");
    assert!(matches!(down, Error::Unreachable { .. }), "{down:?}");
    assert!(down.is_retryable() && !down.is_not_found());

    let bad = Client::builder("ftp://x").build().expect_err("not http");
    assert!(matches!(bad, Error::Setup { .. }));
    let not_pem = Client::builder("https://x")
        .ca_pem("not a certificate")
        .build()
        .expect_err("not PEM");
    assert!(matches!(not_pem, Error::Setup { .. }), "{not_pem:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_another_shape_is_a_decode_error() {
    // Something else than a gateway answers 200 with text at the gateway's path.
    let app = axum::Router::new().route("/v1/queues", axum::routing::get(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let odd = client(&format!("http://{addr}"))
        .queues()
        .await
        .expect_err("not JSON");
    assert!(matches!(odd, Error::Decode { .. }), "{odd:?}");
    assert!(!odd.is_retryable());
}

#[tokio::test]
async fn a_task_is_read_cancelled_awaited_and_followed_by_id() {
    let base = gateway(false).await;
    let c = client(&base);
    let mut events = c.queue_events("jobs", None).await.expect("events");
    let submit = |id: &str| -> SubmitBody {
        serde_json::from_value(json!({"id": id, "payload": {"n": 1}})).expect("submit body")
    };
    c.submit("jobs", &submit("t-1")).await.expect("submit");
    let dup = c
        .submit("jobs", &submit("t-1"))
        .await
        .expect_err("a known id");
    assert!(
        matches!(&dup, Error::Refused { status: 409, error: Some(e), .. } if e == "task_exists"),
        "{dup:?}"
    );
    let task = c.task("jobs", "t-1", None).await.expect("task");
    assert_eq!(task.state, TaskState::Waiting);
    let reserved = c
        .reserve("jobs", &ReserveBody::default())
        .await
        .expect("reserve");
    let receipt = reserved.tasks[0].receipt.clone();
    // A caller waits for the end while the worker finishes.
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.task("jobs", "t-1", Some(Duration::from_secs(10))).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.ack_with_result("jobs", &receipt, &json!({"answer": 42}))
        .await
        .expect("ack");
    let done = waiter.await.expect("waiter").expect("wait");
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.result, json!({"answer": 42}));
    let frame = next(&mut events).await;
    assert_eq!(frame.event, "completed");
    let data = frame.json().expect("json");
    assert_eq!(
        (data["task_id"].clone(), data["result"].clone()),
        (json!("t-1"), json!({"answer": 42}))
    );

    // Cancel: one running task, then by ids, then every waiting one.
    c.submit("jobs", &submit("r")).await.expect("submit");
    let reserved = c
        .reserve("jobs", &ReserveBody::default())
        .await
        .expect("reserve");
    let cancelled = c.cancel_task("jobs", "r").await.expect("cancel");
    assert_eq!(
        (cancelled.outcome.as_str(), cancelled.state),
        ("cancel_requested", TaskState::Running)
    );
    let refused = c
        .ack("jobs", &reserved.tasks[0].receipt)
        .await
        .expect_err("cancelled");
    assert!(
        matches!(&refused, Error::Refused { status: 409, error: Some(e), .. } if e == "cancelled"),
        "{refused:?}"
    );
    assert_eq!(next(&mut events).await.event, "cancelled");
    for id in ["w1", "w2", "w3"] {
        c.submit("jobs", &submit(id)).await.expect("submit");
    }
    let answer = c
        .cancel_tasks("jobs", &["w1".to_string(), "nope".to_string()])
        .await
        .expect("cancel many");
    let results = answer.results.expect("results");
    assert_eq!(results[0].outcome, "cancelled");
    assert_eq!(
        (results[1].outcome.as_str(), results[1].state),
        ("unknown", None)
    );
    let purged = c.cancel_all_waiting("jobs").await.expect("purge");
    assert_eq!(purged.purged, Some(2));
    let missing = c.cancel_task("jobs", "nope").await.expect_err("unknown");
    assert!(missing.is_not_found(), "{missing:?}");
    let stats = c.queue_stats("jobs").await.expect("stats");
    assert_eq!((stats.completed, stats.cancelled), (1, 4));

    // The log as JSON pages: the five ends in order, two at a time from the oldest.
    let first = c
        .queue_events_page("jobs", None, Some(2))
        .await
        .expect("page");
    assert!(!first.gap);
    let ids: Vec<_> = first.events.iter().map(|e| e.task_id.as_str()).collect();
    assert_eq!(ids, ["t-1", "r"]);
    let rest = c
        .queue_events_page("jobs", Some(&first.cursor), None)
        .await
        .expect("page");
    let ends: Vec<_> = rest
        .events
        .iter()
        .map(|e| (e.task_id.as_str(), e.state))
        .collect();
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert!(
        ends.iter().all(|(_, s)| *s == TaskState::Cancelled),
        "{ends:?}"
    );
    assert_eq!(ends[0].0, "w1");
    let bad = c
        .queue_events_page("jobs", None, Some(1001))
        .await
        .expect_err("limit");
    assert!(
        matches!(&bad, Error::Refused { status: 422, .. }),
        "{bad:?}"
    );

    // Retention.
    let r = c.retention("jobs").await.expect("retention");
    assert_eq!(r.completed.count, 1000);
    let body: RetentionBody =
        serde_json::from_value(json!({"failed": {"count": 5, "age_seconds": 60}})).expect("body");
    let r = c.set_retention("jobs", &body).await.expect("set");
    assert_eq!((r.failed.count, r.completed.count), (5, 1000));
    let bad: RetentionBody =
        serde_json::from_value(json!({"events": {"count": 1, "age_seconds": 60}})).expect("body");
    let refused = c
        .set_retention("jobs", &bad)
        .await
        .expect_err("out of bounds");
    assert!(
        matches!(&refused, Error::Refused { status: 422, .. }),
        "{refused:?}"
    );
}

#[tokio::test]
async fn webhooks_are_created_listed_read_and_deleted() {
    let c = client(&gateway(false).await);
    let created = c
        .create_webhook(&switchyard_service::webhooks::CreateWebhook {
            // A public address, so no name needs resolving.
            url: "https://93.184.216.34/hook".into(),
            events: vec!["run.failed".into(), "task.dead".into()],
            queues: vec!["jobs".into()],
            ..Default::default()
        })
        .await
        .expect("created");
    assert!(created.secret.starts_with("whsec_"), "{created:?}");
    let id = created.webhook.id.clone();
    let list = c.webhooks().await.expect("listed");
    assert_eq!(list.webhooks.len(), 1);
    assert_eq!(list.webhooks[0].events, ["run.failed", "task.dead"]);
    assert_eq!(c.webhook(&id).await.expect("read").queues, ["jobs"]);
    assert!(
        c.webhook_deliveries(&id)
            .await
            .expect("the log")
            .deliveries
            .is_empty()
    );
    // A loopback target is refused by default, naming the field.
    let refused = c
        .create_webhook(&switchyard_service::webhooks::CreateWebhook {
            url: "http://127.0.0.1:9/hook".into(),
            events: vec!["run.failed".into()],
            ..Default::default()
        })
        .await;
    assert!(
        matches!(&refused, Err(Error::Refused { status: 422, .. })),
        "{refused:?}"
    );
    assert!(c.delete_webhook(&id).await.expect("deleted").deleted);
    let gone = c.webhook(&id).await;
    assert!(
        matches!(&gone, Err(Error::Refused { status: 404, error: Some(code), .. }) if code == "unknown_webhook"),
        "{gone:?}"
    );
}
