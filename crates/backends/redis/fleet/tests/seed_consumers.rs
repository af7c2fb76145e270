//! Seed consumers sharing a queue (issue 16): fleet-framework 0.1.0's own Redis backend
//! (`tests/fixtures/seed/backend.py`, run by `drive.py` in a venv under `target/`) and this
//! backend push to, consume from, nack with delays on and sweep one queue; every task ends
//! completed exactly once or dead-lettered, and neither side ever reads a body it cannot decode.
//! Delayed tasks are kept in the seed's form (ADR 0286), which the second test reads back raw.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_conformance::harness::{
    python_venv, redis_cmd, redis_url, unique_id, unique_prefix,
};
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{Priority, RunAt, Submit, TaskState, Tasks};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

/// Tasks in the mixed run: t-0 … t-47.
const TASKS: u64 = 48;
/// The retry delay of both sides: longer than a turn, so a retry often falls due in the other
/// side's turn and is drained by it.
const NACK_DELAY: Duration = Duration::from_millis(1200);
/// One side's consumer turn, in seconds.
const TURN: f64 = 1.0;

fn cmd(url: &str, args: &[&str]) -> String {
    redis_cmd(url, args).expect("redis command")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed")
}

/// The venv's Python with redis-py, made on first use and reused by later runs.
fn seed_python() -> PathBuf {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "this test runs the seed's Python backend: install python3 (3.9 or newer, with its venv \
         module; Debian: apt-get install python3 python3-venv) or set PYTHON to one"
    );
    python_venv(
        "seed-venv",
        Path::new(&python),
        &["redis>=5.0.1"],
        "import redis.asyncio",
    )
}

/// Runs `drive.py URL QUEUE KEY args…` and returns the JSON line it prints.
async fn drive(py: &Path, url: &str, queue: &str, key: &str, args: &[&str]) -> Value {
    let mut command = Command::new(py);
    command
        .arg(fixtures().join("drive.py"))
        .args([url, queue, key])
        .args(args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run drive.py");
    assert!(
        out.status.success(),
        "drive.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("drive.py prints one JSON line")
}

fn number(id: &str) -> u64 {
    id.strip_prefix("t-")
        .and_then(|k| k.parse().ok())
        .expect("a task id t-<k>")
}

/// What one consumer turn of ours saw.
#[derive(Default)]
struct Turn {
    undecodable: Vec<String>,
    from_seed_delay: u64,
}

/// Our consumer's turn: the rule of `drive.py`'s `handle`, through this backend.
async fn rust_turn(b: &RedisFleetBackend, queue: &str, key: &str, seen: &mut Turn) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(TURN);
    while tokio::time::Instant::now() < deadline {
        b.queue_sweep_expired(queue).await.expect("sweep");
        let Some(d) = b
            .queue_reserve(queue, Duration::from_millis(200), Duration::from_secs(1))
            .await
            .expect("reserve")
        else {
            continue;
        };
        let Ok(mut env) = serde_json::from_slice::<Value>(&d.body) else {
            seen.undecodable
                .push(String::from_utf8_lossy(&d.body).into_owned());
            continue;
        };
        if env["last"] == "seed-delay" {
            seen.from_seed_delay += 1;
        }
        let id = env["id"].as_str().expect("id").to_owned();
        let k = number(&id);
        if k % 4 == 1
            && b.kv_set_nx(key, &format!("abandoned.{id}"), b"rust", None)
                .await
                .expect("kv")
        {
            continue; // a crashed worker: the reservation lapses and a sweep returns it
        }
        let attempt = env["attempt"].as_u64().unwrap_or(0);
        if attempt < k % 3 {
            env["attempt"] = json!(attempt + 1);
            env["last"] = json!("rust-delay");
            let body = serde_json::to_vec(&env).expect("json");
            assert!(
                b.queue_nack(queue, &d.receipt, &body, NACK_DELAY)
                    .await
                    .expect("nack")
            );
        } else if k % 7 == 3 {
            assert!(
                b.queue_fail(queue, &d.receipt, &d.body)
                    .await
                    .expect("fail")
            );
        } else {
            b.counter_incr(&format!("{key}.done.{id}"), 1)
                .await
                .expect("count");
            assert!(b.queue_ack(queue, &d.receipt).await.expect("ack"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_and_rust_consumers_share_a_queue() {
    let py = seed_python();
    let url = redis_url();
    // The seed has no prefix and joins names raw: names of safe characters only, unique per run.
    let queue = unique_id("mixed");
    let key = unique_id("mixedrun");
    let b = RedisFleetBackend::connect(&url).await.expect("connect");

    // Producers on both sides: the seed pushes t-0…t-23; we push t-24…t-35 and submit t-36…t-47
    // delayed, half of them in the normal tier (the seed's form) and half in the high tier.
    drive(&py, &url, &queue, &key, &["push", "0", "23"]).await;
    for k in 24..TASKS {
        let mut env =
            json!({"id": format!("t-{k}"), "payload": {"k": k}, "attempt": 0, "by": "rust"});
        if k < 36 {
            let body = serde_json::to_vec(&env).expect("json");
            b.queue_push(&queue, &body, Priority::Normal)
                .await
                .expect("push");
        } else {
            env["last"] = json!("rust-delay");
            let body = serde_json::to_vec(&env).expect("json");
            let tier = if k < 42 {
                Priority::Normal
            } else {
                Priority::High
            };
            let submit = Submit::new()
                .priority(tier)
                .run_at(RunAt::After(NACK_DELAY));
            b.queue_submit(&queue, &body, &submit)
                .await
                .expect("submit");
        }
    }

    let dead_ids: Vec<u64> = (0..TASKS).filter(|k| k % 7 == 3).collect();
    let mut ours = Turn::default();
    let mut seed_undecodable = Vec::new();
    let mut from_rust_delay = 0;
    let mut finished = false;
    for _ in 0..40 {
        let seen = drive(&py, &url, &queue, &key, &["turn", &TURN.to_string()]).await;
        seed_undecodable.extend(
            seen["undecodable"]
                .as_array()
                .expect("list")
                .iter()
                .map(Value::to_string),
        );
        from_rust_delay += seen["from_rust_delay"].as_u64().expect("count");
        rust_turn(&b, &queue, &key, &mut ours).await;
        if !seed_undecodable.is_empty() || !ours.undecodable.is_empty() {
            break;
        }
        let stats = b.queue_stats(&queue).await.expect("stats");
        if stats.waiting() + stats.in_flight + stats.scheduled == 0
            && stats.dead == dead_ids.len() as u64
        {
            finished = true;
            break;
        }
    }
    seed_undecodable.truncate(5);
    ours.undecodable.truncate(5);
    assert!(
        seed_undecodable.is_empty(),
        "the seed read {seed_undecodable:?}"
    );
    assert!(
        ours.undecodable.is_empty(),
        "we read {:?}",
        ours.undecodable
    );
    assert!(finished, "{:?}", b.queue_stats(&queue).await);

    for k in 0..TASKS {
        let done = b
            .counter_get(&format!("{key}.done.t-{k}"))
            .await
            .expect("count");
        let expected = if k % 7 == 3 { 0 } else { 1 };
        assert_eq!(done, expected, "t-{k} completed {done} times");
    }
    let mut dead: Vec<u64> = b
        .dlq_peek(&queue, 1000)
        .await
        .expect("dlq")
        .iter()
        .map(|body| {
            let env: Value = serde_json::from_slice(body).expect("dead body decodes");
            number(env["id"].as_str().expect("id"))
        })
        .collect();
    dead.sort_unstable();
    assert_eq!(dead, dead_ids, "each poison task dead-lettered once");

    // Retries crossed sides: delayed tasks we scheduled were drained and reserved by the seed,
    // and the seed's by us.
    assert!(
        from_rust_delay > 0,
        "the seed never got one of our delayed tasks"
    );
    assert!(
        ours.from_seed_delay > 0,
        "we never got one of the seed's delayed tasks"
    );
    // Nothing orphaned beside the scheduled sets.
    for suffix in ["scheduled", "scheduled:own"] {
        assert_eq!(
            cmd(&url, &["ZCARD", &format!("fleet:queue:{queue}:{suffix}")]),
            "0"
        );
    }
    assert_eq!(
        cmd(
            &url,
            &["HLEN", &format!("fleet:queue:{queue}:scheduled:body")]
        ),
        "0"
    );
    b.close().await;
}

/// The scheduled sets as the seed reads them: a delayed task of the normal tier is its body as
/// the member; an identical body already scheduled and a task of another tier wait in our own
/// set with the body beside it; members of the former form (`{tier}:{receipt}` in the seed's
/// set, body in the hash) are still moved to their tier.
#[tokio::test]
async fn delayed_tasks_take_the_seeds_form() {
    let url = redis_url();
    let p = format!("{}:", unique_prefix("seedform"));
    let b = RedisFleetBackend::with_config(RedisFleetConfig::new(&url).with_prefix(&p))
        .await
        .expect("connect");
    let q = format!("{p}fleet:queue:jobs");
    let later = Submit::new().run_at(RunAt::After(Duration::from_millis(300)));
    // Identical copies are bodies without an id: an id a record holds is refused (ADR 0380).
    for _ in 0..2 {
        b.queue_submit("jobs", br#"{"name": "same"}"#, &later)
            .await
            .expect("submit");
    }
    b.queue_submit("jobs", b"urgent", &later.clone().priority(Priority::High))
        .await
        .expect("submit");
    assert_eq!(
        cmd(&url, &["ZRANGE", &format!("{q}:scheduled"), "0", "-1"]),
        r#"{"name": "same"}"#,
        "the seed's form: the body is the member"
    );
    let own = cmd(&url, &["ZRANGE", &format!("{q}:scheduled:own"), "0", "-1"]);
    let own: Vec<&str> = own.lines().collect();
    assert_eq!(own.len(), 2, "{own:?}");
    let mut tiers: Vec<&str> = own.iter().map(|m| &m[..2]).collect();
    tiers.sort_unstable();
    assert_eq!(tiers, ["h:", "n:"]);
    for m in &own {
        let body = cmd(&url, &["HGET", &format!("{q}:scheduled:body"), m]);
        let expected = if m.starts_with("h:") {
            "urgent"
        } else {
            r#"{"name": "same"}"#
        };
        assert_eq!(body, expected);
    }
    // The former form, as an older version of this backend wrote it.
    cmd(&url, &["ZADD", &format!("{q}:scheduled"), "1", "l:0123"]);
    cmd(
        &url,
        &["HSET", &format!("{q}:scheduled:body"), "l:0123", "old"],
    );
    let stats = b.queue_stats("jobs").await.expect("stats");
    assert_eq!((stats.scheduled, stats.due), (4, 1));

    let mut got = Vec::new();
    while got.len() < 4 {
        let d = b
            .queue_reserve("jobs", Duration::from_secs(10), Duration::from_secs(60))
            .await
            .expect("reserve")
            .expect("due within the timeout");
        got.push((d.priority, String::from_utf8(d.body).expect("utf8")));
    }
    got.sort();
    assert_eq!(
        got,
        [
            (Priority::High, "urgent".to_owned()),
            (Priority::Normal, r#"{"name": "same"}"#.to_owned()),
            (Priority::Normal, r#"{"name": "same"}"#.to_owned()),
            (Priority::Low, "old".to_owned()),
        ]
    );
    assert_eq!(cmd(&url, &["HLEN", &format!("{q}:scheduled:body")]), "0");
    b.close().await;
}

/// A queue served by seed consumers alone: a delayed task of the high tier, and a second copy of
/// a delayed body, wait in our own scheduled set, which the seed never drains, until
/// `queue_promote_due` moves them to the lists the seed reads (guarantee `queue.promote_due`, ADR
/// 0353).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoted_delayed_tasks_reach_seed_consumers() {
    let py = seed_python();
    let url = redis_url();
    // The seed has no prefix and joins names raw: names of safe characters only, unique per run.
    let queue = unique_id("promote");
    let key = unique_id("promoterun");
    let b = RedisFleetBackend::connect(&url).await.expect("connect");
    let take = |secs: &'static str| {
        let (py, url, queue, key) = (py.clone(), url.clone(), queue.clone(), key.clone());
        async move {
            let got = drive(&py, &url, &queue, &key, &["take", secs]).await;
            got["body"].as_str().map(str::to_owned)
        }
    };

    let delay = Duration::from_millis(300);
    let urgent = r#"{"id": "urgent", "by": "rust"}"#;
    // No id: the seed hands such a body out without a reservation, so two copies never share one.
    let twin = r#"{"payload": "twin"}"#;
    let later = Submit::new().run_at(RunAt::After(delay));
    b.queue_submit(
        &queue,
        urgent.as_bytes(),
        &later.clone().priority(Priority::High),
    )
    .await
    .expect("submit");
    for _ in 0..2 {
        b.queue_submit(&queue, twin.as_bytes(), &later)
            .await
            .expect("submit");
    }
    let own = format!("fleet:queue:{queue}:scheduled:own");
    assert_eq!(
        cmd(&url, &["ZCARD", &own]),
        "2",
        "the high task and the copy"
    );
    tokio::time::sleep(delay + Duration::from_millis(200)).await;

    // Without a promotion the seed drains only its own form: the first copy.
    assert_eq!(take("0.3").await.as_deref(), Some(twin));
    assert_eq!(
        take("0.3").await,
        None,
        "the seed never sees our own scheduled set"
    );

    assert_eq!(b.queue_promote_due(&queue).await.expect("promote"), 2);
    assert_eq!(
        cmd(&url, &["LLEN", &format!("fleet:queue:{queue}:high")]),
        "1"
    );
    assert_eq!(cmd(&url, &["ZCARD", &own]), "0");
    assert_eq!(
        cmd(
            &url,
            &["HLEN", &format!("fleet:queue:{queue}:scheduled:body")]
        ),
        "0"
    );
    assert_eq!(
        take("0.3").await.as_deref(),
        Some(urgent),
        "the high tier first"
    );
    assert_eq!(take("0.3").await.as_deref(), Some(twin));
    assert_eq!(take("0.3").await, None);
    let s = b.queue_stats(&queue).await.expect("stats");
    assert_eq!(s.total(), 0, "{s:?}");
    b.close().await;
}

/// A cancelled task and a timed-out one on a queue the seed's consumer shares (ADR 0380,
/// section 7): the seed never gets a task cancelled while it waited; a task whose attempt timed
/// out in our typed consumer reaches the seed as an envelope it decodes, carrying the timeout's
/// `last_error`; and a task cancelled while the seed held it is never completed after the
/// seed's reservation lapses: our consumer gets it back and the backend ends it `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_consumers_meet_cancelled_and_timed_out_tasks() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use switchyard_core::fleet::FleetBackend;
    use switchyard_fleet::{
        Backoff, CancelOutcome, Consumer, ConsumerConfig, HandlerError, PushOptions, Queue,
        RetryPolicy,
    };

    let py = seed_python();
    let url = redis_url();
    let queue = unique_id("ctl");
    let key = unique_id("ctlrun");
    let b: Arc<dyn FleetBackend> =
        Arc::new(RedisFleetBackend::connect(&url).await.expect("connect"));
    let q: Queue<Value> = Queue::new(b.clone(), queue.clone());
    let body_id = |seen: &Value| -> Option<String> {
        let text = seen["body"].as_str()?;
        let env: Value = serde_json::from_str(text).expect("the seed's body decodes");
        env["id"].as_str().map(str::to_owned)
    };

    // Cancelled while waiting: removed in the cancel's step, so the seed takes the task after it.
    let gone = q.push(&json!({"k": "cancelled"})).await.expect("push");
    let kept = q.push(&json!({"k": "kept"})).await.expect("push");
    assert_eq!(
        q.cancel(&gone).await.expect("cancel"),
        CancelOutcome::Cancelled
    );
    let took = drive(&py, &url, &queue, &key, &["take", "1"]).await;
    assert_eq!(body_id(&took).as_deref(), Some(kept.as_str()));
    let none = drive(&py, &url, &queue, &key, &["take", "0.3"]).await;
    assert_eq!(
        none["body"],
        Value::Null,
        "the cancelled task reached the seed"
    );
    assert_eq!(
        q.get(&gone).await.expect("get").expect("record").state,
        TaskState::Cancelled
    );

    // Timed out in our consumer: the attempt fails with the timeout's error and is retried 2 s
    // later (the task's own policy); our consumer stops first, so the seed takes the retry.
    let timed = q
        .push_with(
            &json!({"k": "slow"}),
            PushOptions {
                timeout: Some(Duration::from_millis(200)),
                retry: Some(
                    RetryPolicy::default()
                        .backoff(Backoff::Fixed)
                        .base(Duration::from_secs(2)),
                ),
                ..PushOptions::default()
            },
        )
        .await
        .expect("push");
    let runs = Arc::new(AtomicU32::new(0));
    let config = ConsumerConfig {
        concurrency: 1,
        poll: Duration::from_millis(50),
        sweep_every: Some(Duration::from_millis(200)),
        cancel_grace: Duration::from_millis(200),
        ..ConsumerConfig::default()
    };
    let handle = {
        let runs = runs.clone();
        Consumer::spawn(q.clone(), config.clone(), move |task| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                task.cancel.cancelled().await;
                Err::<(), HandlerError>("stopped".into())
            }
        })
    };
    for _ in 0..100 {
        if handle.stats().timed_out == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(handle.stats().timed_out, 1, "{:?}", handle.stats());
    handle.shutdown().await;
    // The seed moves due tasks only when its reserve starts: take once the retry is due.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let retried = drive(&py, &url, &queue, &key, &["take", "1"]).await;
    assert_eq!(body_id(&retried).as_deref(), Some(timed.as_str()));
    let env: Value = serde_json::from_str(retried["body"].as_str().expect("body")).expect("json");
    assert_eq!(
        env["last_error"]["message"], "timed out after 0.2 s",
        "{env}"
    );
    assert_eq!(env["timeout_seconds"], json!(0.2), "{env}");
    let info = q.get(&timed).await.expect("get").expect("record");
    assert_eq!(info.last_error.as_deref(), Some("timed out after 0.2 s"));

    // Cancelled while the seed holds it: the seed never learns, its worker dies; once its
    // reservation lapses our consumer sweeps the task back, gets it, and the backend ends it
    // `cancelled` at its first heartbeat or ack, never completed.
    let held = q.push(&json!({"k": "held"})).await.expect("push");
    let seen = drive(&py, &url, &queue, &key, &["hold", "1"]).await;
    assert_eq!(body_id(&seen).as_deref(), Some(held.as_str()));
    let info = q.get(&held).await.expect("get").expect("record");
    assert_eq!(
        (info.state, info.foreign),
        (TaskState::Running, true),
        "{info:?}"
    );
    assert_eq!(
        q.cancel(&held).await.expect("cancel"),
        CancelOutcome::CancelRequested
    );
    let handle = Consumer::spawn(q.clone(), config, |_task| async {
        Ok::<(), HandlerError>(())
    });
    let mut state = None;
    for _ in 0..250 {
        state = q.get(&held).await.expect("get").map(|i| i.state);
        if state == Some(TaskState::Cancelled) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = handle.shutdown().await;
    assert_eq!(state, Some(TaskState::Cancelled));
    assert_eq!((stats.cancelled, stats.acked), (1, 0), "{stats:?}");
    let events = q.events(None, 100, Duration::ZERO).await.expect("events");
    let ends: Vec<_> = events
        .events
        .iter()
        .filter(|e| e.task_id == held)
        .map(|e| e.state)
        .collect();
    assert_eq!(ends, [TaskState::Cancelled]);
}

/// Records of tasks a seed consumer acked (it never tells us) do not stay for ever: once a
/// record is over 10 minutes old and its task is in no reservation, scheduled set, tier or dead
/// list, `queue_maintain` removes it (ADR 0380, section 7). A record whose task still waits,
/// however old, stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintain_forgets_records_of_tasks_the_seed_acked() {
    let py = seed_python();
    let url = redis_url();
    let queue = unique_id("gone");
    let key = unique_id("gonerun");
    let b = RedisFleetBackend::connect(&url).await.expect("connect");
    for id in ["a-1", "a-2"] {
        let body =
            serde_json::to_vec(&json!({"id": id, "payload": {}, "attempt": 0})).expect("json");
        b.queue_push(&queue, &body, Priority::Normal)
            .await
            .expect("push");
    }
    // The seed takes and acks a-1; a-2 waits on.
    let took = drive(&py, &url, &queue, &key, &["take", "1"]).await;
    assert!(
        took["body"].as_str().expect("body").contains("a-1"),
        "{took}"
    );
    let records = format!("fleet:queue:{queue}:tasks");
    // Young records are left alone, found or not.
    b.queue_maintain(&queue).await.expect("maintain");
    assert!(b.task_get(&queue, "a-1").await.expect("get").is_some());
    // Both records age past 10 minutes (their submit time moved 11 minutes back).
    for id in ["a-1", "a-2"] {
        let rec = cmd(&url, &["HGET", &records, id]);
        let mut fields: Vec<String> = rec.split('|').map(str::to_owned).collect();
        let submitted: f64 = fields[4].parse().expect("submitted");
        fields[4] = format!("{:.6}", submitted - 660.0);
        cmd(&url, &["HSET", &records, id, &fields.join("|")]);
    }
    let removed = b.queue_maintain(&queue).await.expect("maintain");
    assert_eq!(removed, 1);
    assert!(b.task_get(&queue, "a-1").await.expect("get").is_none());
    let kept = b
        .task_get(&queue, "a-2")
        .await
        .expect("get")
        .expect("a-2 waits");
    assert_eq!(kept.state, TaskState::Waiting);
    assert_eq!(
        cmd(
            &url,
            &["HEXISTS", &format!("fleet:queue:{queue}:task:body"), "a-1"]
        ),
        "0"
    );
    // The waiting one is still delivered with its record.
    let d = b
        .queue_reserve(&queue, Duration::from_secs(1), Duration::from_secs(30))
        .await
        .expect("reserve")
        .expect("a-2");
    assert!(b.queue_ack(&queue, &d.receipt).await.expect("ack"));
    let done = b
        .task_get(&queue, "a-2")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(done.state, TaskState::Completed);
}
