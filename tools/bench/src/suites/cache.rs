//! Checkpoint cache: `get_many` / `set_many` of 100 entries, one caller, through the typed layer
//! with its default serializer (msgpack, as deer-flow writes), so each call includes encoding or
//! decoding the entries.

use std::sync::Arc;

use serde_json::json;
use std::time::Duration;
use switchyard_kit::checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};

use switchyard_kit::core::cache::{HistoryCache, HistoryEntry, make_history_key};

use super::case;
use crate::Ctx;
use crate::floor::PIPELINED;
use crate::measure::closed_loop;
use crate::report::Case;
use crate::suites::store::failed;

pub(crate) const GET_100: &str = "cache get_many, 100 keys (all hits)";
pub(crate) const SET_100: &str = "cache set_many, 100 entries";

/// A typical small history: three chat messages (~400 bytes encoded).
fn entry(i: usize) -> HistoryEntry {
    HistoryEntry::from_json(
        vec![
            json!({"type": "human", "content": format!("question {i}"), "id": format!("h{i}")}),
            json!({"type": "ai", "content": "an answer of a few dozen characters, like most replies", "id": format!("a{i}")}),
            json!({"type": "tool", "content": "{\"result\": 42}", "tool_call_id": format!("c{i}")}),
        ],
        None,
    )
}

pub(crate) async fn run(ctx: &Ctx) -> Vec<Case> {
    if !ctx.wants(GET_100) && !ctx.wants(SET_100) {
        return Vec::new();
    }
    let port =
        match RedisCheckpointCache::connect(ctx.redis(), RedisCheckpointCacheOptions::default())
            .await
        {
            Ok(c) => c,
            Err(e) => return vec![failed("redis", e)],
        };
    if !port.wait_connected(Duration::from_secs(10)).await {
        return vec![failed("redis", "no connection within 10 s")];
    }
    let cache = Arc::new(HistoryCache::new(Arc::new(port)));
    let prefix = format!("{}:cache", ctx.prefix);
    let keys: Arc<Vec<String>> = Arc::new(
        (0..100)
            .map(|i| make_history_key(&prefix, "thread", "", &format!("c{i}"), "messages"))
            .collect(),
    );
    let batch: Arc<Vec<(String, HistoryEntry)>> = Arc::new(
        keys.iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), entry(i)))
            .collect(),
    );
    cache.set_many(batch.to_vec()).await;

    let mut out = Vec::new();
    if ctx.wants(GET_100) {
        let (c, k) = (cache.clone(), keys.clone());
        let s = closed_loop(1, ctx.case_time, move |_, _| {
            let (c, k) = (c.clone(), k.clone());
            async move {
                let got = c.get_many(&k).await;
                if got.len() == k.len() {
                    Ok(())
                } else {
                    Err(format!("{} of {} hits", got.len(), k.len()))
                }
            }
        })
        .await;
        let calls = s.rate();
        out.push(
            case("cache", "redis", GET_100, "keys/s", &s, 100.0)
                .against(PIPELINED, ctx.floors.redis_pipelined)
                .note(format!("{calls:.0} calls/s; latency per call")),
        );
    }
    if ctx.wants(SET_100) {
        let (c, b) = (cache.clone(), batch.clone());
        let s = closed_loop(1, ctx.case_time, move |_, _| {
            let (c, b) = (c.clone(), b.clone());
            async move {
                // set_many takes its entries by value; the clone is part of the call.
                c.set_many(b.to_vec()).await;
                Ok(())
            }
        })
        .await;
        let calls = s.rate();
        out.push(
            case("cache", "redis", SET_100, "keys/s", &s, 100.0)
                .against(PIPELINED, ctx.floors.redis_pipelined)
                .note(format!("{calls:.0} calls/s; latency per call; failures degrade to misses (stats: {:?})", cache.stats())),
        );
    }
    cache.delete_thread(&prefix, "thread").await;
    cache.close().await;
    out
}
