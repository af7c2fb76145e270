//! # switchyard-fleet-redis
//!
//! [`RedisFleetBackend`]: the fleet backend on Redis (fred), on the seed's key layout. The typed
//! layer (`Queue<T>`, `Consumer`, …) over it is `switchyard-fleet`.
//!
//! * Keys and encodings are the seed's (see [`FleetKeys`]); the extra state this adapter needs
//!   (receipt metadata, attempt counts, pool expiry index, lock fences, wake-up tokens) lives in
//!   extra keys the seed never reads.
//! * Every multi-step operation is one Lua script run by `EVALSHA` (reloaded on `NOSCRIPT`), so it
//!   is atomic and one round trip, and reads the server's clock.
//! * A reserve that has to wait blocks (`BLPOP` on the queue's wake list) on a small pool of
//!   dedicated connections, never on the shared pool that carries everyone's commands.
//! * Every queue script that changes state records its reply under a per-call op token, so a
//!   command fred re-sends after a reconnect applies once and answers what it first did (ADR 0140).
//! * Concurrent `queue_push`, `queue_reserve` and `queue_ack` calls on one queue share script
//!   calls (natural batching, no timer: `batch.rs`, ADR 0141); each call is still applied
//!   atomically and answered on its own.
//!
//! ## Redis Cluster (ADRs 0096–0098)
//!
//! A `redis-cluster://host:port?node=host:port&…` (or `rediss-cluster://`) URL selects fred's
//! cluster client (it follows `MOVED`/`ASK` and refreshes the topology) and
//! [`KeyLayout::Cluster`]: the seed keys with a hash tag on each owner (`{q:…}` queue, `{p:…}`
//! pool, `{l:…}` lock, `{s:…}` stream, `{w:<automation type>}` workers), so every script gets all
//! its keys in `KEYS`, in one slot. Scripts are loaded on every primary when a node answers
//! `NOSCRIPT` (after a failover too). A blocked reserve's `BLPOP` goes to the node of its queue's
//! wake list, on one of the dedicated connections. What reads or writes across owners, and how it
//! behaves on a cluster:
//!
//! * **Pool claims and listings** first read the pool's ids (`HKEYS`) and pass their claim keys
//!   in `KEYS`: two round trips instead of one; an item added between the two is not seen by
//!   that call (as if it had been added just after).
//! * **`queue_submit_once`**: the KV entry `(ns, key)` is in another slot than the queue. The
//!   record that decides is kept in the queue's slot (`…:idem:{ns}:{key}`), set atomically with
//!   the push; the KV entry is read first (an existing one is a duplicate) and written right after
//!   the push. Deduplication is therefore exact per queue; two concurrent first submits of one key
//!   to *different* queues can both enqueue, and if the process dies between push and KV write,
//!   `kv_get` misses the entry until the next duplicate submit writes it.
//! * **Worker registry**: a type's workers and its `wkrs:{w:<type>}` set share a slot, so every
//!   worker call stays one script. `worker_list(None)` walks `wkrs:{r}:types` (the types that
//!   ever had a worker, added before the first registration) and reads each type's set; it
//!   replaces the seed's `wkrs:all`, which is not written on a cluster.
//! * **Catalog, KV, counters** are single keys: unchanged, one slot each.
//! * **Events** (`event_publish`, `event_subscribe`, the `{name}.emit` publish of
//!   `stream_push`) use classic pub/sub, which a cluster broadcasts to every node: a subscriber
//!   connected to any node receives every message, at the cost of cluster-bus traffic per
//!   message.

mod batch;
mod keys;
mod scripts;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use fred::clients::{ExclusivePool, Pool, SubscriberClient};
use fred::error::{Error as FredError, ErrorKind};
use fred::prelude::*;
use fred::types::scripts::Script;
use fred::types::{MultipleKeys, Value as RValue};
use serde_json::{Map, Value};
use switchyard_core::fleet::{
    ConfigWrite, Delivery, EventStream, FleetBackend, IdempotencyKey, LockGrant, PoolClaim,
    PoolItem, Priority, QueueStats, Receipt, SubmitOutcome, Tags, WorkerRecord, WorkerState,
    check_hold, check_name, py_float, random_token, task_id_of, ttl_ms,
};
use switchyard_core::keys::quote;
use switchyard_core::{Error, Result};

use batch::{Lanes, dropped};
pub use keys::{FleetKeys, KeyLayout, QueueKeys};
use scripts::Scripts;

/// `json.dumps(value)` exactly as the seed writes documents (the stats history ZSET uses the
/// document as its member, so bytes matter); the one Python-JSON writer of the crate.
pub fn py_json_dumps(value: &Value) -> String {
    // A `Value` always serializes (it cannot hold NaN).
    switchyard_fleet::pyjson::to_string(value).unwrap_or_default()
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct RedisFleetConfig {
    /// `redis://…`, `rediss://…`, or a Redis Cluster as
    /// `redis-cluster://host:port?node=host:port&…` (also `rediss-cluster://`).
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
}

impl RedisFleetConfig {
    /// Defaults for `url`: no prefix, 4 pooled and 4 blocking connections, 10 s command timeout.
    pub fn new(url: impl Into<String>) -> Self {
        RedisFleetConfig {
            url: url.into(),
            prefix: String::new(),
            pool_size: 4,
            blocking_connections: 4,
            command_timeout: Duration::from_secs(10),
            layout: None,
        }
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
}

/// [`FleetBackend`] on Redis. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct RedisFleetBackend {
    inner: Arc<Inner>,
    /// Test probe: every call carries this op token and skips batching (see `resend_probe`).
    fixed_op: Option<Arc<str>>,
}

struct Inner {
    config: RedisFleetConfig,
    keys: FleetKeys,
    pool: Pool,
    blocking: ExclusivePool,
    scripts: Scripts,
    /// How long an op record lives: longer than fred may still re-send the call (it never
    /// re-sends a command whose timeout passed).
    op_ttl_ms: u64,
    pushes: Lanes<PushReq, ()>,
    reserves: Lanes<ReserveReq, Reserve>,
    acks: Lanes<String, bool>,
}

/// One batched push.
struct PushReq {
    code: &'static str,
    body: Bytes,
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
/// Shortest life of an op record (ADR 0140).
const OP_TTL_MIN_MS: u64 = 10_000;

/// Error details (prefixes) that mean "try again later", whatever fred's error kind.
const TRANSIENT_DETAILS: [&str; 6] = [
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "Failed to route command",
];

fn fred_err(op: &'static str, key: impl Into<String>, e: FredError) -> Error {
    let key = key.into();
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Cluster
        | ErrorKind::Routing
        | ErrorKind::Protocol => Error::unavailable(op, key, e),
        // A server that is loading, busy or failing over, and fred's own "Failed to route
        // command." (ErrorKind::Unknown: sent while the connection is down, between a restart
        // and the reconnect) pass: retryable.
        _ if TRANSIENT_DETAILS.iter().any(|p| e.details().starts_with(p)) => {
            Error::unavailable(op, key, e)
        }
        // Wrong key types, script errors, refused arguments: retrying will not help.
        _ => Error::Rejected {
            op,
            key,
            message: e.details().to_string(),
        },
    }
}

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

impl RedisFleetBackend {
    /// Connects with [`RedisFleetConfig::new`]`(url)` defaults.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::with_config(RedisFleetConfig::new(url)).await
    }

    /// Connects: a shared pool for commands and scripts, and dedicated blocking connections.
    pub async fn with_config(config: RedisFleetConfig) -> Result<Self> {
        let layout = config
            .layout
            .unwrap_or_else(|| KeyLayout::for_url(&config.url));
        let keys = FleetKeys::with_layout(config.prefix.clone(), layout)?;
        let fred_config =
            Config::from_url(&config.url).map_err(|e| Error::config("url", e.details()))?;
        let mut builder = Builder::from_config(fred_config);
        let timeout = config.command_timeout;
        builder
            .with_performance_config(|p| p.default_command_timeout = timeout)
            .with_connection_config(|c| c.connection_timeout = Duration::from_secs(5))
            .set_policy(ReconnectPolicy::new_exponential(0, 100, 30_000, 2));
        let pool = builder
            .build_pool(config.pool_size.max(1))
            .map_err(|e| Error::config("url", e.details()))?;
        pool.init()
            .await
            .map_err(|e| fred_err("connect", &config.url, e))?;
        let blocking = builder
            .build_exclusive_pool(config.blocking_connections.max(1))
            .map_err(|e| Error::config("url", e.details()))?;
        blocking
            .init()
            .await
            .map_err(|e| fred_err("connect", &config.url, e))?;
        let op_ttl_ms = u64::try_from(config.command_timeout.as_millis())
            .unwrap_or(u64::MAX / 4)
            .saturating_mul(2)
            .max(OP_TTL_MIN_MS);
        Ok(RedisFleetBackend {
            inner: Arc::new(Inner {
                keys,
                config,
                pool,
                blocking,
                scripts: Scripts::new(),
                op_ttl_ms,
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
        let ids: Vec<RValue> = self
            .client()
            .hkeys(&k)
            .await
            .map_err(|e| fred_err(op, &k, e))?;
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
        script: &Script,
        keys: Vec<String>,
        args: Vec<RValue>,
    ) -> Result<RValue> {
        // EVALSHA, loading the script again when the server lost it (restart, failover,
        // SCRIPT FLUSH). A flush can land between our load and the retry, so retry a few times.
        // Keys and values are converted once; their clones share the bytes.
        let client = self.client();
        let keys = MultipleKeys::from(keys);
        let args = RValue::Array(args);
        let mut attempt = 0;
        loop {
            match script
                .evalsha::<RValue, _, _, _>(client, keys.clone(), args.clone())
                .await
            {
                Err(e) if e.details().starts_with("NOSCRIPT") && attempt < 3 => {
                    attempt += 1;
                    script
                        .load(client)
                        .await
                        .map_err(|e| fred_err(op, key, e))?;
                }
                other => return other.map_err(|e| fred_err(op, key, e)),
            }
        }
    }

    async fn eval_i64(
        &self,
        op: &'static str,
        key: &str,
        script: &Script,
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

    /// One reserve script call for `reqs` (receipts filled in order) under op token `op`: one
    /// outcome per request.
    async fn reserve_script(
        &self,
        qk: &QueueKeys,
        reqs: &[ReserveReq],
        op: &str,
    ) -> Result<Vec<Reserve>> {
        let mut args = Vec::with_capacity(1 + 2 * reqs.len());
        args.push(self.op_ttl());
        for r in reqs {
            args.push(text(r.receipt.as_str()));
            args.push(ms_arg(r.visibility_ms));
        }
        let reply = self
            .eval(
                "queue_reserve",
                &qk.normal,
                &self.inner.scripts.reserve,
                qk.with_op(op),
                args,
            )
            .await?;
        let bad = || Error::corrupt(&qk.normal, "reserve: unexpected reply shape");
        let parts = array(reply);
        let reserved = parts.first().and_then(to_i64).ok_or_else(bad)?;
        let reserved = usize::try_from(reserved).map_err(|_| bad())?;
        if reserved > reqs.len() || parts.len() != 2 + 4 * reserved {
            return Err(bad());
        }
        let next_due = parts
            .get(1)
            .and_then(to_i64)
            .and_then(|ms| u64::try_from(ms).ok());
        let mut out = Vec::with_capacity(reqs.len());
        let mut items = parts.into_iter().skip(2);
        for req in reqs {
            let mut field = || items.next().unwrap_or(RValue::Null);
            if out.len() >= reserved {
                out.push(Err(next_due));
                continue;
            }
            let (body, tier, attempt, deadline) = (field(), field(), field(), field());
            let tier = to_string(tier).unwrap_or_default();
            // Tier '': the reservation was swept before this re-send arrived (the task is
            // back in its tier): nothing was reserved for this call.
            let Some(priority) = Priority::from_code(&tier) else {
                out.push(Err(next_due));
                continue;
            };
            let body = to_bytes(body).unwrap_or_default();
            out.push(Ok(Delivery {
                receipt: Receipt::new(req.receipt.as_str()),
                task_id: task_id_of(&body),
                body,
                attempt: u32::try_from(to_i64(&attempt).unwrap_or(1)).unwrap_or(u32::MAX),
                priority,
                visible_until: to_f64(&deadline).unwrap_or(0.0),
            }));
        }
        Ok(out)
    }

    /// One non-blocking reserve attempt, batched with concurrent ones on the same queue.
    async fn try_reserve(
        &self,
        name: &str,
        receipt: String,
        visibility_ms: u64,
    ) -> Result<Reserve> {
        let req = ReserveReq {
            receipt,
            visibility_ms,
        };
        if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            let op = self.op_token();
            let mut out = self
                .reserve_script(&qk, std::slice::from_ref(&req), &op)
                .await?;
            return out
                .pop()
                .ok_or_else(|| Error::corrupt(&qk.normal, "reserve: no outcome"));
        }
        let (rx, start) = self.inner.reserves.enqueue(name, req);
        if start {
            let me = self.clone();
            let name = name.to_owned();
            tokio::spawn(async move { me.fly_reserves(name).await });
        }
        rx.await
            .unwrap_or_else(|_| Err(dropped("queue_reserve", name)))
    }

    async fn fly_reserves(self, name: String) {
        let qk = self.inner.keys.queue(&name);
        let run =
            async |reqs: Vec<ReserveReq>| self.reserve_script(&qk, &reqs, &self.op_token()).await;
        batch::fly(
            &self.inner.reserves,
            &name,
            BATCH_ITEMS,
            usize::MAX,
            |_| 0,
            run,
        )
        .await;
    }

    /// One push script call for `reqs` under op token `op`.
    async fn push_script(&self, qk: &QueueKeys, reqs: &[PushReq], op: &str) -> Result<()> {
        let mut args = Vec::with_capacity(1 + 2 * reqs.len());
        args.push(self.op_ttl());
        for r in reqs {
            args.push(RValue::from_static_str(r.code));
            args.push(RValue::Bytes(r.body.clone()));
        }
        self.eval(
            "queue_push",
            &qk.normal,
            &self.inner.scripts.push,
            qk.with_op(op),
            args,
        )
        .await?;
        Ok(())
    }

    async fn fly_pushes(self, name: String) {
        let qk = self.inner.keys.queue(&name);
        let run = async |reqs: Vec<PushReq>| {
            self.push_script(&qk, &reqs, &self.op_token()).await?;
            Ok(vec![(); reqs.len()])
        };
        let weight = |r: &PushReq| r.body.len();
        batch::fly(
            &self.inner.pushes,
            &name,
            BATCH_ITEMS,
            BATCH_BYTES,
            weight,
            run,
        )
        .await;
    }

    /// One ack script call for `receipts` under op token `op`: whether each was current.
    async fn ack_script(&self, qk: &QueueKeys, receipts: &[String], op: &str) -> Result<Vec<bool>> {
        let mut args = Vec::with_capacity(1 + receipts.len());
        args.push(self.op_ttl());
        args.extend(receipts.iter().map(|r| text(r.as_str())));
        let reply = self
            .eval(
                "queue_ack",
                &qk.processing,
                &self.inner.scripts.ack,
                qk.with_op(op),
                args,
            )
            .await?;
        let flags = to_bytes(reply).unwrap_or_default();
        if flags.len() != receipts.len() {
            return Err(Error::corrupt(&qk.processing, "ack: unexpected reply"));
        }
        Ok(flags.into_iter().map(|f| f == b'1').collect())
    }

    async fn fly_acks(self, name: String) {
        let qk = self.inner.keys.queue(&name);
        let run =
            async |receipts: Vec<String>| self.ack_script(&qk, &receipts, &self.op_token()).await;
        batch::fly(&self.inner.acks, &name, BATCH_ITEMS, usize::MAX, |_| 0, run).await;
    }

    /// Waits up to `wait` for a wake-up token on a dedicated connection.
    async fn wait_for_push(&self, qk: &QueueKeys, wait: Duration) -> Result<()> {
        if wait < Duration::from_millis(10) {
            tokio::time::sleep(wait).await;
            return Ok(());
        }
        // All blocking connections busy: fall back to a short sleep, then try again.
        let Ok(client) = tokio::time::timeout(wait, self.inner.blocking.acquire()).await else {
            return Ok(());
        };
        let options = Options {
            timeout: Some(wait + Duration::from_secs(5)),
            ..Default::default()
        };
        client
            .with_options(&options)
            .blpop::<RValue, _>(qk.wake.clone(), wait.as_secs_f64())
            .await
            .map(|_| ())
            .or_else(|e| match e.kind() {
                // fred reports BLPOP's nil reply (nothing pushed in time) as a timeout.
                ErrorKind::Timeout => Ok(()),
                _ => Err(fred_err("queue_reserve", &qk.wake, e)),
            })
    }

    fn tier_code(p: Priority) -> RValue {
        text(p.code())
    }
}

#[async_trait]
impl FleetBackend for RedisFleetBackend {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        check_name("ns", ns)?;
        let k = self.inner.keys.kv(ns, key);
        let expire = ttl_ms(ttl).map(|ms| Expiration::PX(ms as i64));
        self.client()
            .set::<(), _, _>(&k, bin(value), expire, None, false)
            .await
            .map_err(|e| fred_err("kv_set", &k, e))
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        check_name("ns", ns)?;
        let k = self.inner.keys.kv(ns, key);
        let expire = ttl_ms(ttl).map(|ms| Expiration::PX(ms as i64));
        let r: RValue = self
            .client()
            .set(&k, bin(value), expire, Some(SetOptions::NX), false)
            .await
            .map_err(|e| fred_err("kv_set_nx", &k, e))?;
        Ok(!r.is_null())
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        check_name("ns", ns)?;
        let k = self.inner.keys.kv(ns, key);
        let r: RValue = self
            .client()
            .get(&k)
            .await
            .map_err(|e| fred_err("kv_get", &k, e))?;
        Ok(to_bytes(r))
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        check_name("ns", ns)?;
        let k = self.inner.keys.kv(ns, key);
        let n: i64 = self
            .client()
            .del(&k)
            .await
            .map_err(|e| fred_err("kv_del", &k, e))?;
        Ok(n > 0)
    }

    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("pool", name)?;
        let k = self.inner.keys.pool(name);
        // The script appends the expiry it computes from the server clock, then the closing brace.
        let head = format!(
            "{{\"p\": \"{}\", \"t\": {}, \"x\": ",
            B64.encode(payload),
            py_json_dumps(&Value::Object(tags.clone()))
        );
        self.eval(
            "pool_put",
            &k,
            &self.inner.scripts.pool_put,
            vec![k.clone(), self.inner.keys.pool_expiry(name)],
            vec![text(id), text(head), ms_arg(ttl_ms(ttl).unwrap_or(0))],
        )
        .await?;
        Ok(())
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        check_name("pool", name)?;
        let k = self.inner.keys.pool(name);
        let (claim_keys, claim_args) = self.declared_claims("pool_list", name).await?;
        let mut keys = vec![k.clone()];
        keys.extend(claim_keys);
        let mut args = vec![text(self.inner.keys.pool_claim_prefix(name))];
        args.extend(claim_args);
        let reply = self
            .eval("pool_list", &k, &self.inner.scripts.pool_list, keys, args)
            .await?;
        let mut parts = array(reply).into_iter();
        let now = parts.next().as_ref().and_then(to_f64).unwrap_or(0.0);
        let mut out = Vec::new();
        while let (Some(id), Some(raw), Some(pttl)) = (parts.next(), parts.next(), parts.next()) {
            let id = to_string(id).unwrap_or_default();
            let raw = to_bytes(raw).unwrap_or_default();
            // One undecodable item must not hide the others.
            let Ok(mut item) = self.decode_item(name, id, &raw) else {
                continue;
            };
            if item.expires_at.is_some_and(|x| x <= now) {
                continue;
            }
            let pttl = to_i64(&pttl).unwrap_or(-2);
            item.in_use_until = (pttl > 0).then(|| now + pttl as f64 / 1000.0);
            out.push(item);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        check_name("pool", name)?;
        let k = self.inner.keys.pool(name);
        let n = self
            .eval_i64(
                "pool_size",
                &k,
                &self.inner.scripts.pool_size,
                vec![k.clone(), self.inner.keys.pool_expiry(name)],
                vec![],
            )
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        check_name("pool", name)?;
        let k = self.inner.keys.pool(name);
        let n = self
            .eval_i64(
                "pool_remove",
                &k,
                &self.inner.scripts.pool_remove,
                vec![
                    k.clone(),
                    self.inner.keys.pool_expiry(name),
                    self.inner.keys.pool_claim(name, id),
                ],
                vec![text(id)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        check_name("pool", name)?;
        let k = self.inner.keys.pool_claim(name, id);
        let n = self
            .eval_i64(
                "pool_release",
                &k,
                &self.inner.scripts.pool_release,
                vec![k.clone()],
                vec![text(token)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>> {
        check_name("pool", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let k = self.inner.keys.pool(name);
        let token = random_token();
        let (claim_keys, claim_args) = self.declared_claims("pool_claim_any", name).await?;
        let mut keys = vec![k.clone(), self.inner.keys.pool_expiry(name)];
        keys.extend(claim_keys);
        let mut args = vec![
            text(self.inner.keys.pool_claim_prefix(name)),
            text(serde_json::to_string(where_).unwrap_or_else(|_| "{}".into())),
            ms_arg(hold_ms),
            text(token.clone()),
        ];
        args.extend(claim_args);
        let reply = self
            .eval(
                "pool_claim_any",
                &k,
                &self.inner.scripts.pool_claim,
                keys,
                args,
            )
            .await?;
        let parts = array(reply);
        if parts.len() != 3 {
            return Ok(None);
        }
        let mut parts = parts.into_iter();
        let id = parts.next().and_then(to_string).unwrap_or_default();
        let raw = parts.next().and_then(to_bytes).unwrap_or_default();
        let now = parts.next().as_ref().and_then(to_f64).unwrap_or(0.0);
        let mut item = self.decode_item(name, id, &raw)?;
        item.in_use_until = Some(now + hold_ms as f64 / 1000.0);
        Ok(Some(PoolClaim { item, token }))
    }

    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let k = self.inner.keys.lock(name);
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            let token = random_token();
            let fence = self
                .eval_i64(
                    "lock_acquire",
                    &k,
                    &self.inner.scripts.lock_acquire,
                    vec![k.clone(), self.inner.keys.lock_fence(name)],
                    vec![text(token.clone()), ms_arg(hold_ms)],
                )
                .await?;
            if fence > 0 {
                return Ok(Some(LockGrant {
                    token,
                    fence: fence as u64,
                }));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
        let k = self.inner.keys.lock(name);
        let n = self
            .eval_i64(
                "lock_release",
                &k,
                &self.inner.scripts.lock_release,
                vec![k.clone()],
                vec![text(token)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let k = self.inner.keys.lock(name);
        let n = self
            .eval_i64(
                "lock_extend",
                &k,
                &self.inner.scripts.lock_extend,
                vec![k.clone()],
                vec![text(token), ms_arg(hold_ms)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        check_name("counter", name)?;
        let k = self.inner.keys.counter(name);
        self.client()
            .incr_by(&k, by)
            .await
            .map_err(|e| fred_err("counter_incr", &k, e))
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        check_name("counter", name)?;
        let k = self.inner.keys.counter(name);
        let r: RValue = self
            .client()
            .get(&k)
            .await
            .map_err(|e| fred_err("counter_get", &k, e))?;
        if r.is_null() {
            return Ok(0);
        }
        to_i64(&r).ok_or_else(|| Error::corrupt(&k, "not an integer"))
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        check_name("counter", name)?;
        let k = self.inner.keys.counter(name);
        self.client()
            .set::<(), _, _>(&k, value, None, None, false)
            .await
            .map_err(|e| fred_err("counter_set", &k, e))
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        check_name("counter", name)?;
        let k = self.inner.keys.counter(name);
        let n: i64 = self
            .client()
            .del(&k)
            .await
            .map_err(|e| fred_err("counter_del", &k, e))?;
        Ok(n > 0)
    }

    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        let req = PushReq {
            code: priority.code(),
            body: Bytes::copy_from_slice(body),
        };
        if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            return self.push_script(&qk, &[req], &self.op_token()).await;
        }
        let (rx, start) = self.inner.pushes.enqueue(name, req);
        if start {
            let me = self.clone();
            let name = name.to_owned();
            tokio::spawn(async move { me.fly_pushes(name).await });
        }
        rx.await
            .unwrap_or_else(|_| Err(dropped("queue_push", name)))
    }

    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        check_name("queue", name)?;
        check_name("idem.ns", idem.ns)?;
        let qk = self.inner.keys.queue(name);
        let kv_key = self.inner.keys.kv(idem.ns, idem.key);
        let mut keys = qk.with_op(&self.op_token());
        if self.cluster_layout() {
            // The KV entry lives in another slot than the queue: a duplicate already recorded
            // there is answered first, and the record that decides lives in the queue's slot.
            let stored: RValue = self
                .client()
                .get(&kv_key)
                .await
                .map_err(|e| fred_err("queue_submit_once", &kv_key, e))?;
            if let Some(value) = to_bytes(stored) {
                return Ok(SubmitOutcome::Duplicate(value));
            }
            keys.push(self.inner.keys.queue_idem(name, idem.ns, idem.key));
        } else {
            keys.push(kv_key.clone());
        }
        let reply = self
            .eval(
                "queue_submit_once",
                &qk.normal,
                &self.inner.scripts.submit_once,
                keys,
                vec![
                    self.op_ttl(),
                    Self::tier_code(priority),
                    bin(body),
                    bin(idem.value),
                    ms_arg(ttl_ms(idem.ttl).unwrap_or(0)),
                ],
            )
            .await?;
        let mut parts = array(reply);
        let (outcome, value, ttl) = match parts.first().and_then(to_i64) {
            Some(1) => (
                SubmitOutcome::Enqueued,
                idem.value.to_vec(),
                ttl_ms(idem.ttl).map(|ms| ms as i64),
            ),
            Some(0) if parts.len() >= 2 => {
                let pttl = parts.get(2).and_then(to_i64).filter(|ms| *ms > 0);
                let value = to_bytes(parts.swap_remove(1)).unwrap_or_default();
                (SubmitOutcome::Duplicate(value.clone()), value, pttl)
            }
            _ => return Err(Error::corrupt(&qk.normal, "submit_once: unexpected reply")),
        };
        if self.cluster_layout() {
            // Mirror the record into the KV entry (ns, key) readers expect. The push is done, so
            // a failure here is not the caller's: the next duplicate submit writes it again.
            let expire = ttl.map(Expiration::PX);
            if let Err(e) = self
                .client()
                .set::<RValue, _, _>(&kv_key, bin(&value), expire, Some(SetOptions::NX), false)
                .await
            {
                tracing::warn!(key = %kv_key, error = %e, "queue_submit_once: idempotency KV entry not written");
            }
        }
        Ok(outcome)
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let c = self.client();
        let (h, n, l): (i64, i64, i64) = tokio::try_join!(
            c.llen::<i64, _>(&qk.high),
            c.llen::<i64, _>(&qk.normal),
            c.llen::<i64, _>(&qk.low)
        )
        .map_err(|e| fred_err("queue_size", &qk.normal, e))?;
        Ok((h + n + l).max(0) as u64)
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        // One script over the queue's keys (one slot on the cluster layout): a snapshot.
        let reply = self
            .eval(
                "queue_stats",
                &qk.normal,
                &self.inner.scripts.stats,
                qk.all(),
                Vec::new(),
            )
            .await?;
        let counts: Vec<u64> = array(reply.clone())
            .iter()
            .map(|v| to_i64(v).and_then(|n| u64::try_from(n).ok()))
            .collect::<Option<_>>()
            .filter(|c: &Vec<u64>| c.len() == 8)
            .ok_or_else(|| {
                Error::corrupt(
                    &qk.normal,
                    format!("queue_stats: unexpected reply {reply:?}"),
                )
            })?;
        let mut stats = QueueStats::default();
        stats.high = counts[0];
        stats.normal = counts[1];
        stats.low = counts[2];
        stats.in_flight = counts[3];
        stats.overdue = counts[4];
        stats.scheduled = counts[5];
        stats.due = counts[6];
        stats.dead = counts[7];
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let mut out = Vec::new();
        for key in [&qk.high, &qk.normal, &qk.low] {
            let left = n.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let chunk: Vec<RValue> = self
                .client()
                .lrange(key, 0, left as i64 - 1)
                .await
                .map_err(|e| fred_err("queue_peek", key, e))?;
            out.extend(chunk.into_iter().filter_map(to_bytes));
        }
        Ok(out)
    }

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut qk = None;
        loop {
            // A fresh receipt per attempt (fixed on a probe); a re-send of the attempt's script
            // is answered with the deliveries it made (ADR 0140).
            let receipt = match &self.fixed_op {
                Some(op) => format!("{op}:r"),
                None => random_token(),
            };
            // Always try once before looking at the clock (flaw Q2).
            let next_due = match self.try_reserve(name, receipt, visibility_ms).await? {
                Ok(d) => return Ok(Some(d)),
                Err(next_due) => next_due,
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut wait = left.min(MAX_BLOCK);
            if let Some(ms) = next_due {
                wait = wait.min(Duration::from_millis(ms.max(1)));
            }
            let qk = qk.get_or_insert_with(|| self.inner.keys.queue(name));
            self.wait_for_push(qk, wait).await?;
        }
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        let receipt = receipt.as_str().to_owned();
        if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            let flags = self.ack_script(&qk, &[receipt], &self.op_token()).await?;
            return Ok(flags.first().copied().unwrap_or(false));
        }
        let (rx, start) = self.inner.acks.enqueue(name, receipt);
        if start {
            let me = self.clone();
            let name = name.to_owned();
            tokio::spawn(async move { me.fly_acks(name).await });
        }
        rx.await.unwrap_or_else(|_| Err(dropped("queue_ack", name)))
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "queue_nack",
                &qk.processing,
                &self.inner.scripts.nack,
                qk.with_op(&self.op_token()),
                vec![
                    self.op_ttl(),
                    text(receipt.as_str()),
                    bin(body),
                    ms_arg(ttl_ms(Some(delay)).unwrap_or(0)),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "queue_extend",
                &qk.processing,
                &self.inner.scripts.extend,
                qk.all(),
                vec![text(receipt.as_str()), ms_arg(visibility_ms)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "queue_fail",
                &qk.processing,
                &self.inner.scripts.fail,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), text(receipt.as_str()), bin(body)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let mut total = 0u64;
        loop {
            let reply = self
                .eval(
                    "queue_sweep_expired",
                    &qk.processing,
                    &self.inner.scripts.sweep,
                    qk.all(),
                    vec![int(SWEEP_BATCH)],
                )
                .await?;
            let parts = array(reply);
            let moved = parts.first().and_then(to_i64).unwrap_or(0);
            let examined = parts.get(1).and_then(to_i64).unwrap_or(0);
            total += moved.max(0) as u64;
            if examined < SWEEP_BATCH {
                return Ok(total);
            }
        }
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        // A script rather than RPUSH, for its op record: a re-sent RPUSH would append twice.
        self.eval(
            "queue_dead",
            &qk.dead,
            &self.inner.scripts.dead,
            qk.with_op(&self.op_token()),
            vec![self.op_ttl(), bin(body)],
        )
        .await?;
        Ok(())
    }

    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.queue(name).dead;
        let items: Vec<RValue> = self
            .client()
            .lrange(&k, 0, n as i64 - 1)
            .await
            .map_err(|e| fred_err("dlq_peek", &k, e))?;
        Ok(items.into_iter().filter_map(to_bytes).collect())
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        // One LPOP with a count inside a script: atomic, one round trip (flaw T4), and a re-send
        // returns the bodies the first send popped instead of popping more (ADR 0140).
        let r = self
            .eval(
                "dlq_pop",
                &qk.dead,
                &self.inner.scripts.dlq_pop,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), int(n as u64)],
            )
            .await?;
        Ok(array(r).into_iter().filter_map(to_bytes).collect())
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let k = self.inner.keys.queue(name).dead;
        let n: i64 = self
            .client()
            .llen(&k)
            .await
            .map_err(|e| fred_err("dlq_length", &k, e))?;
        Ok(n.max(0) as u64)
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "dlq_clear",
                &qk.dead,
                &self.inner.scripts.dlq_clear,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl()],
            )
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        check_name("queue", name)?;
        if n == 0 {
            return Ok(0);
        }
        let qk = self.inner.keys.queue(name);
        let moved = self
            .eval_i64(
                "dlq_requeue",
                &qk.dead,
                &self.inner.scripts.dlq_requeue,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), int(n as u64), Self::tier_code(priority)],
            )
            .await?;
        Ok(moved.max(0) as u64)
    }

    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("stream", name)?;
        if !score.is_finite() {
            return Err(Error::invalid("score", "must be finite"));
        }
        let k = self.inner.keys.stream(name);
        self.eval(
            "stream_push",
            &k,
            &self.inner.scripts.stream_push,
            vec![k.clone()],
            vec![
                bin(envelope),
                text(py_float(score)),
                int(max_len),
                ms_arg(ttl_ms(ttl).unwrap_or(0)),
                text(self.inner.keys.channel(&format!("{name}.emit"))),
            ],
        )
        .await?;
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.stream(name);
        let r: RValue = self
            .client()
            .zpopmin(&k, Some(n))
            .await
            .map_err(|e| fred_err("stream_pop", &k, e))?;
        // ZPOPMIN replies member, score, member, score… (RESP2).
        Ok(flatten_pairs(r)
            .into_iter()
            .step_by(2)
            .filter_map(to_bytes)
            .collect())
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.stream(name);
        let r: Vec<RValue> = self
            .client()
            .zrange(&k, 0, n as i64 - 1, None, false, None, false)
            .await
            .map_err(|e| fred_err("stream_peek", &k, e))?;
        Ok(r.into_iter().filter_map(to_bytes).collect())
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        check_name("stream", name)?;
        let k = self.inner.keys.stream(name);
        let n: i64 = self
            .client()
            .zcard(&k)
            .await
            .map_err(|e| fred_err("stream_length", &k, e))?;
        Ok(n.max(0) as u64)
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        check_name("stream", name)?;
        let k = self.inner.keys.stream(name);
        self.eval(
            "stream_trim",
            &k,
            &self.inner.scripts.stream_trim,
            vec![k.clone()],
            vec![int(max_len), ms_arg(ttl_ms(ttl).unwrap_or(0))],
        )
        .await?;
        Ok(())
    }

    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        let ch = self.inner.keys.channel(topic);
        self.client()
            .publish::<(), _, _>(&ch, bin(body))
            .await
            .map_err(|e| fred_err("event_publish", &ch, e))
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        let ch = self.inner.keys.channel(topic);
        let fred_config = Config::from_url(&self.inner.config.url)
            .map_err(|e| Error::config("url", e.details()))?;
        let mut builder = Builder::from_config(fred_config);
        builder.set_policy(ReconnectPolicy::new_exponential(0, 100, 30_000, 2));
        let sub = builder
            .build_subscriber_client()
            .map_err(|e| Error::config("url", e.details()))?;
        sub.init()
            .await
            .map_err(|e| fred_err("event_subscribe", &ch, e))?;
        // Resubscribes after a reconnect.
        let _task = sub.manage_subscriptions();
        let rx = sub.message_rx();
        sub.subscribe(ch.clone())
            .await
            .map_err(|e| fred_err("event_subscribe", &ch, e))?;
        let guard = SubscriberGuard(sub);
        Ok(Box::pin(futures::stream::unfold(
            (rx, guard, ch),
            |(mut rx, guard, ch)| async move {
                loop {
                    match rx.recv().await {
                        Ok(msg) if *msg.channel == *ch => {
                            let body = to_bytes(msg.value).unwrap_or_default();
                            return Some((body, (rx, guard, ch)));
                        }
                        Ok(_) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        )))
    }

    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        check_name("automation_type", automation_type)?;
        check_name("worker_id", worker_id)?;
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let mut keys = vec![
            k.worker(at, wid, "hardware"),
            k.worker(at, wid, "config"),
            k.worker(at, wid, "gen"),
            k.workers_of(at),
        ];
        if self.cluster_layout() {
            // The type index lives in its own slot; it is written first, so every registered
            // worker's type is listed (a type whose workers are gone lists none).
            let types = k.worker_types();
            self.client()
                .sadd::<(), _, _>(&types, quote(at))
                .await
                .map_err(|e| fred_err("worker_register", &types, e))?;
        } else {
            keys.push(k.workers_all());
        }
        self.eval(
            "worker_register",
            &k.worker(at, wid, "hardware"),
            &self.inner.scripts.worker_register,
            keys,
            vec![
                text(py_json_dumps(hardware)),
                text(wid),
                text(FleetKeys::all_member(at, wid)),
            ],
        )
        .await?;
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        let k = &self.inner.keys;
        let ck = k.worker(automation_type, worker_id, "config");
        // One MGET: config and generation are read together (flaw W1).
        let r: Vec<RValue> = self
            .client()
            .mget(vec![
                ck.clone(),
                k.worker(automation_type, worker_id, "gen"),
            ])
            .await
            .map_err(|e| fred_err("worker_get_config", &ck, e))?;
        let mut it = r.into_iter();
        let config = it.next().and_then(to_bytes);
        let generation = it.next().as_ref().and_then(to_i64).unwrap_or(0);
        match config {
            None => Ok((Value::Object(Map::new()), 0)),
            Some(raw) => Ok((json_doc(&ck, Some(raw))?, generation.max(0) as u64)),
        }
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        if !config.is_object() {
            return Err(Error::invalid("config", "must be a JSON object"));
        }
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let reply = self
            .eval(
                "worker_set_config",
                &k.worker(at, wid, "config"),
                &self.inner.scripts.worker_set_config,
                vec![
                    k.workers_of(at),
                    k.worker(at, wid, "config"),
                    k.worker(at, wid, "gen"),
                ],
                vec![
                    text(wid),
                    text(py_json_dumps(config)),
                    text(expected_gen.map(|g| g.to_string()).unwrap_or_default()),
                ],
            )
            .await?;
        let parts = array(reply);
        let code = parts.first().and_then(to_i64);
        let generation = parts.get(1).and_then(to_i64).unwrap_or(0).max(0) as u64;
        Ok(match code {
            Some(1) => ConfigWrite::Applied { generation },
            Some(0) => ConfigWrite::GenMismatch {
                current: generation,
            },
            _ => ConfigWrite::NotRegistered,
        })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_set_state",
                &k.worker(at, wid, "state"),
                &self.inner.scripts.worker_set_state,
                vec![k.workers_of(at), k.worker(at, wid, "state")],
                vec![
                    text(wid),
                    text(state.state),
                    text(py_float(state.last_seen)),
                    text(state.last_error.unwrap_or("")),
                    text(state.applied_gen.map(|g| g.to_string()).unwrap_or_default()),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_set_stats",
                &k.worker(at, wid, "stats"),
                &self.inner.scripts.worker_set_stats,
                vec![k.workers_of(at), k.worker(at, wid, "stats")],
                vec![text(wid), text(py_json_dumps(stats))],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        if !ts.is_finite() {
            return Err(Error::invalid("ts", "must be finite"));
        }
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_stats_push",
                &k.worker(at, wid, "stats:history"),
                &self.inner.scripts.worker_stats_push,
                vec![k.workers_of(at), k.worker(at, wid, "stats:history")],
                vec![
                    text(wid),
                    text(py_float(ts)),
                    text(py_json_dumps(frame)),
                    int(max_entries as u64),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = self
            .inner
            .keys
            .worker(automation_type, worker_id, "stats:history");
        let r: Vec<RValue> = self
            .client()
            .zrangebyscore(&k, since, "+inf", false, Some((0, limit as i64)))
            .await
            .map_err(|e| fred_err("worker_stats_history", &k, e))?;
        // A frame that is not JSON is skipped, as the seed does.
        Ok(r.into_iter()
            .filter_map(to_bytes)
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let loc = k.worker(at, wid, "*");
        let reply = self
            .eval(
                "worker_get",
                &loc,
                &self.inner.scripts.worker_get,
                vec![
                    k.workers_of(at),
                    k.worker(at, wid, "hardware"),
                    k.worker(at, wid, "config"),
                    k.worker(at, wid, "gen"),
                    k.worker(at, wid, "stats"),
                    k.worker(at, wid, "state"),
                ],
                vec![text(wid)],
            )
            .await?;
        let parts = array(reply);
        if parts.len() < 4 {
            return Ok(None);
        }
        let mut it = parts.into_iter();
        let mut next = || it.next().unwrap_or(RValue::Null);
        let hardware = json_doc(&k.worker(at, wid, "hardware"), to_bytes(next()))?;
        let config = json_doc(&k.worker(at, wid, "config"), to_bytes(next()))?;
        let config_gen = to_i64(&next()).unwrap_or(0).max(0) as u64;
        let stats = json_doc(&k.worker(at, wid, "stats"), to_bytes(next()))?;
        let state = to_string(next()).unwrap_or_else(|| "IDLE".to_string());
        let last_seen = to_f64(&next()).unwrap_or(0.0);
        let last_error = to_string(next()).filter(|e| !e.is_empty());
        let applied_gen = to_i64(&next()).and_then(|g| u64::try_from(g).ok());
        Ok(Some(WorkerRecord {
            hardware,
            config,
            config_gen,
            state,
            last_seen,
            last_error,
            applied_gen,
            stats,
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        let k = &self.inner.keys;
        let mut out: Vec<(String, String)> = match automation_type {
            Some(at) => {
                let key = k.workers_of(at);
                let members: Vec<RValue> = self
                    .client()
                    .smembers(&key)
                    .await
                    .map_err(|e| fred_err("worker_list", &key, e))?;
                members
                    .into_iter()
                    .filter_map(to_string)
                    .map(|wid| (at.to_string(), wid))
                    .collect()
            }
            None if self.cluster_layout() => {
                let key = k.worker_types();
                let types: Vec<RValue> = self
                    .client()
                    .smembers(&key)
                    .await
                    .map_err(|e| fred_err("worker_list", &key, e))?;
                let mut out = Vec::new();
                // One SMEMBERS per type, each in its type's slot.
                for at in types.into_iter().filter_map(to_string).map(|t| unquote(&t)) {
                    let key = k.workers_of(&at);
                    let members: Vec<RValue> = self
                        .client()
                        .smembers(&key)
                        .await
                        .map_err(|e| fred_err("worker_list", &key, e))?;
                    out.extend(
                        members
                            .into_iter()
                            .filter_map(to_string)
                            .map(|wid| (at.clone(), wid)),
                    );
                }
                out
            }
            None => {
                let key = k.workers_all();
                let members: Vec<RValue> = self
                    .client()
                    .smembers(&key)
                    .await
                    .map_err(|e| fred_err("worker_list", &key, e))?;
                members
                    .into_iter()
                    .filter_map(to_string)
                    .filter_map(|m| {
                        let (at, wid) = m.split_once('|')?;
                        Some((unquote(at), unquote(wid)))
                    })
                    .collect()
            }
        };
        out.sort();
        Ok(out)
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let mut keys = vec![
            k.workers_of(at),
            k.worker(at, wid, "hardware"),
            k.worker(at, wid, "config"),
            k.worker(at, wid, "state"),
            k.worker(at, wid, "stats"),
            k.worker(at, wid, "stats:history"),
        ];
        if !self.cluster_layout() {
            keys.push(k.workers_all());
        }
        let n = self
            .eval_i64(
                "worker_remove",
                &k.workers_of(at),
                &self.inner.scripts.worker_remove,
                keys,
                vec![text(wid), text(FleetKeys::all_member(at, wid))],
            )
            .await?;
        Ok(n == 1)
    }

    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
        let k = self.inner.keys.catalog();
        self.client()
            .hset::<(), _, _>(&k, (automation_type, bin(doc)))
            .await
            .map_err(|e| fred_err("catalog_set", &k, e))
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .client()
            .hget(&k, automation_type)
            .await
            .map_err(|e| fred_err("catalog_get", &k, e))?;
        Ok(to_bytes(r))
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        let k = self.inner.keys.catalog();
        let r: RValue = self
            .client()
            .hgetall(&k)
            .await
            .map_err(|e| fred_err("catalog_all", &k, e))?;
        let mut out = BTreeMap::new();
        let mut it = flatten_pairs(r).into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            if let (Some(f), Some(v)) = (to_string(f), to_bytes(v)) {
                out.insert(f, v);
            }
        }
        Ok(out)
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

fn unquote(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
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

    #[test]
    fn connection_trouble_is_retryable_and_script_errors_are_not() {
        let down = FredError::new(ErrorKind::Unknown, "Failed to route command.");
        assert!(matches!(
            fred_err("queue_push", "k", down),
            Error::Unavailable { .. }
        ));
        let busy = FredError::new(ErrorKind::Unknown, "BUSY Redis is busy running a script.");
        assert!(matches!(
            fred_err("queue_push", "k", busy),
            Error::Unavailable { .. }
        ));
        let wrong = FredError::new(ErrorKind::Unknown, "WRONGTYPE Operation against a key");
        assert!(matches!(
            fred_err("queue_push", "k", wrong),
            Error::Rejected { .. }
        ));
    }
}
