//! Checkpoint cache load: tasks set entries and read back ones set before (plus a key never set).
//! The cache's methods cannot fail by type; checked: no call panics or hangs, every hit is the
//! entry stored under its key (never another key's, never a key never set), `hits + misses`
//! equals the keys requested, and hits come back once the faults are over.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_checkpoint_cache_redis::{RedisCheckpointCache, RedisCheckpointCacheOptions};
use switchyard_conformance::harness::unique_prefix;
use switchyard_core::{HistoryCache, HistoryEntry};
use tokio::task::JoinHandle;

use crate::env::Target;
use crate::report::AdapterReport;
use crate::{Flags, Scale};

/// A call slower than this counts as a hang (the call deadline is 250 ms).
const HANG: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Log {
    gets: u64,
    sets: u64,
    requested: u64,
    /// Requested keys that a task had set before (the others are never set).
    requested_set: u64,
    hits: u64,
    wrong: Vec<String>,
    slow: Vec<String>,
}

fn entry_for(key: &str) -> HistoryEntry {
    HistoryEntry::from_json(vec![json!({ "key": key })], Some(json!(key.len())))
}

pub(crate) struct Load {
    cache: Option<HistoryCache>,
    url: String,
    prefix: String,
    log: Arc<Mutex<Log>>,
    tasks: Vec<JoinHandle<()>>,
    setup_error: Option<String>,
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

/// The cache as an application opens it: the default (msgpack) serializer over the Redis port,
/// warmed up before the load starts.
async fn connect(url: &str) -> Result<HistoryCache, String> {
    let options = RedisCheckpointCacheOptions {
        ttl_seconds: 600,
        ..Default::default()
    };
    let port = RedisCheckpointCache::connect(url, options)
        .await
        .map_err(|e| e.to_string())?;
    if !port.wait_connected(Duration::from_secs(10)).await {
        return Err("Redis did not accept connections within 10 s".into());
    }
    Ok(HistoryCache::new(Arc::new(port)))
}

impl Load {
    pub async fn start(target: &Target, scale: &Scale, flags: &Flags) -> Load {
        let prefix = unique_prefix("chaos-cache");
        let mut load = Load {
            cache: None,
            url: target.url.clone(),
            prefix: prefix.clone(),
            log: Arc::default(),
            tasks: Vec::new(),
            setup_error: None,
        };
        let cache = match connect(&target.url).await {
            Ok(c) => c,
            Err(e) => {
                load.setup_error = Some(format!("connect: {e}"));
                return load;
            }
        };
        for t in 0..scale.cache_tasks {
            let (cache, log, flags, prefix) = (
                cache.clone(),
                load.log.clone(),
                flags.clone(),
                prefix.clone(),
            );
            load.tasks.push(tokio::spawn(async move {
                let mut set: Vec<String> = Vec::new();
                let mut n = 0u64;
                while !flags.stopped() {
                    n += 1;
                    let started = Instant::now();
                    if set.is_empty() || rand::random_bool(0.4) {
                        // Several threads, so a cluster spreads them over slots.
                        let key = format!("{prefix}:thread{}:{t}:{n}", n % 8);
                        cache.set_many(vec![(key.clone(), entry_for(&key))]).await;
                        set.push(key);
                        lock(&log).sets += 1;
                    } else {
                        let mut keys: Vec<String> = (0..4)
                            .map(|_| set[rand::random_range(0..set.len())].clone())
                            .collect();
                        keys.push(format!("{prefix}:never-set:{n}"));
                        let got = cache.get_many(&keys).await;
                        let mut l = lock(&log);
                        l.gets += 1;
                        l.requested += keys.len() as u64;
                        l.requested_set += keys.len() as u64 - 1;
                        l.hits += keys.iter().filter(|k| got.contains_key(*k)).count() as u64;
                        for (k, v) in &got {
                            if !keys.contains(k) || *v != entry_for(k) {
                                l.wrong.push(format!("{k}: got {v:?}"));
                            }
                        }
                    }
                    let took = started.elapsed();
                    if took > HANG {
                        lock(&log).slow.push(format!("a call took {took:?}"));
                    }
                    tokio::time::sleep(Duration::from_millis(rand::random_range(1..4))).await;
                }
            }));
        }
        load.cache = Some(cache);
        load
    }

    pub async fn finish(self, _target: &Target, scale: &Scale) -> AdapterReport {
        let mut report = AdapterReport::new("checkpoint-cache");
        if let Some(e) = self.setup_error {
            report.check("setup", String::new(), vec![e]);
            return report;
        }
        let mut broken = crate::stop_all(self.tasks, scale.settle_timeout, "a cache task").await;
        let log = std::mem::take(&mut *lock(&self.log));
        broken.extend(log.slow.iter().cloned());
        report.ok = log.hits;
        // Keys set before and missed: a write or a read that degraded under the faults.
        report.errored = log.requested_set.saturating_sub(log.hits);
        report.check(
            "never_fails_or_hangs",
            format!(
                "{} gets, {} sets, no panic, no call over {HANG:?}",
                log.gets, log.sets
            ),
            broken,
        );
        report.check(
            "hits_are_the_stored_entry",
            format!(
                "{} hits, {} misses of keys set before (faults degrade to misses), {} misses of keys never set",
                log.hits,
                log.requested_set.saturating_sub(log.hits),
                log.requested - log.requested_set
            ),
            log.wrong.clone(),
        );
        if let Some(cache) = &self.cache {
            let stats = cache.stats();
            let counted = stats.hits + stats.misses;
            report.check(
                "counters_exact",
                format!(
                    "hits + misses = {counted}, keys requested = {}",
                    log.requested
                ),
                if counted == log.requested {
                    Vec::new()
                } else {
                    vec![format!("counted {counted}, requested {}", log.requested)]
                },
            );
            cache.close().await;
        }

        // Hits return once the faults are over, on a fresh client.
        let recovered = match connect(&self.url).await {
            Ok(fresh) => {
                let key = format!("{}:after", self.prefix);
                let deadline = Instant::now() + scale.settle_timeout;
                let mut hit = false;
                while Instant::now() < deadline && !hit {
                    fresh.set_many(vec![(key.clone(), entry_for(&key))]).await;
                    hit = fresh
                        .get_many(std::slice::from_ref(&key))
                        .await
                        .get(&key)
                        .is_some_and(|e| *e == entry_for(&key));
                    if !hit {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                fresh.close().await;
                if hit {
                    Vec::new()
                } else {
                    vec![format!("no hit within {:?}", scale.settle_timeout)]
                }
            }
            Err(e) => vec![format!("connect: {e}")],
        };
        report.check(
            "hits_after_faults",
            "a fresh client sets and hits after the faults".into(),
            recovered,
        );
        report
    }
}
