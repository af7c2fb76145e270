//! The recurring-schedule `Scheduler` on the memory backend, SQLite and Redis: one task per tick
//! across concurrent schedulers and across a scheduler SIGKILLed mid-run, catch-up modes,
//! disabled and unusable schedules.
//!
//! The SIGKILL check re-runs this test binary as the child scheduler process (same test name, with
//! `SWITCHYARD_SCHEDULER_CHILD` set), so no extra binary is needed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use switchyard_conformance::harness::{TempSqlite, redis_url, unique_id, unique_prefix};
use switchyard_core::MemoryFleetBackend;
use switchyard_core::fleet::{FleetBackend, IdempotencyKey, Priority, Submit};
use switchyard_fleet::{
    CatchUp, Envelope, Fired, ScheduleSpec, Scheduler, SchedulerHandle, SchedulerOptions,
};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;

type B = Arc<dyn FleetBackend>;

const CHILD: &str = "SWITCHYARD_SCHEDULER_CHILD";

fn secs(t: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(t, 0).single().expect("instant")
}

async fn put(b: &B, name: &str, spec: &ScheduleSpec) {
    spec.validate().expect("valid spec");
    b.schedule_put(name, &spec.to_json()).await.expect("put");
}

/// The task ids enqueued on `queue` (waiting, in any tier).
async fn task_ids(b: &B, queue: &str) -> Vec<String> {
    b.queue_peek(queue, 10_000)
        .await
        .expect("peek")
        .iter()
        .map(|body| Envelope::parse(body).expect("envelope").id())
        .collect()
}

/// For every second in `from..=to`: the task id the scheduler keyed for that tick, if fired.
async fn keyed_ticks(b: &B, name: &str, from: i64, to: i64) -> Vec<(i64, String)> {
    let ns = format!("schedule:{name}");
    let mut out = Vec::new();
    for t in from..=to {
        if let Some(v) = b.kv_get(&ns, &t.to_string()).await.expect("kv") {
            out.push((t, String::from_utf8(v).expect("utf8 id")));
        }
    }
    out
}

/// Every keyed tick has exactly one task on the queue and every task belongs to a keyed tick.
async fn one_task_per_tick(b: &B, name: &str, queue: &str, from: i64, to: i64) -> Vec<i64> {
    let keyed = keyed_ticks(b, name, from, to).await;
    let tasks = task_ids(b, queue).await;
    let unique: BTreeSet<&String> = tasks.iter().collect();
    assert_eq!(
        unique.len(),
        tasks.len(),
        "a task enqueued twice: {tasks:?}"
    );
    let keyed_ids: BTreeSet<&String> = keyed.iter().map(|(_, id)| id).collect();
    assert_eq!(
        keyed_ids, unique,
        "tasks and fired ticks differ: keyed {keyed:?}, tasks {tasks:?}"
    );
    keyed.into_iter().map(|(t, _)| t).collect()
}

fn fast() -> SchedulerOptions {
    SchedulerOptions::default().poll(Duration::from_millis(200))
}

async fn several_schedulers_enqueue_each_tick_once(b: B) {
    let name = unique_id("every-second");
    let queue = unique_id("q");
    let start = Utc::now().timestamp();
    put(
        &b,
        &name,
        &ScheduleSpec::new("* * * * * *", &queue, json!({"report": "daily"})).created_at(start),
    )
    .await;
    let handles: Vec<SchedulerHandle> = (0..3)
        .map(|_| Scheduler::spawn(b.clone(), fast()))
        .collect();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for h in handles {
        h.shutdown().await;
    }
    let end = Utc::now().timestamp();
    let fired = one_task_per_tick(&b, &name, &queue, start - 2, end + 2).await;
    assert!(fired.len() >= 2, "fired {fired:?} in 3.5 s");
    assert!(
        fired.iter().all(|t| *t > start),
        "only ticks after created_at"
    );
    // The envelope is the seed's, with the schedule's payload.
    let body = b.queue_peek(&queue, 1).await.expect("peek").remove(0);
    let env = Envelope::parse(&body).expect("envelope");
    assert_eq!(env.payload(), &json!({"report": "daily"}));
    assert_eq!(env.attempt(), 0);
    // The bookkeeping names the latest fired tick.
    let last = b
        .kv_get("schedule-state", &name)
        .await
        .expect("kv")
        .expect("state");
    assert_eq!(
        String::from_utf8(last).expect("utf8"),
        fired.last().expect("a tick").to_string()
    );
}

async fn catch_up_latest_and_skip(b: B) {
    // A minute tick T in the past; the schedules were created 10 minutes before it.
    let t = (Utc::now().timestamp() / 60 - 5) * 60;
    let (latest, skip, young) = (unique_id("latest"), unique_id("skip"), unique_id("young"));
    let (ql, qs, qy) = (unique_id("q"), unique_id("q"), unique_id("q"));
    let every_minute = |q: &str| ScheduleSpec::new("0 * * * * *", q, json!(1));
    put(&b, &latest, &every_minute(&ql).created_at(t - 600)).await;
    put(
        &b,
        &skip,
        &every_minute(&qs)
            .created_at(t - 600)
            .catch_up(CatchUp::Skip),
    )
    .await;
    // Created after T: T does not fire for it.
    put(&b, &young, &every_minute(&qy).created_at(t + 10)).await;
    let s = Scheduler::new(b.clone(), SchedulerOptions::default());

    // 30 s after T, ten ticks were missed: "latest" fires T once, "skip" nothing (too old).
    let fired = s.run_due(secs(t + 30)).await.expect("round");
    let names: Vec<(&str, i64, bool)> = fired
        .iter()
        .map(|f| (f.schedule.as_str(), f.tick.timestamp(), f.enqueued))
        .collect();
    assert_eq!(names, vec![(latest.as_str(), t, true)]);
    assert_eq!(task_ids(&b, &ql).await.len(), 1);
    assert_eq!(task_ids(&b, &qs).await.len(), 0);
    assert_eq!(task_ids(&b, &qy).await.len(), 0);
    // The same round again fires nothing: T is recorded.
    assert_eq!(
        s.run_due(secs(t + 31)).await.expect("round"),
        Vec::<Fired>::new()
    );

    // 2 s after the next tick: every schedule fires it ("skip" too, it is fresh).
    let fired = s.run_due(secs(t + 62)).await.expect("round");
    let mut names: Vec<(String, i64)> = fired
        .iter()
        .map(|f| (f.schedule.clone(), f.tick.timestamp()))
        .collect();
    names.sort();
    let mut want = vec![
        (latest.clone(), t + 60),
        (skip.clone(), t + 60),
        (young.clone(), t + 60),
    ];
    want.sort();
    assert_eq!(names, want);
    assert_eq!(task_ids(&b, &ql).await.len(), 2);
    assert_eq!(task_ids(&b, &qs).await.len(), 1);
    assert_eq!(task_ids(&b, &qy).await.len(), 1);
}

async fn disabled_and_unusable_schedules_fire_nothing(b: B) {
    let t = (Utc::now().timestamp() / 60 - 5) * 60;
    let (off, bad, on) = (unique_id("off"), unique_id("bad"), unique_id("on"));
    let (qoff, qon) = (unique_id("q"), unique_id("q"));
    put(
        &b,
        &off,
        &ScheduleSpec::new("* * * * * *", &qoff, json!(null))
            .created_at(t - 60)
            .enabled(false),
    )
    .await;
    b.schedule_put(&bad, br#"{"cron": "every minute", "queue": "x"}"#)
        .await
        .expect("put");
    put(
        &b,
        &on,
        &ScheduleSpec::new("* * * * * *", &qon, json!(null))
            .created_at(t - 60)
            .priority(5),
    )
    .await;
    let s = Scheduler::new(b.clone(), SchedulerOptions::default());
    let fired = s
        .run_due(secs(t))
        .await
        .expect("an unusable schedule does not fail the round");
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].schedule, on);
    assert_eq!(b.queue_size(&qoff).await.expect("size"), 0);
    assert_eq!(b.queue_size("x").await.expect("size"), 0);
    // The priority is the seed's integer: positive is the high tier.
    let stats = b.queue_stats(&qon).await.expect("stats");
    assert_eq!((stats.high, stats.normal), (1, 0));
    // Enabling it makes it fire from then on.
    put(
        &b,
        &off,
        &ScheduleSpec::new("* * * * * *", &qoff, json!(null)).created_at(t - 60),
    )
    .await;
    let fired = s.run_due(secs(t + 1)).await.expect("round");
    assert_eq!(fired.len(), 2);
    assert_eq!(b.queue_size(&qoff).await.expect("size"), 1);
    // A deleted schedule fires nothing.
    assert!(b.schedule_delete(&on).await.expect("delete"));
    let fired = s.run_due(secs(t + 2)).await.expect("round");
    assert_eq!(
        fired
            .iter()
            .map(|f| f.schedule.as_str())
            .collect::<Vec<_>>(),
        vec![off.as_str()]
    );
}

async fn a_tick_submitted_before_a_crash_is_not_enqueued_again(b: B) {
    // A scheduler that submitted tick T and died before recording it leaves only the key.
    let t = (Utc::now().timestamp() / 60 - 5) * 60;
    let name = unique_id("crashed");
    let queue = unique_id("q");
    put(
        &b,
        &name,
        &ScheduleSpec::new("0 * * * * *", &queue, json!("x")).created_at(t - 600),
    )
    .await;
    let ns = format!("schedule:{name}");
    let key = t.to_string();
    b.queue_submit(
        &queue,
        br#"{"id": "first", "payload": "x", "attempt": 0, "submitted_at": 1.0}"#,
        &Submit::new().idem(IdempotencyKey {
            ns: &ns,
            key: &key,
            value: b"first",
            ttl: Some(Duration::from_secs(7 * 86_400)),
        }),
    )
    .await
    .expect("submit");
    let s = Scheduler::new(b.clone(), SchedulerOptions::default());
    let fired = s.run_due(secs(t + 1)).await.expect("round");
    assert_eq!(fired.len(), 1);
    assert_eq!(
        (fired[0].task_id.as_str(), fired[0].enqueued),
        ("first", false)
    );
    assert_eq!(task_ids(&b, &queue).await, vec!["first".to_string()]);
    // Recorded now: the next round does not even try.
    assert!(s.run_due(secs(t + 2)).await.expect("round").is_empty());
    assert_eq!(b.queue_size(&queue).await.expect("size"), 1);
}

/// The child process: a scheduler over the backend the parent names, until it is killed
/// (bounded at 60 s so a lost child cannot linger).
async fn child(b: B) {
    let _handle = Scheduler::spawn(b, fast());
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// A scheduler process SIGKILLed mid-run, another taking over: no tick enqueued twice, and the
/// ticks after the kill still fire.
async fn sigkill_mid_run_then_take_over(b: B, test: &str, env: Vec<(&str, String)>) {
    let name = std::env::var("SWITCHYARD_SCHEDULE_NAME").unwrap_or_else(|_| unique_id("kill"));
    let queue = format!("{name}-q");
    if std::env::var_os(CHILD).is_some() {
        child(b).await;
        return;
    }
    let start = Utc::now().timestamp();
    put(
        &b,
        &name,
        &ScheduleSpec::new("* * * * * *", &queue, json!({"n": 1})).created_at(start),
    )
    .await;
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .env("SWITCHYARD_SCHEDULE_NAME", &name)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut proc = cmd.spawn().expect("spawn the child scheduler");
    // Wait until the child has fired a few ticks (at most 30 s), then SIGKILL it mid-run.
    let mut fired_by_child = 0;
    for _ in 0..300 {
        fired_by_child = keyed_ticks(&b, &name, start, Utc::now().timestamp() + 1)
            .await
            .len();
        if fired_by_child >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    proc.kill().expect("SIGKILL the child");
    let _ = proc.wait();
    assert!(
        fired_by_child >= 3,
        "the child scheduler fired {fired_by_child} ticks"
    );
    let killed_at = Utc::now().timestamp();

    // Two schedulers take over.
    let handles: Vec<SchedulerHandle> = (0..2)
        .map(|_| Scheduler::spawn(b.clone(), fast()))
        .collect();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    for h in handles {
        h.shutdown().await;
    }
    let end = Utc::now().timestamp();
    let fired = one_task_per_tick(&b, &name, &queue, start - 2, end + 2).await;
    assert!(
        fired.iter().filter(|t| **t > killed_at).count() >= 1,
        "the schedulers that took over fired nothing after {killed_at}: {fired:?}"
    );
}

async fn memory() -> B {
    Arc::new(MemoryFleetBackend::new())
}

async fn sqlite() -> B {
    let db: &'static TempSqlite = Box::leak(Box::new(TempSqlite::new()));
    Arc::new(SqliteFleetBackend::open(db.path()).await.expect("open"))
}

async fn redis_with(prefix: &str) -> B {
    let config = RedisFleetConfig::new(redis_url()).with_prefix(format!("{prefix}:"));
    Arc::new(
        RedisFleetBackend::with_config(config)
            .await
            .expect("connect"),
    )
}

async fn redis() -> B {
    redis_with(&unique_prefix("sched")).await
}

macro_rules! schedule_checks {
    ($($check:ident),* $(,)?) => {
        mod on_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::memory().await).await;
                }
            )*
        }
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::sqlite().await).await;
                }
            )*

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sigkill_mid_run_then_take_over() {
                // Parent and child share one SQLite file, named by the parent.
                let path = match std::env::var("SWITCHYARD_SCHEDULE_DB") {
                    Ok(p) => std::path::PathBuf::from(p),
                    Err(_) => {
                        let db: &'static super::TempSqlite =
                            Box::leak(Box::new(super::TempSqlite::new()));
                        db.path().to_path_buf()
                    }
                };
                let b: super::B = std::sync::Arc::new(
                    super::SqliteFleetBackend::open(&path).await.expect("open"),
                );
                super::sigkill_mid_run_then_take_over(
                    b,
                    "on_sqlite::sigkill_mid_run_then_take_over",
                    vec![("SWITCHYARD_SCHEDULE_DB", path.display().to_string())],
                )
                .await;
            }
        }
        mod on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::redis().await).await;
                }
            )*

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sigkill_mid_run_then_take_over() {
                // Parent and child share one Redis server and key prefix, named by the parent.
                let prefix = std::env::var("SWITCHYARD_SCHEDULE_PREFIX")
                    .unwrap_or_else(|_| super::unique_prefix("sched-kill"));
                let url = super::redis_url();
                let b = super::redis_with(&prefix).await;
                super::sigkill_mid_run_then_take_over(
                    b,
                    "on_redis::sigkill_mid_run_then_take_over",
                    vec![("SWITCHYARD_SCHEDULE_PREFIX", prefix), ("REDIS_URL", url)],
                )
                .await;
            }
        }
    };
}

schedule_checks!(
    several_schedulers_enqueue_each_tick_once,
    catch_up_latest_and_skip,
    disabled_and_unusable_schedules_fire_nothing,
    a_tick_submitted_before_a_crash_is_not_enqueued_again,
);

#[test]
fn priority_of_a_schedule_is_the_seeds_integer() {
    let spec = ScheduleSpec::new("* * * * * *", "q", json!(null));
    assert_eq!(spec.clone().priority(1).tier(), Priority::High);
    assert_eq!(spec.clone().priority(0).tier(), Priority::Normal);
    assert_eq!(spec.priority(-7).tier(), Priority::Low);
}
