//! Stream bridge load: one publisher per run; per run one live subscriber (reconnects only after an
//! error) and one hopping subscriber (also drops its stream every few events and reconnects with
//! `Last-Event-ID`). Checked: every subscriber ends with an end or a gap within the timeout; it saw
//! each event at most once, in order; one that ended with an end saw every acknowledged publish;
//! the stream holds every acknowledged publish once.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use switchyard_conformance::harness::unique_prefix;
use switchyard_core::{StreamBridge, StreamItem};
use switchyard_stream_bridge_redis::{RedisStreamBridge, RedisStreamBridgeConfig};
use tokio::task::JoinHandle;

use crate::env::Target;
use crate::report::AdapterReport;
use crate::{Flags, Scale};

const HEARTBEAT: Duration = Duration::from_millis(500);
/// The hopping subscriber reconnects after this many events.
const HOP_EVERY: usize = 7;

#[derive(Debug, Default)]
struct Published {
    acked: Vec<i64>,
    errored: Vec<i64>,
    untyped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Terminal {
    End,
    Gap,
}

#[derive(Debug, Default)]
struct Subscribed {
    received: Vec<i64>,
    terminal: Option<Terminal>,
    errors: u64,
    reconnects: u64,
    untyped: Vec<String>,
}

struct RunLoad {
    run: String,
    publisher: JoinHandle<Published>,
    subscribers: Vec<(&'static str, JoinHandle<Subscribed>)>,
}

pub(crate) struct Load {
    config: RedisStreamBridgeConfig,
    bridge: Option<RedisStreamBridge>,
    runs: Vec<RunLoad>,
    setup_error: Option<String>,
}

fn config(url: &str) -> RedisStreamBridgeConfig {
    let mut c = RedisStreamBridgeConfig::new(url);
    c.key_prefix = unique_prefix("chaos-bridge");
    // Retain everything: a gap here would come from a fault, not from trimming.
    c.queue_maxsize = 1_000_000;
    c.command_timeout = Duration::from_secs(2);
    c.reader_block = Duration::from_secs(1);
    c
}

impl Load {
    pub async fn start(target: &Target, scale: &Scale, flags: &Flags) -> Load {
        let config = config(&target.url);
        let mut load = Load {
            config: config.clone(),
            bridge: None,
            runs: Vec::new(),
            setup_error: None,
        };
        let bridge = match RedisStreamBridge::connect(config).await {
            Ok(b) => b,
            Err(e) => {
                load.setup_error = Some(format!("connect: {e}"));
                return load;
            }
        };
        for i in 0..scale.bridge_runs {
            // Half the runs on the master the failover kills, the rest wherever they hash.
            let run = if i % 2 == 0 {
                let (b, t) = (bridge.clone(), target.clone());
                let tag = format!("run{i}");
                tokio::task::spawn_blocking(move || {
                    crate::name_on_target(&t, &tag, |r| b.stream_key(r))
                })
                .await
                .unwrap_or_else(|_| format!("run{i}"))
            } else {
                format!("run{i}")
            };
            let subscribers = vec![
                (
                    "live",
                    tokio::spawn(subscriber(bridge.clone(), run.clone(), false)),
                ),
                (
                    "hopping",
                    tokio::spawn(subscriber(bridge.clone(), run.clone(), true)),
                ),
            ];
            let publisher = tokio::spawn(publisher(bridge.clone(), run.clone(), flags.clone()));
            load.runs.push(RunLoad {
                run,
                publisher,
                subscribers,
            });
        }
        load.bridge = Some(bridge);
        load
    }

    pub async fn finish(self, _target: &Target, scale: &Scale, lossy: bool) -> AdapterReport {
        let mut report = AdapterReport::new("stream-bridge");
        if let Some(e) = self.setup_error {
            report.check("setup", String::new(), vec![e]);
            return report;
        }
        let Some(bridge) = self.bridge else {
            return report;
        };
        let fresh = match RedisStreamBridge::connect(self.config.clone()).await {
            Ok(b) => Some(b),
            Err(e) => {
                report.check("fresh_client", String::new(), vec![format!("connect: {e}")]);
                None
            }
        };
        let mut hangs = Vec::new();
        let mut no_end = Vec::new();
        let mut disorder = Vec::new();
        let mut undelivered = Vec::new();
        let mut not_retained = Vec::new();
        let mut stored_twice = Vec::new();
        let mut untyped = Vec::new();
        let (mut acked_total, mut errored_total, mut ends, mut gaps) = (0usize, 0usize, 0, 0);
        let mut lost = 0usize;
        let mut sub_errors = 0u64;
        let mut reconnects = 0u64;
        for r in self.runs {
            let published = match tokio::time::timeout(scale.settle_timeout, r.publisher).await {
                Ok(Ok(p)) => p,
                _ => {
                    hangs.push(format!("{}: publisher did not stop", r.run));
                    Published::default()
                }
            };
            acked_total += published.acked.len();
            errored_total += published.errored.len();
            report.ok += published.acked.len() as u64;
            report.errored += published.errored.len() as u64;
            untyped.extend(published.untyped);

            // The end, published once the faults are over (retried: an end twice is harmless).
            let mut ended = false;
            let deadline = tokio::time::Instant::now() + scale.settle_timeout;
            while tokio::time::Instant::now() < deadline {
                match bridge.publish_end(&r.run).await {
                    Ok(()) => {
                        report.ok += 1;
                        ended = true;
                        break;
                    }
                    Err(e) => {
                        report.errored += 1;
                        if !e.is_transient() {
                            untyped.push(e.to_string());
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            if !ended {
                no_end.push(format!("{}: publish_end never succeeded", r.run));
            }

            // What the stream holds now, read by a fresh client.
            let stored = match &fresh {
                Some(f) => read_all(f, &r.run, scale.settle_timeout).await,
                None => Err("no fresh client".into()),
            };
            let stored: Vec<i64> = match stored {
                Ok(s) => s,
                Err(e) => {
                    hangs.push(format!("{}: final read: {e}", r.run));
                    Vec::new()
                }
            };
            let stored_set: BTreeSet<i64> = stored.iter().copied().collect();
            if stored_set.len() != stored.len() {
                stored_twice.push(format!(
                    "{}: {} events stored, {} distinct",
                    r.run,
                    stored.len(),
                    stored_set.len()
                ));
            }
            let mut required = Vec::new();
            for i in &published.acked {
                if stored_set.contains(i) {
                    required.push(*i);
                } else if lossy {
                    lost += 1;
                } else {
                    not_retained.push(format!(
                        "{}: acknowledged event {i} not in the stream",
                        r.run
                    ));
                }
            }

            for (kind, sub) in r.subscribers {
                let abort = sub.abort_handle();
                let s = match tokio::time::timeout(scale.settle_timeout, sub).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        hangs.push(format!("{}/{kind}: subscriber task failed: {e}", r.run));
                        continue;
                    }
                    Err(_) => {
                        abort.abort();
                        hangs.push(format!(
                            "{}/{kind}: no end or gap within {:?} after the end was published",
                            r.run, scale.settle_timeout
                        ));
                        continue;
                    }
                };
                sub_errors += s.errors;
                reconnects += s.reconnects;
                report.errored += s.errors;
                report.ok += s.received.len() as u64;
                untyped.extend(s.untyped);
                if s.received.windows(2).any(|w| w[0] >= w[1]) {
                    disorder.push(format!(
                        "{}/{kind}: received out of order or twice: {:?}",
                        r.run,
                        first_disorder(&s.received)
                    ));
                }
                match s.terminal {
                    Some(Terminal::End) => {
                        ends += 1;
                        let got: BTreeSet<i64> = s.received.iter().copied().collect();
                        let missed: Vec<i64> = required
                            .iter()
                            .filter(|i| !got.contains(i))
                            .copied()
                            .collect();
                        if !missed.is_empty() {
                            undelivered.push(format!(
                                "{}/{kind}: ended without {} acknowledged events, e.g. {:?}",
                                r.run,
                                missed.len(),
                                &missed[..missed.len().min(5)]
                            ));
                        }
                    }
                    Some(Terminal::Gap) => gaps += 1,
                    None => hangs.push(format!("{}/{kind}: stream stopped without end", r.run)),
                }
            }
        }
        report.check(
            "end_published",
            "publish_end succeeded on every run after the faults".into(),
            no_end,
        );
        report.check(
            "no_subscriber_hangs",
            format!("{ends} subscribers ended with an end, {gaps} with a gap ({reconnects} reconnects, {sub_errors} stream errors)"),
            hangs,
        );
        report.check(
            "delivered_in_order_once",
            "every subscriber saw each event at most once, in publish order".into(),
            disorder,
        );
        report.check(
            "acknowledged_publishes_delivered",
            format!("{acked_total} acknowledged publishes ({errored_total} unknown) reached every subscriber that ended with an end"),
            undelivered,
        );
        report.check(
            "acknowledged_publishes_retained",
            "the stream holds every acknowledged publish".into(),
            not_retained,
        );
        report.check(
            "no_publish_stored_twice",
            "no event in a stream twice (re-sent XADD)".into(),
            stored_twice,
        );
        report.check(
            "errors_are_transient",
            "publish and subscription errors are Unavailable".into(),
            untyped,
        );
        if lost > 0 {
            report.note(format!(
                "{lost} acknowledged publishes missing after the failover (asynchronous replication)"
            ));
        }
        let _ = bridge.close().await;
        if let Some(f) = fresh {
            let _ = f.close().await;
        }
        report
    }
}

fn first_disorder(v: &[i64]) -> Vec<i64> {
    v.windows(2)
        .find(|w| w[0] >= w[1])
        .map(|w| w.to_vec())
        .unwrap_or_default()
}

async fn publisher(bridge: RedisStreamBridge, run: String, flags: Flags) -> Published {
    let mut out = Published::default();
    let mut i = 0i64;
    while !flags.stopped() {
        match bridge.publish(&run, "tick", &json!({ "i": i })).await {
            Ok(_) => out.acked.push(i),
            Err(e) => {
                if !e.is_transient() {
                    out.untyped.push(e.to_string());
                }
                out.errored.push(i);
            }
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(rand::random_range(2..6))).await;
    }
    out
}

async fn subscriber(bridge: RedisStreamBridge, run: String, hopping: bool) -> Subscribed {
    let mut out = Subscribed::default();
    let mut cursor: Option<String> = None;
    loop {
        let mut stream = bridge.subscribe(&run, cursor.as_deref(), HEARTBEAT);
        let mut since_connect = 0usize;
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamItem::Event(e)) => {
                    out.received.push(e.data["i"].as_i64().unwrap_or(-1));
                    cursor = Some(e.id);
                    since_connect += 1;
                    if hopping && since_connect >= HOP_EVERY {
                        break;
                    }
                }
                Ok(StreamItem::Heartbeat) => {}
                Ok(StreamItem::End) => {
                    out.terminal = Some(Terminal::End);
                    return out;
                }
                Ok(StreamItem::Gap(_)) => {
                    out.terminal = Some(Terminal::Gap);
                    return out;
                }
                Err(e) => {
                    if !e.is_transient() {
                        out.untyped.push(e.to_string());
                    }
                    out.errors += 1;
                    break;
                }
            }
        }
        // An SSE client reconnects with its Last-Event-ID.
        out.reconnects += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every event of `run` from the start, until the end (or a gap, or the timeout).
async fn read_all(
    bridge: &RedisStreamBridge,
    run: &str,
    timeout: Duration,
) -> Result<Vec<i64>, String> {
    let mut stream = bridge.subscribe(run, None, HEARTBEAT);
    let mut got = Vec::new();
    let read = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamItem::Event(e)) => got.push(e.data["i"].as_i64().unwrap_or(-1)),
                Ok(StreamItem::Heartbeat) => {}
                Ok(StreamItem::End) => return Ok(()),
                Ok(StreamItem::Gap(g)) => return Err(format!("gap {g:?}")),
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("stream ended without an end".to_string())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(())) => Ok(got),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no end within {timeout:?}")),
    }
}
