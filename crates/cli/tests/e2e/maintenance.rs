//! The queue maintainer of `serve` and the attempts and registry of HTTP workers (ADR 0352),
//! with no consumer of ours running: only this test's HTTP requests (and, on Redis, raw
//! commands standing in for a seed worker) touch the queues.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use switchyard_conformance::harness::{RedisServer, postgres_url, redis_cmd, unique_schema};

use crate::common::{Gateway, Http, PATIENCE, eventually};
use crate::contract::Contract;

/// The maintainer period the gateways of these tests run with (the default is 1 s).
const PERIOD_MS: u64 = 250;

async fn submit(h: &Http, queue: &str, body: Value) -> Value {
    let resp = h
        .post(&format!("/v1/queues/{queue}/tasks"), &body.to_string())
        .await;
    assert_eq!(resp.code(), 201, "{}", resp.text);
    resp.json()
}

async fn reserve(h: &Http, queue: &str, body: Value) -> Vec<Value> {
    let resp = h
        .post(
            &format!("/v1/queues/{queue}/reservations"),
            &body.to_string(),
        )
        .await;
    assert_eq!(resp.code(), 200, "{}", resp.text);
    resp.json()["tasks"].as_array().cloned().expect("tasks")
}

fn on(queue: &str, receipt: &Value, verb: &str) -> String {
    let receipt = receipt.as_str().expect("receipt");
    format!(
        "/v1/queues/{queue}/reservations/{}/{verb}",
        switchyard_core::keys::quote(receipt)
    )
}

async fn stats(h: &Http, queue: &str) -> Value {
    let resp = h.get(&format!("/v1/queues/{queue}")).await;
    assert_eq!(resp.code(), 200, "{}", resp.text);
    resp.json()
}

/// A reservation whose worker vanished is handed out again within its visibility, one
/// maintainer period and a second (the promise of ADR 0352), with its attempt counted.
async fn lapsed_reservation_comes_back(gateway: &Gateway) {
    let h = gateway.http();
    submit(&h, "lapse", json!({"payload": {"n": 1}, "id": "lapse-1"})).await;
    let first = reserve(&h, "lapse", json!({"visibility_seconds": 1})).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["attempt"], 1);
    assert_eq!(first[0]["max_attempts"], 3);
    let lapses_at = Instant::now() + Duration::from_secs(1);
    // The worker is gone; another one long-polls.
    let again = loop {
        let got = reserve(&h, "lapse", json!({"wait_seconds": 5})).await;
        if !got.is_empty() {
            break got;
        }
        assert!(
            Instant::now() < lapses_at + PATIENCE,
            "the lapsed reservation never came back: {}",
            stats(&h, "lapse").await
        );
    };
    let late = Instant::now().saturating_duration_since(lapses_at);
    eprintln!("lapsed reservation redelivered {late:?} after it lapsed");
    // The promise plus a margin for a loaded 2-core machine.
    assert!(
        late <= Duration::from_millis(PERIOD_MS) + Duration::from_secs(1) + Duration::from_secs(3),
        "redelivered {late:?} after the lapse"
    );
    assert_eq!(again[0]["id"], "lapse-1");
    assert_eq!(again[0]["attempt"], 2);
    let s = stats(&h, "lapse").await;
    assert_eq!(s["in_flight"], 1, "{s}");
    assert_eq!(s["overdue"], 0, "{s}");
    let ack = h
        .post(&on("lapse", &again[0]["receipt"], "ack"), "{}")
        .await;
    assert_eq!(ack.code(), 200, "{}", ack.text);
    // Who returned it: the maintainer, or (on PostgreSQL, whose reserve also takes lapsed
    // reservations) the reserve itself when it came first. The maintainer never counts it twice.
    // A queue the maintainer moved nothing of has no series, and a family without a series is
    // not written at all, so the family's lines are asked for only when the queue has one.
    let metrics = h.get("/metrics").await.text;
    let swept = metrics
        .lines()
        .find(|l| l.starts_with("switchyard_maintainer_swept_total{queue=\"lapse\"}"));
    assert!(
        swept.is_none_or(|l| l.ends_with(" 1") || l.ends_with(" 0")),
        "{metrics}"
    );
    if swept.is_some() {
        assert!(
            metrics.contains("# TYPE switchyard_maintainer_swept counter"),
            "{metrics}"
        );
    }
}

/// `max_attempts` holds over HTTP: a nack of the last attempt dead-letters with the reason,
/// and a task whose reservations all lapsed is dead-lettered, never handed out again.
async fn attempts_are_kept(gateway: &Gateway) {
    let h = gateway.http();
    submit(
        &h,
        "tries",
        json!({"payload": "n", "id": "nacked", "max_attempts": 2}),
    )
    .await;
    for attempt in 1..=2 {
        let got = reserve(&h, "tries", json!({"wait_seconds": 5})).await;
        assert_eq!(got.len(), 1, "attempt {attempt}: {got:?}");
        assert_eq!(got[0]["attempt"], attempt);
        assert_eq!(got[0]["max_attempts"], 2);
        if attempt == 2 {
            // The retry carries the reason of the attempt before it.
            assert_eq!(got[0]["last_error"]["message"], "boom 1", "{got:?}");
        }
        let nack = h
            .post(
                &on("tries", &got[0]["receipt"], "nack"),
                &json!({"reason": format!("boom {attempt}")}).to_string(),
            )
            .await;
        assert_eq!(nack.code(), 200, "{}", nack.text);
        assert_eq!(nack.json()["dead_lettered"], attempt == 2, "{}", nack.text);
    }
    let dead = h.get("/v1/queues/tries/dead-letters").await.json();
    assert_eq!(dead["total"], 1, "{dead}");
    let letter = &dead["dead_letters"][0];
    assert_eq!(letter["id"], "nacked", "{letter}");
    assert_eq!(letter["last_error"]["message"], "boom 2", "{letter}");
    assert!(reserve(&h, "tries", json!({})).await.is_empty());

    // Every reservation lapses: after max_attempts deliveries the gateway dead-letters it.
    submit(
        &h,
        "lapses",
        json!({"payload": "x", "id": "orphan", "max_attempts": 2}),
    )
    .await;
    for attempt in 1..=2 {
        let got = reserve(
            &h,
            "lapses",
            json!({"visibility_seconds": 0.2, "wait_seconds": 10}),
        )
        .await;
        assert_eq!(got.len(), 1, "attempt {attempt}");
        assert_eq!(got[0]["attempt"], attempt);
    }
    eventually("the orphan dead-lettered after its last lapse", || async {
        // A reserve is what finds the third delivery; it hands out nothing.
        let got = reserve(&h, "lapses", json!({"wait_seconds": 1})).await;
        assert!(got.is_empty(), "handed out past max_attempts: {got:?}");
        h.get("/v1/queues/lapses/dead-letters").await.json()["total"] == 1
    })
    .await;
    let dead = h.get("/v1/queues/lapses/dead-letters").await.json();
    let letter = &dead["dead_letters"][0];
    assert_eq!(letter["id"], "orphan");
    assert_eq!(letter["attempt"], 2, "{letter}");
    let message = letter["last_error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("lapsed"), "{letter}");
}

#[tokio::test]
async fn lapsed_reservations_return_and_attempts_hold_on_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let period = PERIOD_MS.to_string();
    let gateway = Gateway::embedded(dir.path(), &["--maintain-every-ms", &period]);
    lapsed_reservation_comes_back(&gateway).await;
    attempts_are_kept(&gateway).await;
}

#[tokio::test]
async fn lapsed_reservations_return_and_attempts_hold_on_redis() {
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let period = PERIOD_MS.to_string();
    let gateway = Gateway::start_in(
        dir.path(),
        &["--redis", &redis.url(), "--maintain-every-ms", &period],
    );
    lapsed_reservation_comes_back(&gateway).await;
    attempts_are_kept(&gateway).await;
}

#[tokio::test]
async fn lapsed_reservations_return_and_attempts_hold_on_postgres() {
    let url = format!("{}?schema={}", postgres_url(), unique_schema("maint"));
    let dir = tempfile::tempdir().expect("tempdir");
    let period = PERIOD_MS.to_string();
    let gateway = Gateway::start_in(
        dir.path(),
        &["--postgres", &url, "--maintain-every-ms", &period],
    );
    lapsed_reservation_comes_back(&gateway).await;
    attempts_are_kept(&gateway).await;
}

#[tokio::test]
async fn without_the_maintainer_a_lapsed_reservation_stays_in_flight() {
    // The control: what the maintainer changes is what `--no-maintainer` leaves undone.
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &["--no-maintainer"]);
    let h = gateway.http();
    submit(&h, "lapse", json!({"payload": 1})).await;
    assert_eq!(
        reserve(&h, "lapse", json!({"visibility_seconds": 0.2}))
            .await
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let s = stats(&h, "lapse").await;
    assert_eq!(s["in_flight"], 1, "{s}");
    assert_eq!(s["overdue"], 1, "{s}");
}

/// A delayed high-tier task submitted through the gateway reaches the high list a seed worker
/// pops, though no one of ours ever reserves on the queue.
#[tokio::test]
async fn a_delayed_high_tier_task_reaches_a_seed_only_queue() {
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let url = redis.url();
    let dir = tempfile::tempdir().expect("tempdir");
    let period = PERIOD_MS.to_string();
    let gateway = Gateway::start_in(
        dir.path(),
        &["--redis", &url, "--maintain-every-ms", &period],
    );
    let h = gateway.http();
    submit(
        &h,
        "seedq",
        json!({"payload": {"k": 1}, "id": "hi-1", "priority": "high", "delay_seconds": 0.5}),
    )
    .await;
    let own = redis_cmd(&url, &["ZCARD", "fleet:queue:seedq:scheduled:own"]).expect("zcard");
    assert_eq!(
        own.trim(),
        "1",
        "a high-tier delayed task waits in our own set"
    );
    // What fleet-framework's consumer does to take a task: pop the tier's list.
    let deadline = Instant::now() + PATIENCE;
    let body = loop {
        let popped = redis_cmd(&url, &["LPOP", "fleet:queue:seedq:high"]).expect("lpop");
        if !popped.trim().is_empty() {
            break popped;
        }
        assert!(
            Instant::now() < deadline,
            "the delayed task never reached the high list"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let envelope: Value = serde_json::from_str(body.trim()).expect("an envelope");
    assert_eq!(envelope["id"], "hi-1");
    assert_eq!(envelope["payload"], json!({"k": 1}));
}

/// HTTP workers register, heartbeat with the tasks they hold and deregister; the listing (what
/// the console's Workers page reads) shows them, and the idle rule evicts a silent one.
#[tokio::test]
async fn http_workers_register_heartbeat_and_are_evicted_when_silent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(
        dir.path(),
        // Long enough that a loaded machine's pauses between the calls below never evict.
        &["--maintain-every-ms", "200", "--worker-idle-ttl-secs", "4"],
    );
    let h = gateway.http();
    let c = Contract::fetch(&h).await;
    let path = "/v1/workers/resize/w-1";
    let route = "/v1/workers/{automation_type}/{worker_id}";
    let reg = h
        .request(
            Method::PUT,
            path,
            Some(&json!({"hardware": {"cpus": 4}}).to_string()),
        )
        .await;
    assert_eq!(reg.code(), 200, "{}", reg.text);
    let reg = c.check("put", route, &reg);
    assert_eq!(reg["config_gen"], 0);
    assert_eq!(reg["idle_ttl_seconds"], 4);
    assert!(
        reg["heartbeat_seconds"]
            .as_u64()
            .is_some_and(|s| (1..2).contains(&s))
    );

    let beat = h
        .post(
            &format!("{path}/heartbeat"),
            &json!({"state": "RUNNING", "tasks": ["t-1", "t-2"], "stats": {"done": 7}}).to_string(),
        )
        .await;
    assert_eq!(beat.code(), 200, "{}", beat.text);
    c.check("post", &format!("{route}/heartbeat"), &beat);
    let list = h.get("/v1/workers").await.json();
    let w = &list["workers"][0];
    assert_eq!(w["worker_id"], "w-1", "{list}");
    assert_eq!(w["automation_type"], "resize");
    assert_eq!(w["state"], "RUNNING");
    assert_eq!(w["hardware"], json!({"cpus": 4}));
    assert_eq!(w["stats"]["held_tasks"], json!(["t-1", "t-2"]));
    assert_eq!(w["stats"]["done"], 7);

    // Bad input is refused and changes nothing.
    for body in [
        json!({"tasks": "t-1"}),
        json!({"tasks": [1]}),
        json!({"state": "x".repeat(65)}),
        json!({"stats": [1]}),
        json!({"nope": 1}),
    ] {
        let bad = h
            .post(&format!("{path}/heartbeat"), &body.to_string())
            .await;
        assert_eq!(bad.code(), 422, "{body}: {}", bad.text);
    }

    // Deregistered: gone, and a heartbeat says to register again.
    let gone = h.request(Method::DELETE, path, None).await;
    assert_eq!(gone.code(), 200, "{}", gone.text);
    assert_eq!(c.check("delete", route, &gone)["removed"], true);
    let beat = h.post(&format!("{path}/heartbeat"), "{}").await;
    assert_eq!(beat.code(), 404, "{}", beat.text);
    assert_eq!(beat.json()["error"], "not_registered");

    // A worker that stops heartbeating is evicted by the maintainer.
    let reg = h.request(Method::PUT, "/v1/workers/resize/w-2", None).await;
    assert_eq!(reg.code(), 200, "{}", reg.text);
    let registered = h.get("/v1/workers").await.json();
    assert_eq!(registered["workers"].as_array().map(Vec::len), Some(1));
    eventually("the silent worker evicted", || async {
        h.get("/v1/workers").await.json()["workers"] == json!([])
    })
    .await;
}

/// HTTP workers under load while the gateway is SIGKILLed, then a drain by HTTP workers of a
/// fresh gateway: every task is acked, none is left in flight, none is lost, and none is
/// delivered again after an ack the gateway confirmed.
async fn sigkill_under_worker_load(args: &[&str]) {
    const TASKS: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let period = PERIOD_MS.to_string();
    let mut all_args: Vec<&str> = args.to_vec();
    all_args.extend(["--maintain-every-ms", &period, "--no-scheduler"]);
    let gateway = Gateway::start_in(dir.path(), &all_args);
    let h = gateway.http();
    let mut ids = BTreeSet::new();
    for i in 0..TASKS {
        let id = format!("k-{i}");
        submit(&h, "crash", json!({"payload": i, "id": id})).await;
        ids.insert(id);
    }
    // Acks the gateway confirmed, per task id; acks whose answer the kill cut off (their
    // outcome is unknown); deliveries seen after a confirmed ack.
    let acked: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let unconfirmed: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let after_ack: Arc<Mutex<Vec<String>>> = Arc::default();
    let workers = |h: Http, stop_at: Option<usize>| {
        let (acked, unconfirmed, after_ack) =
            (acked.clone(), unconfirmed.clone(), after_ack.clone());
        tokio::spawn(async move {
            let mut handled = 0usize;
            loop {
                if stop_at.is_some_and(|n| handled >= n) {
                    return;
                }
                let body = json!({"max": 5, "visibility_seconds": 1, "wait_seconds": 1});
                let Some(resp) = h
                    .try_post("/v1/queues/crash/reservations", &body.to_string())
                    .await
                else {
                    return; // the gateway is gone
                };
                if resp.code() != 200 {
                    return;
                }
                let tasks = resp.json()["tasks"].as_array().cloned().unwrap_or_default();
                if tasks.is_empty() && stop_at.is_none() {
                    return; // drained
                }
                for t in tasks {
                    let id = t["id"].as_str().unwrap_or_default().to_string();
                    if acked.lock().expect("lock").contains_key(&id) {
                        after_ack.lock().expect("lock").push(id.clone());
                    }
                    // Some tasks are dropped mid-work: their worker "dies".
                    if handled % 7 == 3 {
                        handled += 1;
                        continue;
                    }
                    match h.try_post(&on("crash", &t["receipt"], "ack"), "{}").await {
                        Some(r) if r.code() == 200 => {
                            *acked.lock().expect("lock").entry(id).or_default() += 1;
                        }
                        Some(_) => {}
                        None => {
                            unconfirmed.lock().expect("lock").insert(id);
                            return;
                        }
                    }
                    handled += 1;
                }
            }
        })
    };
    let first: Vec<_> = (0..4)
        .map(|_| workers(h.clone(), Some(usize::MAX)))
        .collect();
    eventually("a third of the tasks acked", || async {
        acked.lock().expect("lock").len() >= TASKS / 3
    })
    .await;
    drop(gateway); // SIGKILL mid-load
    for w in first {
        let _ = w.await;
    }

    let period = PERIOD_MS.to_string();
    let mut all_args: Vec<&str> = args.to_vec();
    all_args.extend(["--maintain-every-ms", &period, "--no-scheduler"]);
    let gateway = Gateway::start_in(dir.path(), &all_args);
    let h = gateway.http();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let drain: Vec<_> = (0..4).map(|_| workers(h.clone(), None)).collect();
        for w in drain {
            let _ = w.await;
        }
        let s = stats(&h, "crash").await;
        let total: u64 = ["waiting", "in_flight", "scheduled"]
            .iter()
            .map(|k| s[*k].as_u64().unwrap_or(0))
            .sum();
        if total == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "tasks stranded: {s}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Tasks whose worker kept dropping them reached their maximum and were dead-lettered:
    // that is an end too, but never beside an ack.
    let dead = h
        .get("/v1/queues/crash/dead-letters?limit=1000")
        .await
        .json();
    let dead: BTreeSet<String> = dead["dead_letters"]
        .as_array()
        .expect("dead letters")
        .iter()
        .map(|d| d["id"].as_str().unwrap_or_default().to_string())
        .collect();
    let acked = acked.lock().expect("lock").clone();
    let unconfirmed = unconfirmed.lock().expect("lock").clone();
    let doubled: Vec<_> = acked.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "acked twice: {doubled:?}");
    let both: Vec<_> = dead.iter().filter(|id| acked.contains_key(*id)).collect();
    assert!(both.is_empty(), "acked and dead-lettered: {both:?}");
    // A task whose ack the kill cut off may have been acked with no answer: only those may
    // be neither confirmed acked nor dead.
    let lost: Vec<_> = ids
        .iter()
        .filter(|id| !acked.contains_key(*id) && !dead.contains(*id) && !unconfirmed.contains(*id))
        .collect();
    assert!(lost.is_empty(), "tasks lost: {lost:?}");
    assert!(
        after_ack.lock().expect("lock").is_empty(),
        "delivered after a confirmed ack: {:?}",
        after_ack.lock().expect("lock")
    );
    eprintln!(
        "sigkill drain: {} acked, {} dead-lettered, {} acks unconfirmed at the kill",
        acked.len(),
        dead.len(),
        unconfirmed.len()
    );
}

#[tokio::test]
async fn a_sigkilled_gateway_strands_no_task_on_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("crash.db");
    sigkill_under_worker_load(&["--sqlite", db.to_str().expect("utf-8")]).await;
}

#[tokio::test]
async fn a_sigkilled_gateway_strands_no_task_on_redis() {
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    sigkill_under_worker_load(&["--redis", &redis.url()]).await;
}
