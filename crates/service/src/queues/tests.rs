//! The queue rules on the memory fleet backend.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::fleet::MemoryFleetBackend;
use switchyard_core::{ManualClock, Priority, Receipt};

use super::*;

fn queues() -> Queues {
    Queues::new(Arc::new(MemoryFleetBackend::new()))
}

/// The service over a backend whose clock the test moves (reservations lapse on it).
fn queues_at(clock: &Arc<ManualClock>) -> Queues {
    Queues::new(Arc::new(MemoryFleetBackend::with_clock(clock.clone())))
}

fn submit_body(payload: Value) -> SubmitBody {
    serde_json::from_value(json!({ "payload": payload })).expect("a submit body")
}

fn body<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a request body")
}

/// The field a refusal names (`Invalid`), or panics.
fn field_of<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Err(Error::Invalid { field, .. }) => field,
        other => panic!("expected a refusal naming a field, got {other:?}"),
    }
}

fn one() -> ReserveOptions {
    ReserveBody::default().options().expect("defaults")
}

#[tokio::test]
async fn submit_wraps_the_payload_and_keys_dedupe() {
    let q = queues();
    let mut first = submit_body(json!({"n": 1}));
    first.idempotency_key = Some("k".into());
    first.id = Some("t-1".into());
    let a = q.submit("jobs", first.clone()).await.expect("submit");
    assert_eq!((a.id.as_str(), a.duplicate), ("t-1", false));
    first.id = Some("t-2".into());
    let b = q.submit("jobs", first).await.expect("duplicate");
    assert_eq!((b.id.as_str(), b.duplicate), ("t-1", true), "the first id");
    let waiting = q.peek("jobs", None).await.expect("peek");
    assert_eq!(waiting.tasks.len(), 1);
    assert_eq!(waiting.tasks[0]["id"], "t-1");
    assert_eq!(waiting.tasks[0]["payload"], json!({"n": 1}));
}

#[tokio::test]
async fn submit_refuses_what_the_contract_refuses() {
    let q = queues();
    assert_eq!(
        field_of(q.submit("q", submit_body(Value::Null)).await),
        "payload"
    );
    let both: SubmitBody = body(json!({"payload": 1, "delay_seconds": 1, "run_at": 1}));
    assert_eq!(field_of(q.submit("q", both).await), "run_at");
    for run_at in [json!("tomorrow"), json!("2099-01-01T00:00:00Z"), json!(-1)] {
        let b: SubmitBody = body(json!({"payload": 1, "run_at": run_at}));
        assert_eq!(field_of(q.submit("q", b).await), "run_at");
    }
    let b: SubmitBody = body(json!({"payload": 1, "priority": "urgent"}));
    assert_eq!(field_of(q.submit("q", b).await), "priority");
    let b: SubmitBody = body(json!({"payload": 1, "max_attempts": 1001}));
    assert_eq!(field_of(q.submit("q", b).await), "max_attempts");
    let b: SubmitBody = body(json!({"payload": 1, "id": "a\nb"}));
    assert_eq!(field_of(q.submit("q", b).await), "id");
    assert!(serde_json::from_value::<SubmitBody>(json!({"payload": 1, "nope": 1})).is_err());
    let stats = q.stats("q").await.expect("stats");
    assert_eq!(
        stats.waiting + stats.scheduled,
        0,
        "nothing refused was stored"
    );
}

#[tokio::test]
async fn delayed_submits_are_scheduled_and_priorities_tiered() {
    let q = queues();
    let later: SubmitBody = body(json!({"payload": 1, "delay_seconds": 3600}));
    q.submit("q", later).await.expect("delayed");
    let high: SubmitBody = body(json!({"payload": 2, "priority": 5}));
    q.submit("q", high).await.expect("high");
    let stats = q.stats("q").await.expect("stats");
    assert_eq!(
        (stats.scheduled, stats.tiers.high, stats.waiting),
        (1, 1, 1)
    );
    assert_eq!(stats.dead_letters, stats.dead);
}

#[tokio::test]
async fn reserve_options_are_bounded() {
    for (b, field) in [
        (json!({"max": 0}), "max"),
        (json!({"max": 101}), "max"),
        (json!({"visibility_seconds": 43_201}), "visibility_seconds"),
        (json!({"visibility_seconds": 0}), "visibility_seconds"),
        (json!({"wait_seconds": 31}), "wait_seconds"),
        (json!({"wait_seconds": -1}), "wait_seconds"),
    ] {
        assert_eq!(
            field_of(body::<ReserveBody>(b.clone()).options()),
            field,
            "{b}"
        );
    }
    let opts = body::<ReserveBody>(json!({"max": 5, "wait_seconds": 2})).options();
    let opts = opts.expect("in bounds");
    assert_eq!((opts.max, opts.wait), (5, Duration::from_secs(2)));
    assert_eq!(opts.visibility, Duration::from_secs(30), "the default");
}

#[tokio::test]
async fn a_task_is_acked_once() {
    let q = queues();
    q.submit("q", submit_body(json!("x")))
        .await
        .expect("submit");
    let got = q.reserve("q", one()).await.expect("reserve").tasks;
    assert_eq!(got.len(), 1);
    let t = &got[0];
    assert_eq!(
        (t.attempt, t.max_attempts, t.priority.as_str()),
        (1, 3, "normal")
    );
    assert_eq!(t.payload, json!("x"));
    let receipt = Receipt::new(t.receipt.clone());
    q.progress("q", &receipt, &json!({"pct": 50}))
        .await
        .expect("progress");
    let seen = q.in_flight("q", None).await.expect("in flight").in_flight;
    assert_eq!(seen[0].progress, json!({"pct": 50}));
    q.ack("q", &receipt).await.expect("ack");
    let again = q.ack("q", &receipt).await.expect_err("a second ack");
    assert_eq!(again.code(), "receipt_not_current");
    let big = json!({"blob": "x".repeat(70 * 1024)});
    assert_eq!(field_of(q.progress("q", &receipt, &big).await), "body");
}

#[tokio::test]
async fn a_nack_of_the_last_attempt_dead_letters_with_its_reason() {
    let q = queues();
    let b: SubmitBody = body(json!({"payload": 1, "max_attempts": 2}));
    q.submit("q", b).await.expect("submit");
    let first = q.reserve("q", one()).await.expect("reserve").tasks;
    let receipt = Receipt::new(first[0].receipt.clone());
    let nacked = q
        .nack("q", &receipt, body(json!({"reason": "flaky"})))
        .await
        .expect("nack");
    assert!(!nacked.dead_lettered);
    let second = q.reserve("q", one()).await.expect("again").tasks;
    assert_eq!(second[0].attempt, 2);
    let last = second[0].last_error.as_ref().expect("the first failure");
    assert_eq!((last.message.as_str(), last.attempt), ("flaky", 1));
    let receipt = Receipt::new(second[0].receipt.clone());
    let nacked = q
        .nack("q", &receipt, NackBody::default())
        .await
        .expect("nack");
    assert!(nacked.dead_lettered, "{nacked:?}");
    let dead = q.dead_letters("q", None).await.expect("letters");
    assert_eq!(dead.total, 1);
    assert_eq!(
        dead.dead_letters[0]["last_error"]["message"],
        "nacked at its last attempt (2 of 2)"
    );
    let long = "x".repeat(worker::MAX_REASON_BYTES + 1);
    let refused = q.fail("q", &receipt, FailBody { reason: Some(long) }).await;
    assert_eq!(field_of(refused), "reason");
}

#[tokio::test]
async fn fail_dead_letters_and_a_ref_requeues_it() {
    let q = queues();
    q.submit("q", submit_body(json!({"k": 1})))
        .await
        .expect("submit");
    let got = q.reserve("q", one()).await.expect("reserve").tasks;
    let receipt = Receipt::new(got[0].receipt.clone());
    let failed = FailBody {
        reason: Some("boom".into()),
    };
    q.fail("q", &receipt, failed).await.expect("fail");
    let dead = q.dead_letters("q", None).await.expect("letters");
    let letter = &dead.dead_letters[0];
    assert_eq!(letter["last_error"]["message"], "boom");
    let r = letter["ref"].as_str().expect("a ref").to_string();
    let both: RequeueBody = body(json!({"refs": [r.clone()], "limit": 1}));
    assert_eq!(field_of(q.requeue("q", both).await), "refs");
    let bad: RequeueBody = body(json!({"refs": ["*"]}));
    assert_eq!(field_of(q.requeue("q", bad).await), "refs[0]");
    let chosen: RequeueBody = body(json!({"refs": [r, "bm9wZQ"], "priority": "low"}));
    let moved = q.requeue("q", chosen).await.expect("requeue");
    assert_eq!(
        (moved.requeued, moved.missing),
        (1, vec!["bm9wZQ".to_string()])
    );
    let stats = q.stats("q").await.expect("stats");
    assert_eq!((stats.tiers.low, stats.dead), (1, 0));
    let replayed = Replayed::from(q.requeue("q", RequeueBody::default()).await.expect("all"));
    assert_eq!((replayed.requeued, replayed.replayed), (0, 0));
}

#[tokio::test]
async fn a_delivery_past_its_attempts_is_dead_lettered_not_handed_out() {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let q = queues_at(&clock);
    let b: SubmitBody = body(json!({"payload": 1, "max_attempts": 1}));
    q.submit("q", b).await.expect("submit");
    let short = body::<ReserveBody>(json!({"visibility_seconds": 1})).options();
    let short = short.expect("options");
    assert_eq!(q.reserve("q", short).await.expect("first").tasks.len(), 1);
    // The worker died: its reservation lapses, and the second delivery is past the maximum.
    clock.advance(chrono::TimeDelta::seconds(5));
    // The queue maintainer's sweep puts the lapsed reservation back.
    assert_eq!(q.fleet().queue_sweep_expired("q").await.expect("sweep"), 1);
    let second = q.reserve("q", short).await.expect("second");
    assert!(second.tasks.is_empty(), "{second:?}");
    let dead = q.dead_letters("q", None).await.expect("letters");
    assert_eq!(dead.total, 1);
    let message = dead.dead_letters[0]["last_error"]["message"].as_str();
    assert!(
        message.is_some_and(|m| m.contains("max_attempts 1")),
        "{dead:?}"
    );
}

#[tokio::test]
async fn an_expired_task_is_dropped_unrun() {
    let q = queues();
    let b: SubmitBody = body(json!({"payload": 1, "ttl_seconds": 0}));
    q.submit("q", b).await.expect("submit");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        q.reserve("q", one())
            .await
            .expect("reserve")
            .tasks
            .is_empty()
    );
    let stats = q.stats("q").await.expect("stats");
    assert_eq!((stats.waiting, stats.in_flight, stats.dead), (0, 0, 0));
}

#[tokio::test]
async fn pause_and_rate_limits() {
    let q = queues();
    let paused = q.set_paused("q", true).await.expect("pause");
    assert!(paused.paused && paused.changed);
    assert!(!q.set_paused("q", true).await.expect("again").changed);
    q.submit("q", submit_body(json!(1))).await.expect("submit");
    assert!(
        q.reserve("q", one())
            .await
            .expect("paused")
            .tasks
            .is_empty()
    );
    let zero: RateLimitBody = body(json!({"max": 0, "per_seconds": 1}));
    assert_eq!(field_of(q.set_rate_limit("q", Some(&zero)).await), "max");
    assert!(
        serde_json::from_value::<RateLimitBody>(json!({"max": 0.5, "per_seconds": 1})).is_err()
    );
    let huge: RateLimitBody = body(json!({"max": 1, "per_seconds": 86_401}));
    assert_eq!(
        field_of(q.set_rate_limit("q", Some(&huge)).await),
        "per_seconds"
    );
    let limit: RateLimitBody = body(json!({"max": 2, "per_seconds": 1.5}));
    let stats = q.set_rate_limit("q", Some(&limit)).await.expect("limit");
    let set = stats.rate_limit.expect("a limit");
    assert_eq!((set.max, set.per_seconds), (2, 1.5));
    let stats = q.set_rate_limit("q", None).await.expect("cleared");
    assert!(stats.rate_limit.is_none() && stats.paused);
}

#[tokio::test]
async fn names_leave_out_what_no_route_accepts() {
    let q = queues();
    let submit = switchyard_core::fleet::Submit::new();
    q.fleet()
        .queue_submit("a\nb", b"{}", &submit)
        .await
        .expect("raw");
    q.fleet()
        .queue_submit("b", b"{}", &submit)
        .await
        .expect("raw");
    let names = q
        .names(["a".to_string(), "b".to_string()])
        .await
        .expect("names");
    assert_eq!(names.queues, ["a", "b"]);
}

#[tokio::test]
async fn schedules_are_checked_and_stored() {
    let q = queues();
    let doc = |v: Value| v.as_object().cloned().expect("an object");
    let bad = q
        .put_schedule("s", doc(json!({"cron": "not cron", "queue": "q"})))
        .await;
    let Err(Error::Backend(switchyard_core::Error::InvalidInput { field, .. })) = bad else {
        panic!("a refusal naming the field: {bad:?}");
    };
    assert_eq!(field, "cron");
    assert_eq!(
        q.schedule("s").await.expect_err("nothing stored").code(),
        "unknown_schedule"
    );
    let put = q
        .put_schedule("s", doc(json!({"cron": "0 0 3 * * *", "queue": "q"})))
        .await
        .expect("stored");
    assert!(
        put.spec["created_at"]
            .as_i64()
            .is_some_and(|t| t > 1_700_000_000)
    );
    assert_eq!(q.schedule("s").await.expect("read").spec, put.spec);
    assert_eq!(q.schedules().await.expect("list").schedules.len(), 1);
    assert!(q.delete_schedule("s").await.expect("delete").deleted);
    assert!(!q.delete_schedule("s").await.expect("again").deleted);
}

#[tokio::test]
async fn workers_register_heartbeat_and_leave() {
    let q = queues();
    let ttl = Some(Duration::from_secs(20));
    let beat = q
        .heartbeat("resize", "w", HeartbeatBody::default(), ttl)
        .await;
    assert_eq!(beat.expect_err("unregistered").code(), "not_registered");
    let reg: RegisterBody = body(json!({"hardware": {"cpus": 4}}));
    let answer = q.register("resize", "w", reg, ttl).await.expect("register");
    assert_eq!(
        (answer.heartbeat_seconds, answer.idle_ttl_seconds),
        (5, Some(20))
    );
    let hb: HeartbeatBody = body(json!({"tasks": ["t-1"], "stats": {"done": 7}}));
    q.heartbeat("resize", "w", hb, ttl)
        .await
        .expect("heartbeat");
    let listed = q.workers(Some("resize")).await.expect("list").workers;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].state.as_str(), listed[0].worker_id.as_str()),
        ("RUNNING", "w")
    );
    assert_eq!(listed[0].stats, json!({"done": 7, "held_tasks": ["t-1"]}));
    assert_eq!(listed[0].hardware, json!({"cpus": 4}));
    for (b, field) in [
        (json!({"state": "x".repeat(65)}), "state"),
        (json!({"state": ""}), "state"),
        (json!({"tasks": ["a\nb"]}), "tasks"),
        (json!({"last_error": "a\u{1}b"}), "last_error"),
    ] {
        let refused = q.heartbeat("resize", "w", body(b.clone()), ttl).await;
        assert_eq!(field_of(refused), field, "{b}");
    }
    assert!(q.deregister("resize", "w").await.expect("remove").removed);
    assert!(q.workers(None).await.expect("list").workers.is_empty());
}

#[test]
fn priorities() {
    assert_eq!(parse_priority_text("high").ok(), Some(Priority::High));
    assert_eq!(field_of(parse_priority_text("urgent")), "--priority");
    let level: PriorityInput = serde_json::from_value(json!(-3)).expect("an integer");
    assert_eq!(level.tier("priority").ok(), Some(Priority::Low));
    assert!(serde_json::from_value::<PriorityInput>(json!(true)).is_err());
    assert_eq!(body_json(b"\xff"), json!({"raw": "\u{fffd}"}));
}

#[tokio::test]
async fn a_submit_carries_its_timeout_and_retry_policy_within_bounds() {
    let q = queues();
    let first: SubmitBody = body(json!({
        "id": "t-1", "payload": {"n": 1}, "timeout_seconds": 30,
        "retry": {"backoff": "fixed", "base_seconds": 2, "cap_seconds": 10, "jitter": "full"},
    }));
    q.submit("jobs", first).await.expect("submit");
    let waiting = q.peek("jobs", None).await.expect("peek");
    assert_eq!(waiting.tasks[0]["timeout_seconds"], json!(30));
    assert_eq!(waiting.tasks[0]["retry"]["backoff"], "fixed");
    for (extra, field) in [
        (json!({"timeout_seconds": 0}), "timeout_seconds"),
        (json!({"timeout_seconds": 86401}), "timeout_seconds"),
        (json!({"retry": {"base_seconds": -1}}), "retry.base_seconds"),
        (
            json!({"retry": {"cap_seconds": 86401}}),
            "retry.cap_seconds",
        ),
        (
            json!({"retry": {"base_seconds": 20, "cap_seconds": 10}}),
            "retry.base_seconds",
        ),
        (json!({"retry": {"backoff": "linear"}}), "retry.backoff"),
        (json!({"retry": {"jitter": "some"}}), "retry.jitter"),
    ] {
        let mut v = json!({"payload": {"n": 1}});
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        let refused = q.submit("jobs", body(v)).await;
        match refused {
            Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field, "{extra}"),
            Err(Error::Backend(switchyard_core::Error::InvalidInput { field: f, .. })) => {
                assert_eq!(f, field, "{extra}")
            }
            other => panic!("{extra}: {other:?}"),
        }
    }
}
