//! # switchyard-stream-bridge-redis
//!
//! [`StreamBridge`] on Redis Streams, readable and writable next to deer-flow's Python
//! `RedisStreamBridge`: key `deerflow:stream_bridge:<run_id>`, entry fields `kind` / `event` /
//! `data` (compact JSON), exact `MAXLEN N` (and `N + 1` for the end mark), a rolling TTL set
//! atomically with every append.
//!
//! ## Connections (ADR 0043)
//!
//! A bridge holds `2 + readers` connections whatever the number of subscribers (6 by default, at
//! most 8): one for publishers (and `EXISTS` / `DEL`), one for subscribers' atomic snapshots, and
//! `readers` dedicated connections, each blocking in one `XREAD BLOCK` over all the stream keys its
//! local subscribers wait on. Blocking reads never share a connection with anything else, and
//! publishers share theirs only with other publishers.

mod decode;
mod readers;
mod scripts;
mod subscribe;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fred::prelude::*;
use fred::types::scripts::Script;
use serde_json::Value as Json;
use switchyard_core::stream::{validate_event_name, validate_run_id};
use switchyard_core::{Error as CoreError, ItemStream, Result, StreamBridge};

use crate::readers::Readers;

/// The seed's `_XREAD_COUNT`.
pub(crate) const XREAD_COUNT: u64 = 64;
/// The seed's `_MAX_SUBSCRIBE_RETRIES`.
pub(crate) const MAX_SUBSCRIBE_RETRIES: u32 = 3;
const WHAT: &str = "redis stream bridge";

/// Settings of a [`RedisStreamBridge`].
#[derive(Debug, Clone)]
pub struct RedisStreamBridgeConfig {
    /// `redis://` or `rediss://` URL of a standalone server (Redis ≥ 7.0).
    pub url: String,
    /// Key prefix; a trailing `:` is stripped. Default `deerflow:stream_bridge`.
    pub key_prefix: String,
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
}

impl RedisStreamBridgeConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            key_prefix: "deerflow:stream_bridge".into(),
            queue_maxsize: switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE,
            stream_ttl: Some(Duration::from_secs(86_400)),
            readers: 4,
            reader_block: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
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
    pub(crate) maxsize: usize,
    ttl_secs: u64,
    publisher: Client,
    pub(crate) snapshots: Client,
    pub(crate) readers: Readers,
    publish_script: Script,
    pub(crate) snapshot_script: Script,
    pub(crate) closed: AtomicBool,
}

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
        let fred_config = Config::from_url(&config.url)
            .map_err(|e| CoreError::config("stream_bridge.redis_url", e))?;
        // Publishes must not be re-sent after a reconnect (an XADD would be applied twice).
        let publisher = client(&fred_config, config.command_timeout, 1, &config.url).await?;
        let snapshots = client(&fred_config, config.command_timeout, 3, &config.url).await?;
        let mut reader_clients = Vec::with_capacity(config.readers);
        for _ in 0..config.readers {
            reader_clients
                .push(client(&fred_config, config.command_timeout, 3, &config.url).await?);
        }
        let readers = Readers::start(
            reader_clients,
            publisher.clone(),
            config.reader_block,
            config.command_timeout,
        );
        let ttl_secs = config
            .stream_ttl
            .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Ok(Self {
            inner: Arc::new(Inner {
                prefix: config.key_prefix.trim_end_matches(':').to_owned(),
                maxsize: config.queue_maxsize,
                ttl_secs,
                publisher,
                snapshots,
                readers,
                publish_script: Script::from_lua(scripts::PUBLISH),
                snapshot_script: Script::from_lua(scripts::SNAPSHOT),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The Redis key of `run_id`: `<prefix>:<run_id>`, the run id verbatim as the seed writes it.
    pub fn stream_key(&self, run_id: &str) -> String {
        self.inner.key(run_id)
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
        args.extend(fields);
        let id: Value = self
            .inner
            .publish_script
            .evalsha_with_reload(&self.inner.publisher, vec![key.clone()], args)
            .await
            .map_err(|e| classify(op, &key, e))?;
        decode::text(&id).ok_or_else(|| CoreError::corrupt(key, "XADD returned no id"))
    }
}

impl Inner {
    pub(crate) fn key(&self, run_id: &str) -> String {
        format!("{}:{}", self.prefix, run_id)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CoreError::Closed { what: WHAT });
        }
        Ok(())
    }
}

async fn client(config: &Config, timeout: Duration, attempts: u32, url: &str) -> Result<Client> {
    let client = Builder::from_config(config.clone())
        .with_connection_config(|c| {
            c.connection_timeout = Duration::from_secs(5);
            c.internal_command_timeout = Duration::from_secs(5);
            c.max_command_attempts = attempts;
        })
        .with_performance_config(|p| p.default_command_timeout = timeout)
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2))
        .build()
        .map_err(|e| CoreError::config("stream_bridge.redis_url", e))?;
    client
        .init()
        .await
        .map_err(|e| CoreError::unavailable("connect", redact(url), e))?;
    Ok(client)
}

fn redact(url: &str) -> String {
    match url.rsplit_once('@') {
        Some((_, host)) => format!("redis://***@{host}"),
        None => url.to_owned(),
    }
}

/// Connection trouble (and a server that is loading or busy) is transient: the subscriber retry
/// rule applies. An error reply from Redis (a rejected id, a wrong-type key) is not.
pub(crate) fn classify(op: &'static str, key: &str, e: Error) -> CoreError {
    let transient_reply = ["LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"]
        .iter()
        .any(|p| e.details().starts_with(p));
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Cluster => CoreError::unavailable(op, key, e),
        _ if transient_reply => CoreError::unavailable(op, key, e),
        _ => CoreError::Rejected {
            op,
            key: key.to_owned(),
            message: e.to_string(),
        },
    }
}

#[async_trait]
impl StreamBridge for RedisStreamBridge {
    fn supports_cross_process(&self) -> bool {
        true
    }

    async fn publish(&self, run_id: &str, event: &str, data: &Json) -> Result<String> {
        validate_event_name(event)?;
        // Compact JSON, raw UTF-8: the seed's `separators=(",", ":")`, `ensure_ascii=False`.
        let json = serde_json::to_string(data).map_err(|e| CoreError::invalid("data", e))?;
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
        let _: i64 = self
            .inner
            .publisher
            .del(&key)
            .await
            .map_err(|e| classify("cleanup", &key, e))?;
        Ok(())
    }

    async fn stream_exists(&self, run_id: &str) -> Result<bool> {
        self.inner.check_open()?;
        validate_run_id(run_id)?;
        let key = self.inner.key(run_id);
        let n: i64 = self
            .inner
            .publisher
            .exists(&key)
            .await
            .map_err(|e| classify("stream_exists", &key, e))?;
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
