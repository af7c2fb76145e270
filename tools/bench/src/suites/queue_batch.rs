//! Job queue on SQLite at the backend's own calls: one task per call, and batches of 100
//! (`queue_push_many` → `queue_reserve_many` → `queue_ack_many`), at concurrency 64, against the
//! SQLite 1-row write-transaction floor of the same run (ADR 0291).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchyard_kit::core::fleet::Priority;
use switchyard_kit::core::fleet::prelude::*;
use switchyard_kit::fleet::sqlite::SqliteFleetBackend;

use super::{at_least, case};
use crate::Ctx;
use crate::floor::SQLITE_TX;
use crate::measure::{closed_loop, err};
use crate::report::Case;
use crate::suites::store::failed;

pub(crate) const CALLS_64: &str = "queue push → reserve → ack, concurrency 64, backend calls";
pub(crate) const BATCH_64: &str =
    "queue push_many → reserve_many → ack_many of 100, concurrency 64";

const BATCH: usize = 100;
const VIS: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(1);

/// A body about the size of the typed layer's envelope.
fn body(w: usize, i: u64, k: usize) -> Vec<u8> {
    json!({"id": format!("{w}-{i}-{k}"), "payload": {"worker": w, "i": i}, "attempts": 0})
        .to_string()
        .into_bytes()
}

pub(crate) async fn sqlite(ctx: &Ctx) -> Vec<Case> {
    let mut out = Vec::new();
    for (name, file) in [(CALLS_64, "calls.db"), (BATCH_64, "batch.db")] {
        if !ctx.wants(name) {
            continue;
        }
        let b = match SqliteFleetBackend::open(ctx.sqlite_dir.join(file)).await {
            Ok(b) => Arc::new(b),
            Err(e) => {
                out.push(failed("sqlite", e));
                continue;
            }
        };
        let c = if name == CALLS_64 {
            calls(ctx, b.clone()).await
        } else {
            batches(ctx, b.clone()).await
        };
        let c = c.against(SQLITE_TX, ctx.floors.sqlite_tx);
        let (min, what) = if name == CALLS_64 {
            (1.0, "≥ 1.0× 1-row write transaction")
        } else {
            (3.0, "≥ 3× 1-row write transaction")
        };
        let met = at_least(c.ratio, min) && c.errors == 0;
        out.push(c.target(what, met));
        b.close().await;
    }
    out
}

async fn calls(ctx: &Ctx, b: Arc<SqliteFleetBackend>) -> Case {
    let q = b.clone();
    let s = closed_loop(64, ctx.case_time, move |w, i| {
        let q = q.clone();
        async move {
            q.queue_push("bench", &body(w, i, 0), Priority::Normal)
                .await
                .map_err(err)?;
            let Some(d) = q.queue_reserve("bench", WAIT, VIS).await.map_err(err)? else {
                return Err("nothing to reserve after a push".to_string());
            };
            match q.queue_ack("bench", &d.receipt).await.map_err(err)? {
                true => Ok(()),
                false => Err("ack refused".to_string()),
            }
        }
    })
    .await;
    case("queue", "sqlite", CALLS_64, "tasks/s", &s, 1.0).note(left(&*b).await)
}

async fn batches(ctx: &Ctx, b: Arc<SqliteFleetBackend>) -> Case {
    let q = b.clone();
    let s = closed_loop(64, ctx.case_time, move |w, i| {
        let q = q.clone();
        async move {
            let bodies: Vec<Vec<u8>> = (0..BATCH).map(|k| body(w, i, k)).collect();
            q.queue_push_many("bench", &bodies, Priority::Normal)
                .await
                .map_err(err)?;
            // Every worker pushes its 100 before it reserves, so 100 are there for each; they
            // may come in parts while other workers take theirs.
            let mut got = Vec::with_capacity(BATCH);
            while got.len() < BATCH {
                let more = q
                    .queue_reserve_many("bench", BATCH - got.len(), WAIT, VIS)
                    .await
                    .map_err(err)?;
                if more.is_empty() {
                    return Err("nothing to reserve after a push".to_string());
                }
                got.extend(more.into_iter().map(|d| d.receipt));
            }
            let acked = q.queue_ack_many("bench", &got).await.map_err(err)?;
            match acked.iter().all(|a| *a) {
                true => Ok(()),
                false => Err("ack refused".to_string()),
            }
        }
    })
    .await;
    case("queue", "sqlite", BATCH_64, "tasks/s", &s, BATCH as f64)
        .note(format!("100 tasks per iteration; {}", left(&*b).await))
}

async fn left(b: &dyn FleetBackend) -> String {
    b.queue_size("bench").await.map_or_else(
        |e| format!("len failed: {e}"),
        |n| format!("{n} left queued"),
    )
}
