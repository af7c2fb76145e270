#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod keys;
mod scripts;

// One room per area of the port (ADR 0161); shared plumbing stays here.
mod batches;
mod catalog;
mod counters;
mod dead_letters;
mod events;
mod flow;
mod kv;
mod locks;
mod pools;
mod queue;
mod schedules;
mod streams;
mod tasks;
mod workers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use fred::clients::{ExclusivePool, Pool, SubscriberClient};
use fred::prelude::*;
use fred::types::Value as RValue;
use serde_json::{Map, Value};
use switchyard_core::fleet::adapter::{
    Attempt, CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps,
    QueueBatchOps, QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
use switchyard_core::fleet::{
    ConfigWrite, DEFAULT_MAX_RESULT_BYTES, Delivery, EventStream, IdempotencyKey, LockGrant,
    PoolClaim, PoolItem, Priority, QueueStats, Receipt, SubmitOutcome, Tags, TaskHead,
    WorkerRecord, WorkerState, random_token, ttl_ms,
};
use switchyard_core::keys::quote;
use switchyard_core::pycompat::{Dumps, float_repr};
use switchyard_core::{Error, Result};
use switchyard_redis_support::connect::build_error;
use switchyard_redis_support::keys::LayoutRules;
use switchyard_redis_support::{
    Circuit, ConnectionPolicy, LuaScript, Reconnect, RedisUrl, Topology, classify,
};
use tokio::sync::Notify;

pub use keys::{FleetKeys, KeyLayout, QueueKeys};
use scripts::{Scripts, scripts};
use switchyard_core::fleet::task_id;
use switchyard_core::lane::{Lanes, dropped};

/// `json.dumps(value)` exactly as the seed writes documents (the stats history ZSET uses the
/// document as its member, so bytes matter).
fn py_json(value: &Value) -> String {
    Dumps::DEFAULT.to_string(value)
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct RedisFleetConfig {
    /// `redis://…`, `rediss://…` (TLS), `redis-sentinel://…`, or a Redis Cluster as
    /// `redis-cluster://host:port?node=host:port&…` (also `rediss-cluster://`); a URL that does
    /// not parse is `Error::Config` under `url`, without its password.
    pub url: String,
    /// Prepended to every key and channel; empty (the default) is the seed's exact layout.
    pub prefix: String,
    /// Connections of the shared command pool.
    pub pool_size: usize,
    /// Dedicated connections for blocking reserves (one blocked reserve per connection).
    pub blocking_connections: usize,
    /// Timeout of ordinary commands.
    pub command_timeout: Duration,
    /// The key layout; `None` (the default) picks it from the URL: [`KeyLayout::Cluster`] for
    /// cluster URLs, else [`KeyLayout::Seed`].
    pub layout: Option<KeyLayout>,
    /// The largest result an ack stores for a task (ADR 0380), in bytes.
    pub max_result_bytes: usize,
}

impl RedisFleetConfig {
    /// Defaults for `url`: no prefix, 4 pooled and 4 blocking connections, 10 s command timeout,
    /// results of at most [`DEFAULT_MAX_RESULT_BYTES`].
    pub fn new(url: impl Into<String>) -> Self {
        RedisFleetConfig {
            url: url.into(),
            prefix: String::new(),
            pool_size: 4,
            blocking_connections: 4,
            command_timeout: Duration::from_secs(10),
            layout: None,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }

    /// Sets the largest result an ack stores for a task.
    pub fn with_max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Sets the key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the key layout (e.g. the cluster layout on a standalone server, for tests).
    pub fn with_layout(mut self, layout: KeyLayout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The parsed URL, the connection policy, and the key layout the backend writes there
    /// (ADR 0162).
    fn connection_parts(&self) -> Result<(RedisUrl, ConnectionPolicy, KeyLayout)> {
        // Sentinel URLs are accepted: nothing here pins a connection to one node beyond a
        // command (a blocked reserve's BLPOP is bounded by `MAX_BLOCK` and re-issued).
        let url = RedisUrl::parse(
            &self.url,
            "url",
            &[Topology::Standalone, Topology::Sentinel, Topology::Cluster],
        )?;
        let layout =
            KeyLayout::resolve(self.layout, url.is_cluster(), &self.prefix, &LAYOUT_RULES)?;
        let policy = ConnectionPolicy {
            command_timeout: self.command_timeout,
            connect_timeout: Duration::from_secs(5),
            internal_command_timeout: self.command_timeout,
            // fred's default, kept: a command in flight when a connection drops is written
            // again after the reconnect. The queue's scripts that change state are safe to
            // re-send through their op tokens (ADR 0140); the other areas are as they were.
            max_command_attempts: 3,
            unresponsive: None,
            reconnect: Reconnect {
                max_attempts: 0,
                min_delay: Duration::from_millis(100),
                max_delay: Duration::from_secs(30),
            },
            fail_fast: true,
        };
        policy.validate("")?;
        Ok((url, policy, layout))
    }
}

/// How the fleet checks a layout choice (ADR 0162): the seed layout on a cluster URL is refused, because
/// one queue's, pool's or worker's keys would land in different slots and every script touching
/// them would fail with `CROSSSLOT`.
pub(crate) const LAYOUT_RULES: LayoutRules<'static> = LayoutRules {
    layout_setting: "layout",
    prefix_setting: "prefix",
    seed_on_cluster: Some(
        "the seed layout puts one queue's, pool's or worker's keys in different cluster slots",
    ),
};

/// [`FleetBackend`](switchyard_core::fleet::FleetBackend) on Redis. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct RedisFleetBackend {
    inner: Arc<Inner>,
    /// Test probe: every call carries this op token and skips batching (see `resend_probe`).
    fixed_op: Option<Arc<str>>,
}

struct Inner {
    url: RedisUrl,
    policy: ConnectionPolicy,
    keys: FleetKeys,
    pool: Pool,
    blocking: ExclusivePool,
    // Whether Redis is known to be down (a reconnect refused): every call then fails at once
    // naming the server, instead of waiting in fred's reconnect queue for the command timeout,
    // and a blocked reserve ends instead of re-issuing its wait (ADR 0355).
    circuit: Circuit,
    scripts: &'static Scripts,
    /// How long an op record lives: longer than fred may still re-send the call (it never
    /// re-sends a command whose timeout passed).
    op_ttl_ms: u64,
    max_result_bytes: usize,
    pushes: Lanes<PushReq, Pushed>,
    reserves: Lanes<ReserveReq, Reserve>,
    acks: Lanes<AckReq, Acked>,
}

/// One batched push.
struct PushReq {
    code: &'static str,
    body: Bytes,
    /// The task's id, `max_attempts` and last error, in the script's form, when the body has an
    /// id (ADR 0380).
    task: Option<[RValue; 3]>,
}

/// A push's outcome: `Err(id)` when its task id is taken.
type Pushed = std::result::Result<(), String>;

/// One batched ack: the receipt, and the result to store with the task's end (ADR 0380).
struct AckReq {
    receipt: String,
    result: Option<Bytes>,
}

/// An ack's outcome (ADR 0380).
#[derive(Debug, Clone, PartialEq)]
enum Acked {
    /// The delivery was current and is acked.
    Done,
    /// The receipt was not current.
    NotCurrent,
    /// A cancel had reached the delivery's task (this id): it ended `cancelled`.
    Cancelled(String),
}

/// One batched reserve attempt.
struct ReserveReq {
    receipt: String,
    visibility_ms: u64,
}

/// A reserve attempt's outcome: the delivery, or nothing ready (ms until the next scheduled task
/// is due, if any).
type Reserve = std::result::Result<Delivery, Option<u64>>;

/// Calls merged into one script call at most (bounds the script's run time and reply size).
const BATCH_ITEMS: usize = 64;
/// Body bytes of one push batch at most (a batch always takes its first call).
const BATCH_BYTES: usize = 512 * 1024;

impl std::fmt::Debug for RedisFleetBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFleetBackend")
            .field("prefix", &self.inner.keys.prefix())
            .finish_non_exhaustive()
    }
}

/// Longest single wait on the wake list: bounds how late a task pushed by a seed producer (which
/// sends no wake-up) or a scheduled task falling due is noticed.
const MAX_BLOCK: Duration = Duration::from_secs(1);
/// Lapsed reservations handled per sweep script run (keeps each script short).
const SWEEP_BATCH: i64 = 500;
/// Due scheduled tasks taken from each scheduled set per promote script run (keeps each script
/// short).
const PROMOTE_BATCH: i64 = 500;
/// Shortest life of an op record (ADR 0140).
const OP_TTL_MIN_MS: u64 = 10_000;

fn bin(b: &[u8]) -> RValue {
    RValue::Bytes(Bytes::copy_from_slice(b))
}

fn text(s: impl Into<String>) -> RValue {
    RValue::from(s.into())
}

fn int(i: impl TryInto<i64>) -> RValue {
    RValue::Integer(i.try_into().unwrap_or(i64::MAX))
}

fn to_bytes(v: RValue) -> Option<Vec<u8>> {
    match v {
        RValue::Null => None,
        RValue::Integer(i) => Some(i.to_string().into_bytes()),
        other => other.into_owned_bytes(),
    }
}

fn to_string(v: RValue) -> Option<String> {
    to_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn to_i64(v: &RValue) -> Option<i64> {
    match v {
        RValue::Integer(i) => Some(*i),
        RValue::Double(d) => Some(*d as i64),
        RValue::String(s) => s.trim().parse().ok(),
        RValue::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn to_f64(v: &RValue) -> Option<f64> {
    match v {
        RValue::Integer(i) => Some(*i as f64),
        RValue::Double(d) => Some(*d),
        RValue::String(s) => s.trim().parse().ok(),
        RValue::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn array(v: RValue) -> Vec<RValue> {
    match v {
        RValue::Null => Vec::new(),
        other => other.into_array(),
    }
}

fn json_doc(location: &str, raw: Option<Vec<u8>>) -> Result<Value> {
    match raw {
        None => Ok(Value::Object(Map::new())),
        Some(b) => serde_json::from_slice(&b).map_err(|e| Error::corrupt(location, e)),
    }
}

fn ms_arg(ms: u64) -> RValue {
    int(ms)
}

/// A task head's id, `max_attempts` and last error as the scripts take them (ADR 0380): `''`
/// for none, the error behind an `e`.
fn head_args(head: &TaskHead) -> [RValue; 3] {
    [
        text(head.id.clone().unwrap_or_default()),
        text(head.max_attempts.map(|m| m.to_string()).unwrap_or_default()),
        text(
            head.last_error
                .as_ref()
                .map(|e| format!("e{e}"))
                .unwrap_or_default(),
        ),
    ]
}

/// The error of an operation on a delivery whose task a cancel reached (ADR 0380).
fn cancelled(id: impl Into<String>) -> Error {
    Error::Cancelled {
        what: "task",
        id: id.into(),
    }
}

/// The reply of a script that answers 1, 0 or `{'c', id}`: whether it applied, or the cancel.
fn flag_or_cancel(key: &str, op: &str, reply: RValue) -> Result<bool> {
    if let Some(n) = to_i64(&reply) {
        return Ok(n == 1);
    }
    let parts = array(reply);
    match (parts.first().cloned().and_then(to_string), parts.get(1)) {
        (Some(c), Some(id)) if c == "c" => {
            Err(cancelled(to_string(id.clone()).unwrap_or_default()))
        }
        _ => Err(Error::corrupt(key, format!("{op}: unexpected reply"))),
    }
}

impl RedisFleetBackend {
    /// Connects with [`RedisFleetConfig::new`]`(url)` defaults.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::with_config(RedisFleetConfig::new(url)).await
    }

    /// Connects: a shared pool for commands and scripts, and dedicated blocking connections.
    pub async fn with_config(config: RedisFleetConfig) -> Result<Self> {
        let (url, policy, layout) = config.connection_parts()?;
        let keys = FleetKeys::with_layout(config.prefix.clone(), layout)?;
        let builder = policy.builder(&url);
        let pool = builder
            .build_pool(config.pool_size.max(1))
            .map_err(|e| build_error("url", &url, &e))?;
        let blocking = builder
            .build_exclusive_pool(config.blocking_connections.max(1))
            .map_err(|e| build_error("url", &url, &e))?;
        // Watched before they connect, so the outcome of the first attempt is seen.
        let circuit = Circuit::new(&url);
        for client in pool.clients() {
            circuit.watch(client);
        }
        for client in blocking.clients() {
            circuit.watch(&*client.lock().await);
        }
        pool.init()
            .await
            .map_err(|e| classify("connect", url.redacted(), e))?;
        blocking
            .init()
            .await
            .map_err(|e| classify("connect", url.redacted(), e))?;
        let op_ttl_ms = u64::try_from(config.command_timeout.as_millis())
            .unwrap_or(u64::MAX / 4)
            .saturating_mul(2)
            .max(OP_TTL_MIN_MS);
        Ok(RedisFleetBackend {
            inner: Arc::new(Inner {
                keys,
                url,
                policy,
                pool,
                blocking,
                circuit,
                scripts: scripts(),
                op_ttl_ms,
                max_result_bytes: config.max_result_bytes,
                pushes: Lanes::new(),
                reserves: Lanes::new(),
                acks: Lanes::new(),
            }),
            fixed_op: None,
        })
    }

    /// A handle on the same connections whose every queue call carries the op token `op` (and
    /// receipt `{op}:r` for reserves) and is never batched: calling it twice is what a re-send
    /// after a lost reply looks like to Redis. For tests of ADR 0140 only.
    #[doc(hidden)]
    pub fn resend_probe(&self, op: &str) -> Self {
        RedisFleetBackend {
            inner: self.inner.clone(),
            fixed_op: Some(Arc::from(quote(op))),
        }
    }

    /// A fresh op token for one script call (fixed on a probe).
    fn op_token(&self) -> String {
        match &self.fixed_op {
            Some(op) => op.to_string(),
            None => random_token(),
        }
    }

    fn op_ttl(&self) -> RValue {
        int(self.inner.op_ttl_ms)
    }

    /// The key builder (for operators and layout tests).
    pub fn keys(&self) -> &FleetKeys {
        &self.inner.keys
    }

    /// Closes every connection.
    pub async fn close(&self) {
        let _ = self.inner.pool.quit().await;
        for c in self.inner.blocking.clients() {
            let _ = c.lock().await.quit().await;
        }
    }

    fn client(&self) -> &Client {
        self.inner.pool.next()
    }

    /// Runs one command (or a few sent together) of `op` on `key`: inside the circuit, so it
    /// fails at once while Redis is known to be down and ends early when Redis becomes known to
    /// be down while it waits (its outcome unknown, as any `Unavailable` one's); fred's errors
    /// classified. Every call of the backend goes through here or through [`Self::eval`].
    ///
    /// A fred command's future is several kilobytes; it is boxed here, as it is made, so the
    /// futures of the layers that await it hold a pointer instead of moving it at every layer
    /// (ADR 0403).
    fn command<'a, T: 'a>(
        &'a self,
        op: &'static str,
        key: &'a str,
        call: impl Future<Output = std::result::Result<T, fred::error::Error>> + 'a,
    ) -> impl Future<Output = Result<T>> + 'a {
        self.guarded(op, key, Box::pin(call))
    }

    /// [`Self::command`] for a call whose future is small already (a [`LuaScript::run`], which
    /// boxes its fred futures itself): held inline, with no second box.
    async fn guarded<T>(
        &self,
        op: &'static str,
        key: &str,
        call: impl Future<Output = std::result::Result<T, fred::error::Error>>,
    ) -> Result<T> {
        let call = async { call.await.map_err(|e| classify(op, key, e)) };
        self.inner.circuit.guard(op, key, call).await
    }

    fn cluster_layout(&self) -> bool {
        self.inner.keys.layout() == KeyLayout::Cluster
    }

    /// Cluster layout: the ids of pool `name` (HKEYS), their claim keys, and the script mode that
    /// says the claim keys are declared in KEYS. Seed layout: nothing, mode `''` (the script
    /// builds claim keys from the prefix).
    async fn declared_claims(
        &self,
        op: &'static str,
        name: &str,
    ) -> Result<(Vec<String>, Vec<RValue>)> {
        if !self.cluster_layout() {
            return Ok((Vec::new(), vec![text("")]));
        }
        let k = self.inner.keys.pool(name);
        let ids: Vec<RValue> = self.command(op, &k, self.client().hkeys(&k)).await?;
        let ids: Vec<String> = ids.into_iter().filter_map(to_string).collect();
        let claim_keys = ids
            .iter()
            .map(|id| self.inner.keys.pool_claim(name, id))
            .collect();
        let mut args = vec![text("d")];
        args.extend(ids.into_iter().map(text));
        Ok((claim_keys, args))
    }

    async fn eval(
        &self,
        op: &'static str,
        key: &str,
        script: &LuaScript,
        keys: Vec<String>,
        args: Vec<RValue>,
    ) -> Result<RValue> {
        let call = script.run(self.client(), keys, RValue::Array(args));
        self.guarded(op, key, call).await
    }

    async fn eval_i64(
        &self,
        op: &'static str,
        key: &str,
        script: &LuaScript,
        keys: Vec<String>,
        args: Vec<RValue>,
    ) -> Result<i64> {
        let v = self.eval(op, key, script, keys, args).await?;
        to_i64(&v).ok_or_else(|| Error::corrupt(key, format!("{op}: unexpected reply {v:?}")))
    }

    fn decode_item(&self, pool: &str, id: String, raw: &[u8]) -> Result<PoolItem> {
        let location = format!("{}[{id}]", self.inner.keys.pool(pool));
        let doc: Value = serde_json::from_slice(raw).map_err(|e| Error::corrupt(&location, e))?;
        let payload = doc
            .get("p")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::corrupt(&location, "missing \"p\""))
            .and_then(|p| B64.decode(p).map_err(|e| Error::corrupt(&location, e)))?;
        let tags = match doc.get("t") {
            Some(Value::Object(m)) => m.clone(),
            _ => Tags::new(),
        };
        Ok(PoolItem {
            id,
            payload,
            tags,
            expires_at: doc.get("x").and_then(Value::as_f64),
            in_use_until: None,
        })
    }
}

/// Map or pair-array replies as a flat `[k, v, k, v, …]` list.
fn flatten_pairs(v: RValue) -> Vec<RValue> {
    match v {
        RValue::Map(m) => m
            .inner()
            .into_iter()
            .flat_map(|(k, v)| [RValue::Bytes(k.into_bytes()), v])
            .collect(),
        RValue::Array(items) => items
            .into_iter()
            .flat_map(|item| match item {
                RValue::Array(pair) => pair,
                other => vec![other],
            })
            .collect(),
        RValue::Null => Vec::new(),
        other => vec![other],
    }
}

/// A quoted segment decoded; as stored when it does not decode to UTF-8 (not written by a
/// quoting writer).
fn unquote(s: &str) -> String {
    switchyard_redis_support::keys::unquote(s).map_or_else(|| s.to_string(), |d| d.into_owned())
}

/// Quits the subscriber connection when its stream is dropped.
struct SubscriberGuard(SubscriberClient);

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        let sub = self.0.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = sub.quit().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use fred::error::{Error as FredError, ErrorKind};

    /// The fleet reports fred errors through the shared classification (ADR 0170): a failover's
    /// `READONLY` and a full server's `OOM` were not applied, so the caller may retry them; a
    /// wrong password is the configuration's fault.
    #[test]
    fn connection_trouble_and_passing_server_states_are_retryable() {
        for details in [
            "Failed to route command.",
            "BUSY Redis is busy running a script.",
            "READONLY You can't write against a read only replica.",
            "OOM command not allowed when used memory > 'maxmemory'.",
        ] {
            let e = FredError::new(ErrorKind::Unknown, details);
            assert!(
                matches!(classify("queue_push", "k", e), Error::Unavailable { .. }),
                "{details}"
            );
        }
        let wrong = FredError::new(
            ErrorKind::InvalidArgument,
            "WRONGTYPE Operation against a key",
        );
        assert!(matches!(
            classify("queue_push", "k", wrong),
            Error::Rejected { .. }
        ));
        let auth = FredError::new(ErrorKind::Auth, "WRONGPASS invalid username-password pair");
        assert!(matches!(
            classify("connect", "k", auth),
            Error::Config { .. }
        ));
    }

    #[test]
    fn urls_and_layouts_are_checked_before_connecting() {
        let cluster = RedisFleetConfig::new("redis-cluster://127.0.0.1:7000?node=127.0.0.1:7001");
        let (url, policy, layout) = cluster.connection_parts().expect("cluster URL");
        assert!(url.is_cluster());
        assert_eq!(layout, KeyLayout::Cluster);
        assert_eq!(
            policy.max_command_attempts, 3,
            "re-sends are what ADR 0140 makes safe"
        );
        assert!(matches!(
            cluster.clone().with_layout(KeyLayout::Seed).connection_parts(),
            Err(Error::Config { key, .. }) if key == "layout"
        ));
        let (_, _, layout) = RedisFleetConfig::new("redis://127.0.0.1:6379/2")
            .connection_parts()
            .expect("standalone URL");
        assert_eq!(layout, KeyLayout::Seed);
        match RedisFleetConfig::new("http://u:s3cret@h").connection_parts() {
            Err(Error::Config { key, reason }) => {
                assert_eq!(key, "url");
                assert!(!reason.contains("s3cret"), "{reason}");
            }
            other => panic!("expected a config error, got {other:?}"),
        }
        let mut zero = RedisFleetConfig::new("redis://127.0.0.1");
        zero.command_timeout = Duration::ZERO;
        assert!(matches!(
            zero.connection_parts(),
            Err(Error::Config { key, .. }) if key == "command_timeout"
        ));
    }
}
