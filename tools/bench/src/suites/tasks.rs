//! What task records cost (ADR 0380): push → reserve → ack through the port with bodies that
//! carry an id (a record per task, default retention, an end event per ack) against bodies
//! without one (today's path exactly), alternated in the same run; and on Redis the round trip
//! of a result, from the handler's return to the waiter's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_kit::core::FleetBackend;
use switchyard_kit::core::fleet::{Priority, TaskState};

use super::{at_least, case};
use crate::Ctx;
use crate::measure::{Sample, closed_loop, err, pct};
use crate::report::Case;

/// The case of bodies without ids.
pub(crate) const PLAIN: &str = "port push → reserve → ack, concurrency 64, bodies without ids";
/// The case of bodies with ids; its ratio is to [`PLAIN`].
pub(crate) const RECORDED: &str =
    "port push → reserve → ack, concurrency 64, bodies with ids (task records)";
/// The result round trip.
pub(crate) const ROUND_TRIP: &str = "task result round trip, 1 KiB (handler return → wait return)";

/// Whether any case of this suite is chosen.
pub(crate) fn wanted(ctx: &Ctx) -> bool {
    [PLAIN, RECORDED, ROUND_TRIP].iter().any(|n| ctx.wants(n))
}

/// Bodies with and without ids, alternated twice (half the case time each), so drift in the
/// machine's speed falls on both alike.
pub(crate) async fn records(ctx: &Ctx, adapter: &str, backend: Arc<dyn FleetBackend>) -> Vec<Case> {
    if !ctx.wants(PLAIN) && !ctx.wants(RECORDED) {
        return Vec::new();
    }
    let serial = Arc::new(AtomicU64::new(0));
    let mut plain = Sample::default();
    let mut recorded = Sample::default();
    for round in 0..2 {
        for ids in [false, true] {
            let queue = format!("bench-tasks-{}-{round}", if ids { "ids" } else { "plain" });
            let s = cycles(ctx, backend.clone(), queue, ids, serial.clone()).await;
            let into = if ids { &mut recorded } else { &mut plain };
            into.elapsed += s.elapsed;
            into.merge(s);
        }
    }
    plain.lat.sort();
    recorded.lat.sort();
    let base = case("tasks", adapter, PLAIN, "tasks/s", &plain, 1.0).note("no records");
    let with = case("tasks", adapter, RECORDED, "tasks/s", &recorded, 1.0)
        .against(PLAIN, Some(plain.rate()))
        .note("a record, an end event and default retention per task");
    let met = at_least(with.ratio, 0.85) && recorded.errors == 0;
    vec![base, with.target("≥ 0.85× bodies without ids", met)]
}

async fn cycles(
    ctx: &Ctx,
    backend: Arc<dyn FleetBackend>,
    queue: String,
    ids: bool,
    serial: Arc<AtomicU64>,
) -> Sample {
    let time = ctx.case_time / 2;
    closed_loop(64, time, move |w, i| {
        let (b, q) = (backend.clone(), queue.clone());
        let n = serial.fetch_add(1, Ordering::Relaxed);
        async move {
            let body = if ids {
                format!(r#"{{"id": "t{n}", "worker": {w}, "i": {i}}}"#)
            } else {
                format!(r#"{{"worker": {w}, "i": {i}, "n": {n}}}"#)
            };
            b.queue_push(&q, body.as_bytes(), Priority::Normal)
                .await
                .map_err(err)?;
            let d = b
                .queue_reserve(&q, Duration::from_secs(1), Duration::from_secs(60))
                .await
                .map_err(err)?
                .ok_or("nothing to reserve after a push")?;
            match b.queue_ack(&q, &d.receipt).await.map_err(err)? {
                true => Ok(()),
                false => Err("ack refused".to_string()),
            }
        }
    })
    .await
}

/// On Redis: a worker waits in reserve, its handler returns 1 KiB at once; a caller waits for the
/// task's end with a blocking read of the end-event log from the record's cursor (what
/// `Queue::wait` does). The gated latency runs from the handler's return (just before the
/// completing ack) to the waiter's return: the trip this design adds.
pub(crate) async fn round_trip(ctx: &Ctx, backend: Arc<dyn FleetBackend>) -> Vec<Case> {
    if !ctx.wants(ROUND_TRIP) {
        return Vec::new();
    }
    let q = format!("bench-result-{}", std::process::id());
    let result = vec![b'r'; 1024];
    let mut sample = Sample::default();
    let mut whole = Vec::new();
    // The completing ack's own call, for the note: how much of the trip is the ack's step.
    let mut acks = Vec::new();
    let until = Instant::now() + ctx.case_time;
    let started = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let id = format!("rt{n}");
        let op = async {
            let t0 = Instant::now();
            let body = format!(r#"{{"id": "{id}"}}"#);
            b_push(&backend, &q, &body).await?;
            let cursor = backend
                .task_get(&q, &id)
                .await
                .map_err(err)?
                .ok_or("no record after a push")?
                .events_cursor;
            let worker = {
                let (b, q, result) = (backend.clone(), q.clone(), result.clone());
                tokio::spawn(async move {
                    let d = b
                        .queue_reserve(&q, Duration::from_secs(5), Duration::from_secs(60))
                        .await
                        .map_err(err)?
                        .ok_or("nothing reserved")?;
                    let returned = Instant::now();
                    b.queue_complete(&q, &d.receipt, &result)
                        .await
                        .map_err(err)?;
                    Ok::<_, String>((returned, returned.elapsed()))
                })
            };
            let mut from = cursor;
            let ended = loop {
                let got = backend
                    .task_events(&q, Some(&from), 100, Duration::from_secs(5))
                    .await
                    .map_err(err)?;
                if let Some(e) = got.events.iter().find(|e| e.task_id == id) {
                    break e.clone();
                }
                if got.events.is_empty() {
                    return Err("no end event within 5 s".to_string());
                }
                from = got.cursor;
            };
            let done = Instant::now();
            let (returned, ack) = worker.await.map_err(err)??;
            if ended.state != TaskState::Completed || ended.result.as_deref() != Some(&result[..]) {
                return Err("the event lacks the inline result".to_string());
            }
            Ok::<_, String>((done.saturating_duration_since(returned), done - t0, ack))
        };
        sample.ops += 1;
        match op.await {
            Ok((trip, all, ack)) => {
                sample.lat.push(trip);
                whole.push(all);
                acks.push(ack);
            }
            Err(e) => {
                sample.errors += 1;
                sample.first_error.get_or_insert(e);
            }
        }
    }
    sample.elapsed = started.elapsed();
    sample.lat.sort();
    whole.sort();
    acks.sort();
    let rtt_ms = ctx.floors.redis_rtt.filter(|r| *r > 0.0).map(|r| 1e3 / r);
    let p50 = sample.pct_ms(50.0);
    let met = matches!((p50, rtt_ms), (Some(p), Some(f)) if p <= 3.0 * f) && sample.errors == 0;
    let whole_p50 = pct(&whole, 50.0).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let ack_p50 = pct(&acks, 50.0).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let times = match (p50, rtt_ms) {
        (Some(p), Some(f)) => format!("{:.2}× the SET round trip", p / f),
        _ => "the SET round trip unknown".into(),
    };
    let c = case("tasks", "redis", ROUND_TRIP, "trips/s", &sample, 1.0).note(format!(
        "p50 {times}; the completing ack's call p50 {ack_p50:.3} ms; push → wait whole p50 \
         {whole_p50:.3} ms"
    ));
    vec![c.target("p50 ≤ 3× the SET round trip", met)]
}

async fn b_push(b: &Arc<dyn FleetBackend>, q: &str, body: &str) -> Result<(), String> {
    b.queue_push(q, body.as_bytes(), Priority::Normal)
        .await
        .map_err(err)
}
