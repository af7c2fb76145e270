//! Job queue batches on Redis: `queue_push_many` → `queue_reserve_many` → `queue_ack_many` of
//! 100 tasks each (guarantee `queue.batches`), compared with the pipelined-SET floor of the same
//! run.

use std::sync::Arc;
use std::time::Duration;

use switchyard_kit::core::FleetBackend;
use switchyard_kit::core::fleet::Priority;
use switchyard_kit::fleet::redis::{RedisFleetBackend, RedisFleetConfig};

use super::{at_least, case};
use crate::Ctx;
use crate::floor::PIPELINED;
use crate::measure::{closed_loop, err};
use crate::report::Case;
use crate::suites::store::failed;

pub(crate) const BATCH_100: &str = "queue batches of 100: push_many → reserve_many → ack_many";

/// Tasks per batch call.
const BATCH: usize = 100;
/// Concurrent workers, each on its own queue so each reserve finds its own batch.
const WORKERS: usize = 8;

pub(crate) async fn redis(ctx: &Ctx) -> Vec<Case> {
    if !ctx.wants(BATCH_100) {
        return Vec::new();
    }
    let config = RedisFleetConfig::new(ctx.redis()).with_prefix(format!("{}:batch:", ctx.prefix));
    let backend = match RedisFleetBackend::with_config(config).await {
        Ok(b) => Arc::new(b),
        Err(e) => return vec![failed("redis", e)],
    };
    let b: Arc<dyn FleetBackend> = backend.clone();
    let s = closed_loop(WORKERS, ctx.case_time, move |w, i| {
        let b = b.clone();
        async move {
            let queue = format!("bench-batch-{w}");
            let bodies: Vec<Vec<u8>> = (0..BATCH)
                .map(|k| format!(r#"{{"worker": {w}, "i": {i}, "k": {k}}}"#).into_bytes())
                .collect();
            b.queue_push_many(&queue, &bodies, Priority::Normal)
                .await
                .map_err(err)?;
            let got = b
                .queue_reserve_many(
                    &queue,
                    BATCH,
                    Duration::from_secs(1),
                    Duration::from_secs(60),
                )
                .await
                .map_err(err)?;
            if got.len() != BATCH {
                return Err(format!("reserved {} of {BATCH}", got.len()));
            }
            let receipts: Vec<_> = got.into_iter().map(|d| d.receipt).collect();
            let acked = b.queue_ack_many(&queue, &receipts).await.map_err(err)?;
            match acked.iter().all(|a| *a) {
                true => Ok(()),
                false => Err("an ack was refused".to_string()),
            }
        }
    })
    .await;
    backend.close().await;
    let c = case("queue", "redis", BATCH_100, "tasks/s", &s, BATCH as f64)
        .note(format!(
            "{WORKERS} workers, one queue each; p50/p99 per cycle of {BATCH}"
        ))
        .against(PIPELINED, ctx.floors.redis_pipelined);
    let met = at_least(c.ratio, 0.5) && c.errors == 0;
    vec![c.target("≥ 0.5× pipelined-SET floor", met)]
}
