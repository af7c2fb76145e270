#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod decode;
mod keys;
mod pubsub;
mod readers;
mod scripts;
mod subscribe;
mod wake;

pub use switchyard_redis_support::KeyLayout;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fred::prelude::*;
use serde_json::Value as Json;
use switchyard_core::pycompat::Dumps;
use switchyard_core::stream::{Capabilities, validate_event_name, validate_run_id};
use switchyard_core::{Error as CoreError, ItemStream, Result, StreamBridge};
use switchyard_redis_support::url::{RedisUrl, Topology};
use switchyard_redis_support::{Circuit, ConnectionPolicy, LuaScript, Reconnect};

use crate::pubsub::PubSubReaders;
use crate::readers::Readers;
use fred::clients::SubscriberClient;

/// The seed's `_XREAD_COUNT`.
pub(crate) const XREAD_COUNT: u64 = 64;
const WHAT: &str = "redis stream bridge";

/// Settings of a [`RedisStreamBridge`].
#[derive(Debug, Clone)]
pub struct RedisStreamBridgeConfig {
    /// `redis://` or `rediss://` URL of a standalone server (Redis ≥ 7.0), or
    /// `redis-cluster://host:port?node=host:port&…` (`rediss-cluster://`) of a Redis Cluster.
    pub url: String,
    /// Key prefix; a trailing `:` is stripped. Default `deerflow:stream_bridge`. In the cluster
    /// layout it must not contain `{` or `}`.
    pub key_prefix: String,
    /// Key layout; `None` = from the URL ([`KeyLayout::Cluster`] for cluster URLs, else the
    /// seed's). The cluster layout also works on a standalone server; the seed layout on a
    /// cluster is a config error.
    pub layout: Option<KeyLayout>,
    /// Retained data events per run (`MAXLEN`). At least 1. Default 256.
    pub queue_maxsize: usize,
    /// Rolling TTL refreshed by every publish; `None` or zero disables it. Whole seconds
    /// (rounded up). Default 86,400 s.
    pub stream_ttl: Option<Duration>,
    /// Dedicated blocking-read connections (1–6). Default 4.
    pub readers: usize,
    /// Longest single `XREAD BLOCK` of a reader. Subscribers' heartbeats do not depend on it.
    /// Default 5 s.
    pub reader_block: Duration,
    /// Timeout of every non-blocking command. Default 5 s.
    pub command_timeout: Duration,
    /// How long opening each connection may take, the handshake included: a server that accepts
    /// but never answers fails [`RedisStreamBridge::connect`] after about this long. Default 5 s.
    pub connect_timeout: Duration,
}

impl RedisStreamBridgeConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            key_prefix: "deerflow:stream_bridge".into(),
            layout: None,
            queue_maxsize: switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE,
            stream_ttl: Some(Duration::from_secs(86_400)),
            readers: 4,
            reader_block: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// The Redis Streams stream bridge. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisStreamBridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) prefix: String,
    layout: KeyLayout,
    pub(crate) maxsize: usize,
    ttl_secs: u64,
    publisher: Client,
    // Whether Redis is known to be down (the publisher's reconnect refused): publishes then fail
    // at once instead of waiting in fred's reconnect queue for the command timeout (ADR 0355).
    circuit: Circuit,
    pub(crate) snapshots: Client,
    pub(crate) readers: Fanout,
    publish_script: LuaScript,
    pub(crate) snapshot_script: LuaScript,
    /// Bounds the snapshots in flight (ADR 0320): a burst of new subscribers would otherwise queue
    /// one command each in the client at once, and the allocator keeps that peak.
    snapshot_slots: tokio::sync::Semaphore,
    pub(crate) closed: AtomicBool,
}

/// Snapshots in flight at most. Enough to keep the pipelined snapshot connection busy.
const SNAPSHOT_SLOTS: usize = 256;

impl RedisStreamBridge {
    /// Connects (`2 + readers` connections) and starts the readers.
    pub async fn connect(config: RedisStreamBridgeConfig) -> Result<Self> {
        if config.queue_maxsize == 0 {
            return Err(CoreError::config(
                "stream_bridge.queue_maxsize",
                "must be at least 1 (0 would retain nothing)",
            ));
        }
        if !(1..=6).contains(&config.readers) {
            return Err(CoreError::config(
                "stream_bridge.readers",
                "must be between 1 and 6 (a bridge uses readers + 2 connections)",
            ));
        }
        if config.reader_block.is_zero() || config.command_timeout.is_zero() {
            return Err(CoreError::config(
                "stream_bridge.reader_block",
                "reader_block and command_timeout must be greater than zero",
            ));
        }
        if config.connect_timeout.is_zero() {
            return Err(CoreError::config(
                "stream_bridge.connect_timeout",
                "must be greater than zero (it bounds each connection's handshake)",
            ));
        }
        let url = RedisUrl::parse(
            &config.url,
            URL_SETTING,
            &[Topology::Standalone, Topology::Cluster],
        )?;
        let layout = KeyLayout::resolve(
            config.layout,
            url.is_cluster(),
            &config.key_prefix,
            &keys::RULES,
        )?;
        // Publishes must not be re-sent after a reconnect (an XADD would be applied twice).
        let timeouts = Timeouts {
            command: config.command_timeout,
            connect: config.connect_timeout,
        };
        let circuit = Circuit::new(&url);
        let publisher = client(&url, timeouts, 1, Some(&circuit)).await?;
        let snapshots = client(&url, timeouts, 3, None).await?;
        let readers = match layout {
            KeyLayout::Seed => {
                let mut reader_clients = Vec::with_capacity(config.readers);
                for _ in 0..config.readers {
                    reader_clients.push(client(&url, timeouts, 3, None).await?);
                }
                Fanout::Streams(Readers::start(
                    reader_clients,
                    publisher.clone(),
                    config.reader_block,
                    config.command_timeout,
                ))
            }
            KeyLayout::Cluster => {
                let subscriber = subscriber(&url, timeouts).await?;
                Fanout::PubSub(PubSubReaders::start(subscriber, config.reader_block))
            }
        };
        let ttl_secs = config
            .stream_ttl
            .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Ok(Self {
            inner: Arc::new(Inner {
                prefix: config.key_prefix.trim_end_matches(':').to_owned(),
                layout,
                maxsize: config.queue_maxsize,
                ttl_secs,
                publisher,
                circuit,
                snapshots,
                readers,
                publish_script: match layout {
                    KeyLayout::Seed => scripts::publish(),
                    KeyLayout::Cluster => scripts::publish_wake(),
                },
                snapshot_script: scripts::snapshot(),
                snapshot_slots: tokio::sync::Semaphore::new(SNAPSHOT_SLOTS),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The Redis key of `run_id`: `<prefix>:<run_id>`, the run id verbatim as the seed writes it;
    /// in the cluster layout `<prefix>:{run:<quote(run_id)>}`.
    pub fn stream_key(&self, run_id: &str) -> String {
        self.inner.key(run_id)
    }

    /// The key layout this bridge writes.
    pub fn layout(&self) -> KeyLayout {
        self.inner.layout
    }

    /// Stream keys the readers currently block on (one per run with waiting local subscribers).
    pub fn watched_keys(&self) -> usize {
        self.inner.readers.watched_keys()
    }

    /// Shared blocking reads that failed since the bridge started (each one is an error wake-up for
    /// the subscribers of that reader).
    pub fn failed_reads(&self) -> u64 {
        self.inner.readers.failed_reads()
    }

    async fn add(
        &self,
        op: &'static str,
        run_id: &str,
        maxlen: usize,
        fields: Vec<String>,
    ) -> Result<String> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        let key = self.inner.key(run_id);
        let mut args = vec![maxlen.to_string(), self.inner.ttl_secs.to_string()];
        if self.inner.layout == KeyLayout::Cluster {
            args.push(pubsub::wake_channel(&key));
        }
        args.extend(fields);
        let run = async {
            self.inner
                .publish_script
                .run(&self.inner.publisher, vec![key.clone()], args)
                .await
                .map_err(|e| classify(op, &key, e))
        };
        let id: Value = self.inner.circuit.guard(op, &key, run).await?;
        decode::text(&id).ok_or_else(|| CoreError::corrupt(key, "XADD returned no id"))
    }
}

impl Inner {
    pub(crate) fn key(&self, run_id: &str) -> String {
        keys::stream_key(&self.prefix, self.layout, run_id)
    }

    /// Runs the atomic snapshot script for `key`. The call's future is boxed, so a parked
    /// subscription does not carry room for it (ADR 0320).
    pub(crate) async fn snapshot(
        &self,
        key: String,
        args: Vec<String>,
    ) -> std::result::Result<Value, Error> {
        // The semaphore is never closed, so acquiring only fails if it were.
        let _slot = self.snapshot_slots.acquire().await;
        Box::pin(
            self.snapshot_script
                .run::<Value, _, _>(&self.snapshots, vec![key], args),
        )
        .await
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CoreError::Closed { what: WHAT });
        }
        Ok(())
    }
}

/// The setting a bad URL is reported under.
const URL_SETTING: &str = "stream_bridge.redis_url";

/// The bridge's connections: reconnect forever (50 ms doubling to 2 s), 5 s connect and internal
/// timeouts; `attempts` says whether a command in flight at a disconnect is re-sent.
/// The bridge's command and connect timeouts, as every connection it opens uses them.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    command: Duration,
    connect: Duration,
}

fn policy(timeouts: Timeouts, attempts: u32) -> ConnectionPolicy {
    ConnectionPolicy {
        command_timeout: timeouts.command,
        // ADR 0313: a server that accepts and never answers stalls in the handshake (HELLO, and CLUSTER
        // SLOTS on a cluster), which the client bounds by its internal-command timeout, not the
        // TCP connect's: both are the connect timeout, so it bounds the whole opening.
        connect_timeout: timeouts.connect,
        internal_command_timeout: timeouts.connect,
        max_command_attempts: attempts,
        reconnect: Reconnect {
            max_attempts: 0,
            min_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(2),
        },
        ..ConnectionPolicy::default()
    }
}

async fn client(
    url: &RedisUrl,
    timeouts: Timeouts,
    attempts: u32,
    circuit: Option<&Circuit>,
) -> Result<Client> {
    let client = policy(timeouts, attempts)
        .builder(url)
        .build()
        .map_err(|e| switchyard_redis_support::connect::build_error(URL_SETTING, url, &e))?;
    if let Some(circuit) = circuit {
        circuit.watch(&client);
    }
    client
        .init()
        .await
        .map_err(|e| classify("connect", url.redacted(), e))?;
    Ok(client)
}

async fn subscriber(url: &RedisUrl, timeouts: Timeouts) -> Result<SubscriberClient> {
    let client = policy(timeouts, 3)
        .builder(url)
        .build_subscriber_client()
        .map_err(|e| switchyard_redis_support::connect::build_error(URL_SETTING, url, &e))?;
    client
        .init()
        .await
        .map_err(|e| classify("connect", url.redacted(), e))?;
    Ok(client)
}

/// How waiting subscribers are woken: shared `XREAD BLOCK` readers (seed layout, ADR 0043) or
/// sharded pub/sub wake channels (cluster layout, ADR 0093).
#[derive(Debug)]
pub(crate) enum Fanout {
    Streams(Readers),
    PubSub(PubSubReaders),
}

impl Fanout {
    pub(crate) fn register(&self, key: &str, after: (u64, u64)) -> wake::Receiver {
        match self {
            Fanout::Streams(r) => r.register(key, after),
            Fanout::PubSub(r) => r.register(key),
        }
    }

    async fn close(&self) {
        match self {
            Fanout::Streams(r) => r.close().await,
            Fanout::PubSub(r) => r.close().await,
        }
    }

    fn failed_reads(&self) -> u64 {
        match self {
            Fanout::Streams(r) => r.failed_reads(),
            Fanout::PubSub(r) => r.failed_reads(),
        }
    }

    fn watched_keys(&self) -> usize {
        match self {
            Fanout::Streams(r) => r.watched_keys(),
            Fanout::PubSub(r) => r.watched_keys(),
        }
    }
}

/// Every fred error of the bridge is classified by the one rule of the Redis adapters (ADR
/// 0170): connection trouble and passing server states are transient, so the subscriber retry
/// rule applies; an error reply that the same call would get again (a rejected id, a wrong-type
/// key) is not.
pub(crate) use switchyard_redis_support::classify;

#[async_trait]
impl StreamBridge for RedisStreamBridge {
    fn capabilities(&self) -> Capabilities {
        // A Redis stream per run: ids `{ms}-{seq}`, the end mark an entry, read from the last id
        // delivered; in cluster mode too.
        Capabilities::SHARED_LOG
    }

    async fn publish(&self, run_id: &str, event: &str, data: &Json) -> Result<String> {
        validate_event_name(event)?;
        // The seed's `json.dumps(data, ensure_ascii=False, separators=(",", ":"))`, floats
        // included (ADR 0177).
        let json = Dumps::DEFAULT
            .ensure_ascii(false)
            .compact(true)
            .to_string(data);
        let fields = vec![
            "kind".into(),
            decode::KIND_EVENT.into(),
            "event".into(),
            event.to_owned(),
            "data".into(),
            json,
        ];
        self.add("publish", run_id, self.inner.maxsize, fields)
            .await
    }

    async fn publish_end(&self, run_id: &str) -> Result<()> {
        // N + 1: the end mark never evicts one of the N retained data events.
        let fields = vec!["kind".into(), decode::KIND_END.into()];
        self.add("publish_end", run_id, self.inner.maxsize + 1, fields)
            .await
            .map(drop)
    }

    fn subscribe(
        &self,
        run_id: &str,
        last_event_id: Option<&str>,
        heartbeat: Duration,
    ) -> ItemStream {
        subscribe::subscribe(self.inner.clone(), run_id, last_event_id, heartbeat)
    }

    async fn cleanup(&self, run_id: &str, delay: Duration) -> Result<()> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let key = self.inner.key(run_id);
        let del = async {
            self.inner
                .publisher
                .del::<i64, _>(&key)
                .await
                .map_err(|e| classify("cleanup", &key, e))
        };
        self.inner.circuit.guard("cleanup", &key, del).await?;
        if self.inner.layout == KeyLayout::Cluster {
            // Lets waiting subscribers see the key is gone now rather than at their next
            // heartbeat. Best effort: they re-read after each heartbeat interval anyway.
            let _: Result<i64, Error> = self
                .inner
                .publisher
                .spublish(pubsub::wake_channel(&key), "cleanup")
                .await;
        }
        Ok(())
    }

    async fn stream_exists(&self, run_id: &str) -> Result<bool> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        let key = self.inner.key(run_id);
        let exists = async {
            self.inner
                .publisher
                .exists::<i64, _>(&key)
                .await
                .map_err(|e| classify("stream_exists", &key, e))
        };
        let n = self
            .inner
            .circuit
            .guard("stream_exists", &key, exists)
            .await?;
        Ok(n > 0)
    }

    async fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.readers.close().await;
        let _ = self.inner.snapshots.quit().await;
        let _ = self.inner.publisher.quit().await;
        Ok(())
    }
}
