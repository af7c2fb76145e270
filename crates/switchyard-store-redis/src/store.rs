//! `RedisEventStore`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use fred::clients::ExclusivePool;
use fred::prelude::*;
use fred::types::config::Options;
use fred::types::scripts::Script;
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::OwnedMutexGuard;

use switchyard_core::context::{RunContext, RunSummary, SessionClaim};
use switchyard_core::event::{
    Event, Payload, RunResumed, RunStarted, SchemaVersion, format_ts, parse_ts, stamp,
};
use switchyard_core::status::{RunStatus, can_resume, lifecycle_status};
use switchyard_core::store::{EventStore, checks};
use switchyard_core::{Clock, Error, Result};

use crate::config::{BeforeExecHook, RedisStoreOptions};
use crate::keys::{KeySpace, RunKeys, split_member};

const APPEND_LUA: &str = include_str!("append.lua");

/// An [`EventStore`] on Redis, sharing the seed's key layout and event JSON.
///
/// * Appends are one Lua script each: seq and `ts` (Redis `TIME`) are stamped atomically on the
///   server, so any number of concurrent appenders succeed (ADR 0020).
/// * Claims are WATCH/MULTI/EXEC transactions on connections of their own (an `ExclusivePool`),
///   whose EXEC block re-verifies its precondition and carries an op receipt, so neither a
///   reconnect between WATCH and EXEC nor a re-sent EXEC can apply a write twice or unguarded
///   (ADR 0022).
/// * A per-log SET of open runs bounds a claim by the open runs, not the history (ADR 0021).
pub struct RedisEventStore {
    pool: Pool,
    claims: ExclusivePool,
    keys: KeySpace,
    script: Script,
    clock: Option<Arc<dyn Clock>>,
    max_rounds: u32,
    max_backoff: Duration,
    op_ttl: String,
    before_exec: Option<BeforeExecHook>,
}

impl fmt::Debug for RedisEventStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisEventStore")
            .field("prefix", &self.keys.prefix())
            .field("pool", &self.pool.size())
            .field("claim_connections", &self.claims.size())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// One event of a batch, ready for the script: its lifecycle flag and its JSON around seq and ts.
struct Template {
    flag: &'static str,
    p1: String,
    p2: String,
    p3: String,
    payload: Payload,
}

/// What the append script reported.
enum Outcome {
    Written { first_seq: u64, ts: String },
    GuardFailed,
}

fn backend(op: &'static str, key: &str, e: fred::error::Error) -> Error {
    use fred::error::ErrorKind as K;
    match e.kind() {
        K::IO | K::Timeout | K::Canceled | K::Backpressure | K::Routing | K::Cluster => {
            Error::unavailable(op, key, e)
        }
        K::Auth | K::Config | K::Url | K::Tls => Error::config("redis", e.details()),
        // fred reports both Redis error replies and its own connection-state failures
        // ("Failed to route command.", "Max attempts exceeded") as Unknown. A Redis reply starts
        // with an upper-case code; of those, only server states that pass are transient.
        K::Unknown if !is_permanent_reply(e.details()) => Error::unavailable(op, key, e),
        _ => Error::Rejected {
            op,
            key: key.to_string(),
            message: e.details().to_string(),
        },
    }
}

fn is_permanent_reply(details: &str) -> bool {
    let code = details.split_whitespace().next().unwrap_or_default();
    let is_code = code.len() > 1 && code.bytes().all(|b| b.is_ascii_uppercase());
    is_code
        && !matches!(
            code,
            "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "OOM" | "READONLY"
        )
}

fn corrupt_at(key: &str, index: impl fmt::Display, e: Error) -> Error {
    Error::corrupt(format!("{key}[{index}]"), e)
}

fn decode(key: &str, index: impl fmt::Display, text: &str) -> Result<Event> {
    Event::from_json(text).map_err(|e| corrupt_at(key, index, e))
}

fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn ts_of(text: &str) -> Result<DateTime<FixedOffset>> {
    parse_ts(text).map_err(|e| Error::corrupt("append script ts", e))
}

impl RedisEventStore {
    /// Connects with default options (prefix `agentdeck:events`, Redis `TIME` as the clock).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, RedisStoreOptions::default()).await
    }

    /// Connects with `options`. The URL takes `redis://` or `rediss://` (TLS), an optional
    /// `user:password@` (ACL) and an optional `/db` index.
    pub async fn connect_with(url: &str, options: RedisStoreOptions) -> Result<Self> {
        options.validate()?;
        let (config, perf, connection, policy, layout) = options.fred_parts(url)?;
        let mut builder = Builder::from_config(config);
        builder
            .set_performance_config(perf)
            .set_connection_config(connection)
            .set_policy(policy);
        let pool = builder
            .build_pool(options.pool_size)
            .map_err(|e| backend("connect", "pool", e))?;
        let claims = builder
            .build_exclusive_pool(options.claim_connections)
            .map_err(|e| backend("connect", "claims", e))?;
        pool.init()
            .await
            .map_err(|e| backend("connect", "pool", e))?;
        claims
            .init()
            .await
            .map_err(|e| backend("connect", "claims", e))?;
        let script = Script::from_lua(APPEND_LUA);
        script
            .load(pool.next())
            .await
            .map_err(|e| backend("connect", "SCRIPT LOAD", e))?;
        Ok(Self {
            pool,
            claims,
            keys: KeySpace::with_layout(options.prefix.clone(), layout),
            script,
            clock: options.clock.clone(),
            max_rounds: options.max_claim_rounds,
            max_backoff: options.max_backoff,
            op_ttl: options.op_receipt_ttl.as_secs().to_string(),
            before_exec: options.before_exec.clone(),
        })
    }

    /// The key space this store writes.
    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// Closes every connection.
    pub async fn close(&self) -> Result<()> {
        self.pool
            .quit()
            .await
            .map_err(|e| backend("close", "pool", e))?;
        self.claims
            .quit()
            .await
            .map_err(|e| backend("close", "claims", e))
    }

    /// The shared pool's next client, for crate-internal helpers (server checks).
    pub(crate) fn client(&self) -> &Client {
        self.pool.next()
    }

    fn templates(
        &self,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
    ) -> Result<Vec<Template>> {
        payloads
            .into_iter()
            .map(|payload| template(payload, ctx, origin))
            .collect()
    }

    /// The `ts` argument of the script: `''` for Redis `TIME`, else the injected clock's reading.
    fn ts_arg(&self) -> String {
        match &self.clock {
            Some(clock) => format_ts(&stamp(clock.now())),
            None => String::new(),
        }
    }

    /// The store's "now": Redis `TIME`, or the injected clock. On a cluster it is read from the
    /// node that owns `key`'s slot, the node whose `TIME` the append script stamps there.
    async fn now(
        &self,
        client: &Client,
        key: &str,
        op: &'static str,
    ) -> Result<DateTime<FixedOffset>> {
        if let Some(clock) = &self.clock {
            return Ok(stamp(clock.now()));
        }
        let slot = fred::util::redis_keyslot(key.as_bytes());
        let time: Vec<i64> = client
            .custom(
                CustomCommand::new_static("TIME", ClusterHash::Custom(slot), false),
                Vec::<String>::new(),
            )
            .await
            .map_err(|e| backend(op, "TIME", e))?;
        let (secs, micros) = match time.as_slice() {
            [s, us] => (*s, *us),
            _ => {
                return Err(Error::corrupt(
                    "TIME",
                    "reply is not [seconds, microseconds]",
                ));
            }
        };
        let now = Utc
            .timestamp_opt(
                secs,
                u32::try_from(micros.clamp(0, 999_999)).unwrap_or(0) * 1_000,
            )
            .single()
            .ok_or_else(|| Error::corrupt("TIME", "out of range"))?;
        Ok(stamp(now))
    }

    /// The script's arguments as fred values: built once per call, so a retry clones reference
    /// counts rather than strings.
    #[allow(clippy::too_many_arguments)]
    fn script_args(
        &self,
        rk: &RunKeys,
        run_id: &str,
        guard: (&'static str, i64, &str),
        adds: &[String],
        rems: &[String],
        new_mark: Option<i64>,
        batch: &[Template],
    ) -> Vec<Value> {
        let text = |s: &str| Value::from(s.to_string());
        let num = |n: usize| Value::from(n.to_string());
        let mut args = Vec::with_capacity(12 + adds.len() + rems.len() + batch.len() * 4);
        args.push(Value::from(self.ts_arg()));
        args.push(text(run_id));
        args.push(text(&rk.member));
        args.push(text(&self.op_ttl));
        args.push(Value::from_static_str(guard.0));
        args.push(Value::from(guard.1.to_string()));
        args.push(text(guard.2));
        args.push(num(adds.len()));
        args.extend(adds.iter().map(|a| text(a)));
        args.push(num(rems.len()));
        args.extend(rems.iter().map(|r| text(r)));
        args.push(Value::from(
            new_mark.map(|m| m.to_string()).unwrap_or_default(),
        ));
        args.push(num(batch.len()));
        for t in batch {
            args.push(Value::from_static_str(t.flag));
            args.push(text(&t.p1));
            args.push(text(&t.p2));
            args.push(text(&t.p3));
        }
        args
    }

    fn script_keys(&self, rk: &RunKeys, op: &str) -> Vec<Key> {
        [
            &rk.log,
            &rk.run,
            &rk.seq,
            &rk.life,
            &rk.logruns,
            &rk.runs,
            &rk.open,
            &rk.openlen,
        ]
        .into_iter()
        .map(|k| Key::from(k.as_str()))
        .chain(std::iter::once(Key::from(self.keys.op(&rk.ns, op))))
        .collect()
    }

    /// Decodes the script's reply.
    fn outcome(op: &'static str, rk: &RunKeys, keys: &[Key], reply: Value) -> Result<Outcome> {
        let items = match reply {
            Value::Array(items) => items,
            other => {
                return Err(Error::Rejected {
                    op,
                    key: rk.log.clone(),
                    message: format!("unexpected script reply {other:?}"),
                });
            }
        };
        match items.first().and_then(Value::as_i64) {
            Some(1) => {
                let first_seq = items
                    .get(1)
                    .and_then(Value::as_i64)
                    .and_then(|s| u64::try_from(s).ok())
                    .ok_or_else(|| Error::corrupt(rk.seq.clone(), "script returned no seq"))?;
                let ts = items
                    .get(2)
                    .and_then(Value::as_string)
                    .ok_or_else(|| Error::corrupt(rk.log.clone(), "script returned no ts"))?;
                Ok(Outcome::Written { first_seq, ts })
            }
            Some(0) => Ok(Outcome::GuardFailed),
            Some(-1) => {
                let index = items.get(1).and_then(Value::as_i64).unwrap_or(0);
                let key = usize::try_from(index - 1)
                    .ok()
                    .and_then(|i| keys.get(i))
                    .map_or_else(|| rk.log.clone(), |k| k.as_str_lossy().into_owned());
                let ty = items.get(2).and_then(Value::as_string).unwrap_or_default();
                Err(Error::Rejected {
                    op,
                    key,
                    message: format!(
                        "WRONGTYPE: the key holds a {ty}, not what this store writes; nothing was written"
                    ),
                })
            }
            _ => Err(Error::Rejected {
                op,
                key: rk.log.clone(),
                message: format!("unexpected script reply {items:?}"),
            }),
        }
    }

    fn events(
        batch: Vec<Template>,
        ctx: &RunContext,
        origin: &str,
        first_seq: u64,
        ts: &str,
    ) -> Result<Vec<Event>> {
        let ts = ts_of(ts)?;
        Ok(Event::stamp_batch(
            ctx,
            origin,
            first_seq,
            ts,
            batch.into_iter().map(|t| t.payload),
        ))
    }

    /// Appends under an explicit op token: calling twice with one token writes once and returns
    /// the same events. `append` uses a fresh token per call; tests use this to check the receipt.
    #[doc(hidden)]
    pub async fn append_with_op(
        &self,
        log_key: &str,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
        op: &str,
    ) -> Result<Vec<Event>> {
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        checks::payloads(&payloads)?;
        let batch = self.templates(payloads, ctx, origin)?;
        let rk = self
            .keys
            .for_run(ctx.namespace_key(), log_key, ctx.run_id());
        let keys = self.script_keys(&rk, op);
        // One array value: fred takes it as is (a Vec would be converted element by element on
        // every call), and a retry clones reference counts.
        let args =
            Value::Array(self.script_args(&rk, ctx.run_id(), ("", 0, ""), &[], &[], None, &batch));
        // The op receipt makes a retry of the same call harmless, so transient failures are
        // retried a few times before they reach the caller.
        let mut attempt = 0;
        let reply: Value = loop {
            attempt += 1;
            match self
                .script
                .evalsha_with_reload(self.pool.next(), keys.clone(), args.clone())
                .await
            {
                Ok(reply) => break reply,
                Err(e) => {
                    let err = backend("append", &rk.log, e);
                    if attempt >= 3 || !err.is_transient() {
                        return Err(err);
                    }
                    tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
                }
            }
        };
        match Self::outcome("append", &rk, &keys, reply)? {
            Outcome::Written { first_seq, ts } => Self::events(batch, ctx, origin, first_seq, &ts),
            Outcome::GuardFailed => Err(Error::Rejected {
                op: "append",
                key: rk.log.clone(),
                message: "unguarded append reported a guard failure".into(),
            }),
        }
    }

    async fn backoff(&self, round: u32) {
        let cap = Duration::from_millis(2u64 << round.min(10)).min(self.max_backoff);
        let jitter = rand::random_range(0..=cap.as_micros() as u64);
        tokio::time::sleep(Duration::from_micros(jitter)).await;
    }

    /// Reads the op receipt of an earlier round whose outcome is unknown.
    async fn receipt(
        &self,
        ns: &str,
        op: &str,
        opname: &'static str,
    ) -> Result<Option<(u64, String)>> {
        let key = self.keys.op(ns, op);
        let text: Option<String> = self
            .pool
            .next()
            .get(&key)
            .await
            .map_err(|e| backend(opname, &key, e))?;
        Ok(text.and_then(|t| {
            let (seq, ts) = t.split_once(' ')?;
            let ts = ts.split(' ').next()?.to_string();
            Some((seq.parse().ok()?, ts))
        }))
    }

    /// Runs one guarded MULTI { EVAL append.lua } EXEC on a watched connection.
    async fn exec_guarded(
        &self,
        conn: &mut Watched,
        keys: Vec<Key>,
        args: Vec<Value>,
        opname: &'static str,
        log_key: &str,
    ) -> std::result::Result<Option<Value>, Error> {
        if let Some(hook) = &self.before_exec {
            let id: i64 = conn
                .client()
                .client_id()
                .await
                .map_err(|e| backend(opname, log_key, e))?;
            hook(u64::try_from(id).unwrap_or(0)).await;
        }
        let trx = conn.client().multi();
        // fred has no Lua interface on a transaction; EVAL as a custom command (full source, so
        // a flushed script cache cannot fail inside MULTI with NOSCRIPT).
        let mut eval = Vec::with_capacity(2 + keys.len() + args.len());
        eval.push(Value::from_static_str(APPEND_LUA));
        eval.push(Value::from(keys.len().to_string()));
        eval.extend(keys.into_iter().map(Value::from));
        eval.extend(args);
        let queued: std::result::Result<(), _> = trx
            .custom(
                CustomCommand::new_static("EVAL", ClusterHash::Offset(2), false),
                eval,
            )
            .await;
        queued.map_err(|e| backend(opname, log_key, e))?;
        // An EXEC aborted by WATCH replies nil: decode into Value and treat Null as a conflict
        // (decoding into `()` would report it as success).
        let reply: Value = trx
            .exec(true)
            .await
            .map_err(|e| backend(opname, log_key, e))?;
        // EXEC, aborted or not, clears every WATCH of the connection.
        conn.disarm();
        match reply {
            Value::Null => Ok(None),
            Value::Array(mut items) if items.len() == 1 => Ok(items.pop()),
            other => Err(Error::Rejected {
                op: opname,
                key: log_key.to_string(),
                message: format!("unexpected EXEC reply {other:?}"),
            }),
        }
    }

    async fn watch(&self, opname: &'static str, keys: Vec<String>) -> Result<Watched> {
        let guard = self.claims.acquire().await;
        let slot = keys
            .first()
            .map_or(0, |k| fred::util::redis_keyslot(k.as_bytes()));
        let conn = Watched {
            client: Some(guard),
            armed: true,
            slot,
        };
        conn.client()
            .watch(keys.clone())
            .await
            .map_err(|e| backend(opname, keys.first().map_or("", String::as_str), e))?;
        Ok(conn)
    }

    /// One claim_start round. `Ok(None)` = lost the race (WATCH abort or guard), retry.
    #[allow(clippy::too_many_arguments)]
    async fn claim_start_round(
        &self,
        log_key: &str,
        ctx: &RunContext,
        opening: &Template,
        stale_after: Duration,
        op: &str,
        overridden_out: &mut Vec<Event>,
    ) -> Result<Option<(SessionClaim, Option<(u64, String)>)>> {
        const OP: &str = "claim_start";
        let ns = ctx.namespace_key();
        let rk = self.keys.for_run(ns, log_key, ctx.run_id());
        let mut conn = self
            .watch(
                OP,
                vec![rk.log.clone(), rk.open.clone(), rk.openlen.clone()],
            )
            .await?;
        // The log LIST is the version of the whole log: every write to any key of it (ours or
        // the seed's) pushes to it, and nothing is ever removed.
        let (len, mark, open, run_len): (i64, Option<String>, Vec<String>, i64) = {
            let pipe = conn.client().pipeline();
            let _: () = pipe
                .llen(&rk.log)
                .await
                .map_err(|e| backend(OP, &rk.log, e))?;
            let _: () = pipe
                .get(&rk.openlen)
                .await
                .map_err(|e| backend(OP, &rk.openlen, e))?;
            let _: () = pipe
                .smembers(&rk.open)
                .await
                .map_err(|e| backend(OP, &rk.open, e))?;
            let _: () = pipe
                .llen(&rk.run)
                .await
                .map_err(|e| backend(OP, &rk.run, e))?;
            pipe.all().await.map_err(|e| backend(OP, &rk.log, e))?
        };
        // A run id with events in this log is taken (guarantee 16). Every write to the run also
        // pushes to the watched log LIST, so this answer holds until EXEC.
        if run_len > 0 {
            conn.release().await;
            return checks::run_is_new(true, ctx).map(|()| None);
        }
        let open: BTreeSet<String> = open.into_iter().collect();
        let (candidates, adds, mut rems) = self
            .reconcile(&conn, ns, log_key, &rk, len, mark.as_deref(), &open)
            .await?;

        // One round trip for every open run's latest lifecycle event and tail.
        let ids: Vec<&String> = candidates.iter().collect();
        let mut lifes = Vec::with_capacity(ids.len());
        let mut tails = Vec::with_capacity(ids.len());
        if !ids.is_empty() {
            let pipe = conn.client().pipeline();
            for id in &ids {
                let _: () = pipe
                    .get(self.keys.life(ns, log_key, id))
                    .await
                    .map_err(|e| backend(OP, &rk.log, e))?;
                let _: () = pipe
                    .lindex(self.keys.run(ns, log_key, id), -1)
                    .await
                    .map_err(|e| backend(OP, &rk.log, e))?;
            }
            let replies: Vec<Option<String>> =
                pipe.all().await.map_err(|e| backend(OP, &rk.log, e))?;
            for pair in replies.chunks(2) {
                lifes.push(pair.first().cloned().flatten());
                tails.push(pair.get(1).cloned().flatten());
            }
        }
        let now = self.now(conn.client(), &rk.log, OP).await?;
        let stale_before = checks::stale_before(now, stale_after);
        let mut overridden = Vec::new();
        for ((id, life), tail) in ids.iter().zip(lifes).zip(tails) {
            let status = self
                .run_life(conn.client(), ns, log_key, id, life, OP)
                .await?;
            if !status.is_some_and(RunStatus::is_open) {
                if open.contains(*id) {
                    rems.push((*id).clone());
                }
                continue;
            }
            let run_key = self.keys.run(ns, log_key, id);
            let tail = match tail {
                Some(text) => decode(&run_key, -1, &text)?,
                // An open run with an empty run LIST is damaged data; its lifecycle event is then
                // the latest thing known about it, so it still holds the session while fresh.
                None => {
                    let life_key = self.keys.life(ns, log_key, id);
                    let text: Option<String> = conn
                        .client()
                        .get(&life_key)
                        .await
                        .map_err(|e| backend(OP, &life_key, e))?;
                    match text {
                        Some(text) => decode(&life_key, "", &text)?,
                        None => continue,
                    }
                }
            };
            if tail.ts > stale_before {
                if mark.as_deref() != Some(len.to_string().as_str()) {
                    // Keep what reconciling learned, so refused claims behind a foreign writer
                    // do not rescan the same entries. Best effort: the guard drops it if the
                    // log moved, and a failure only means the next claim reconciles again.
                    let keys = self.script_keys(&rk, op);
                    let args = self.script_args(
                        &rk,
                        ctx.run_id(),
                        ("log", len, mark.as_deref().unwrap_or("")),
                        &adds,
                        &rems,
                        Some(len),
                        &[],
                    );
                    let _ = self.exec_guarded(&mut conn, keys, args, OP, &rk.log).await;
                }
                conn.release().await;
                let claim = SessionClaim {
                    held_by: Some((*id).clone()),
                    overridden: Vec::new(),
                };
                return Ok(Some((claim, None)));
            }
            overridden.push(tail);
        }
        let batch = std::slice::from_ref(opening);
        let keys = self.script_keys(&rk, op);
        let args = self.script_args(
            &rk,
            ctx.run_id(),
            ("log", len, mark.as_deref().unwrap_or("")),
            &adds,
            &rems,
            Some(len),
            batch,
        );
        *overridden_out = overridden.clone();
        let reply = self
            .exec_guarded(&mut conn, keys.clone(), args, OP, &rk.log)
            .await?;
        drop(conn);
        let Some(reply) = reply else {
            return Ok(None);
        };
        match Self::outcome(OP, &rk, &keys, reply)? {
            Outcome::Written { first_seq, ts } => Ok(Some((
                SessionClaim {
                    held_by: None,
                    overridden,
                },
                Some((first_seq, ts)),
            ))),
            Outcome::GuardFailed => Ok(None),
        }
    }

    /// Brings the open SET up to date with log entries written by a writer that does not keep it
    /// (the Python seed): returns the candidate open runs, runs to add and runs to remove.
    #[allow(clippy::too_many_arguments)]
    async fn reconcile(
        &self,
        conn: &Watched,
        ns: &str,
        log_key: &str,
        rk: &RunKeys,
        len: i64,
        mark: Option<&str>,
        open: &BTreeSet<String>,
    ) -> Result<(BTreeSet<String>, Vec<String>, Vec<String>)> {
        const OP: &str = "claim_start";
        let from = match mark.map(str::parse::<i64>) {
            None => 0,
            Some(Ok(m)) if (0..=len).contains(&m) => m,
            // An unreadable or impossible mark: rebuild from the start.
            Some(_) => 0,
        };
        if from == len && (mark.is_some() || len == 0) {
            return Ok((open.clone(), Vec::new(), Vec::new()));
        }
        let rows: Vec<String> = conn
            .client()
            .lrange(&rk.log, from, len - 1)
            .await
            .map_err(|e| backend(OP, &rk.log, e))?;
        let mut latest: BTreeMap<String, RunStatus> = BTreeMap::new();
        let mut readable = true;
        for row in &rows {
            match Event::from_json(row) {
                Ok(event) => {
                    if let Some(status) = lifecycle_status(event.kind()) {
                        latest.insert(event.run_id, status);
                    }
                }
                Err(_) => {
                    readable = false;
                    break;
                }
            }
        }
        if !readable {
            // A record that does not decode names no run; rebuild the open SET from the seed's
            // own index (every run with a lifecycle event, and its latest one) instead.
            tracing::warn!(log = %rk.log, "undecodable log entry; rebuilding the open-run index");
            latest.clear();
            let ids: Vec<String> = conn
                .client()
                .smembers(&rk.logruns)
                .await
                .map_err(|e| backend(OP, &rk.logruns, e))?;
            for id in ids {
                let life_key = self.keys.life(ns, log_key, &id);
                let text: Option<String> = conn
                    .client()
                    .get(&life_key)
                    .await
                    .map_err(|e| backend(OP, &life_key, e))?;
                if let Some(status) = self
                    .run_life(conn.client(), ns, log_key, &id, text, OP)
                    .await?
                {
                    latest.insert(id, status);
                }
            }
            let mut candidates = BTreeSet::new();
            let mut adds = Vec::new();
            let mut rems: Vec<String> = open.iter().cloned().collect();
            for (id, status) in latest {
                if status.is_open() {
                    rems.retain(|r| r != &id);
                    if !open.contains(&id) {
                        adds.push(id.clone());
                    }
                    candidates.insert(id);
                }
            }
            return Ok((candidates, adds, rems));
        }
        let mut candidates = open.clone();
        let mut adds = Vec::new();
        let mut rems = Vec::new();
        for (id, status) in latest {
            if status.is_open() {
                if !open.contains(&id) {
                    adds.push(id.clone());
                }
                candidates.insert(id);
            } else {
                if open.contains(&id) {
                    rems.push(id.clone());
                }
                candidates.remove(&id);
            }
        }
        Ok((candidates, adds, rems))
    }

    /// The status of a run from its `life` value; a missing or undecodable `life` key is
    /// recovered by folding the run's own LIST (documented in ADR 0021). `None` = pending.
    async fn run_life(
        &self,
        client: &Client,
        ns: &str,
        log_key: &str,
        run_id: &str,
        life: Option<String>,
        op: &'static str,
    ) -> Result<Option<RunStatus>> {
        if let Some(text) = &life
            && let Ok(event) = Event::from_json(text)
            && let Some(status) = lifecycle_status(event.kind())
        {
            return Ok(Some(status));
        }
        let run_key = self.keys.run(ns, log_key, run_id);
        if life.is_some() {
            tracing::warn!(run = %run_key, "lifecycle key unreadable; folding the run list");
        }
        let rows: Vec<String> = client
            .lrange(&run_key, 0, -1)
            .await
            .map_err(|e| backend(op, &run_key, e))?;
        let mut status = None;
        for (i, row) in rows.iter().enumerate() {
            let event = decode(&run_key, i, row)?;
            if let Some(s) = lifecycle_status(event.kind()) {
                status = Some(s);
            }
        }
        Ok(status)
    }

    async fn claim_resume_round(
        &self,
        log_key: &str,
        ctx: &RunContext,
        resumed: &Template,
        op: &str,
    ) -> Result<Option<Option<(u64, String)>>> {
        const OP: &str = "claim_resume";
        let ns = ctx.namespace_key();
        let rk = self.keys.for_run(ns, log_key, ctx.run_id());
        let mut conn = self
            .watch(OP, vec![rk.run.clone(), rk.life.clone()])
            .await?;
        let (len, life): (i64, Option<String>) = {
            let pipe = conn.client().pipeline();
            let _: () = pipe
                .llen(&rk.run)
                .await
                .map_err(|e| backend(OP, &rk.run, e))?;
            let _: () = pipe
                .get(&rk.life)
                .await
                .map_err(|e| backend(OP, &rk.life, e))?;
            pipe.all().await.map_err(|e| backend(OP, &rk.run, e))?
        };
        let status = if life.is_none() && len == 0 {
            None
        } else {
            self.run_life(conn.client(), ns, log_key, ctx.run_id(), life, OP)
                .await?
        };
        if !status.is_some_and(can_resume) {
            conn.release().await;
            return Ok(Some(None));
        }
        let keys = self.script_keys(&rk, op);
        let args = self.script_args(
            &rk,
            ctx.run_id(),
            ("run", len, ""),
            &[],
            &[],
            None,
            std::slice::from_ref(resumed),
        );
        let reply = self
            .exec_guarded(&mut conn, keys.clone(), args, OP, &rk.log)
            .await?;
        drop(conn);
        let Some(reply) = reply else {
            return Ok(None);
        };
        match Self::outcome(OP, &rk, &keys, reply)? {
            Outcome::Written { first_seq, ts } => Ok(Some(Some((first_seq, ts)))),
            Outcome::GuardFailed => Ok(None),
        }
    }
}

/// A claim connection with a WATCH that may still be armed. Dropping it while armed (an error
/// path, or the claim future cancelled) sends UNWATCH before the connection goes back to the pool,
/// so no later transaction inherits a stale WATCH.
struct Watched {
    client: Option<OwnedMutexGuard<Client>>,
    armed: bool,
    /// The slot of the watched keys. On a cluster the WATCH lives on the connection to that
    /// slot's node, and a plain UNWATCH would go to a random node (anchors §2.2.7).
    slot: u16,
}

/// `UNWATCH` on the connection that holds the WATCH of `slot`.
async fn unwatch(client: &Client, slot: u16) {
    let options = Options {
        cluster_hash: Some(ClusterHash::Custom(slot)),
        ..Options::default()
    };
    // A failed UNWATCH means the connection is gone, and the WATCH with it.
    let _ = client.with_options(&options).unwatch().await;
}

impl Watched {
    fn client(&self) -> &Client {
        // Only `release` and `drop` take the guard, and both consume or end the value.
        self.client
            .as_deref()
            .unwrap_or_else(|| unreachable!("claim connection used after release"))
    }

    fn disarm(&mut self) {
        self.armed = false;
    }

    /// UNWATCH now (a refusal needs no EXEC).
    async fn release(&mut self) {
        if let Some(client) = self.client.as_deref()
            && self.armed
        {
            unwatch(client, self.slot).await;
            self.armed = false;
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let (Some(client), Ok(rt)) = (self.client.take(), tokio::runtime::Handle::try_current())
        {
            let slot = self.slot;
            // The guard moves into the task: the connection returns to the pool only after UNWATCH.
            rt.spawn(async move {
                unwatch(&client, slot).await;
                drop(client);
            });
        }
    }
}

fn template(payload: Payload, ctx: &RunContext, origin: &str) -> Result<Template> {
    const SEQ_MARK: u64 = u64::MAX;
    const SEQ_PAT: &str = ",\"seq\":18446744073709551615,";
    const TS_PAT: &str = ",\"ts\":\"1970-01-01T00:00:00Z\",\"payload\":";
    let flag = match lifecycle_status(payload.kind()) {
        None => "0",
        Some(s) if s.is_open() => "1",
        Some(_) => "2",
    };
    let event = Event {
        v: SchemaVersion::CURRENT,
        seq: SEQ_MARK,
        run_id: ctx.run_id().to_string(),
        session_id: ctx.session_id().map(str::to_string),
        namespace: ctx.namespace().map(str::to_string),
        origin: origin.to_string(),
        ts: DateTime::<Utc>::UNIX_EPOCH.fixed_offset(),
        payload,
    };
    let json = event.to_json();
    // Inside JSON strings every `"` is escaped, so these envelope patterns can only match the
    // envelope's own fields, which precede the payload.
    let split = || -> Option<(String, String, String)> {
        let i = json.find(SEQ_PAT)?;
        let p1 = &json[..i + 7];
        let rest = &json[i + SEQ_PAT.len() - 1..];
        let j = rest.find(TS_PAT)?;
        let p2 = &rest[..j + 7];
        let p3 = &rest[j + 7 + "1970-01-01T00:00:00Z".len()..];
        Some((p1.to_string(), p2.to_string(), p3.to_string()))
    };
    let (p1, p2, p3) = split().ok_or_else(|| Error::Rejected {
        op: "append",
        key: ctx.run_id().to_string(),
        message: "event JSON has an unexpected envelope shape".into(),
    })?;
    Ok(Template {
        flag,
        p1,
        p2,
        p3,
        payload: event.payload,
    })
}

#[async_trait]
impl EventStore for RedisEventStore {
    async fn append(
        &self,
        log_key: &str,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
    ) -> Result<Vec<Event>> {
        self.append_with_op(log_key, payloads, ctx, origin, &new_token())
            .await
    }

    async fn read(
        &self,
        log_key: &str,
        ctx: &RunContext,
        offset: i64,
        limit: Option<i64>,
    ) -> Result<Vec<Event>> {
        let (offset, limit) = checks::page(offset, limit)?;
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let key = self.keys.log(ctx.namespace_key(), log_key);
        let start = i64::try_from(offset).unwrap_or(i64::MAX);
        let end = match limit {
            None => -1,
            Some(l) => start.saturating_add(i64::try_from(l).unwrap_or(i64::MAX)) - 1,
        };
        let rows: Vec<String> = self
            .pool
            .next()
            .lrange(&key, start, end)
            .await
            .map_err(|e| backend("read", &key, e))?;
        rows.iter()
            .enumerate()
            .map(|(i, row)| decode(&key, start.saturating_add(i as i64), row))
            .collect()
    }

    async fn read_run(
        &self,
        log_key: &str,
        run_id: &str,
        ctx: &RunContext,
        from_seq: u64,
    ) -> Result<Vec<Event>> {
        let key = self.keys.run(ctx.namespace_key(), log_key, run_id);
        let Ok(start) = i64::try_from(from_seq) else {
            return Ok(Vec::new());
        };
        let client = self.pool.next();
        // A run LIST is dense in seq order (index i holds seq i), so the server serves the slice.
        let rows: Vec<String> = client
            .lrange(&key, start, -1)
            .await
            .map_err(|e| backend("read_run", &key, e))?;
        let events = rows
            .iter()
            .enumerate()
            .map(|(i, row)| decode(&key, start.saturating_add(i as i64), row))
            .collect::<Result<Vec<_>>>()?;
        let dense = match events.first() {
            Some(first) => first.seq == from_seq,
            None if from_seq == 0 => true,
            None => {
                let last: Option<String> = client
                    .lindex(&key, -1)
                    .await
                    .map_err(|e| backend("read_run", &key, e))?;
                match last {
                    None => true,
                    Some(text) => decode(&key, -1, &text)?.seq < from_seq,
                }
            }
        };
        if dense {
            return Ok(events);
        }
        // Not written by a seq-stamping writer: read it all and filter, as the seed does.
        let rows: Vec<String> = client
            .lrange(&key, 0, -1)
            .await
            .map_err(|e| backend("read_run", &key, e))?;
        let mut out = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let event = decode(&key, i, row)?;
            if event.seq >= from_seq {
                out.push(event);
            }
        }
        Ok(out)
    }

    async fn claim_start(
        &self,
        log_key: &str,
        opening: RunStarted,
        ctx: &RunContext,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        let opening = Payload::RunStarted(opening);
        checks::payloads(std::slice::from_ref(&opening))?;
        let template = template(opening, ctx, origin)?;
        let op = new_token();
        let mut unknown = false;
        let mut overridden = Vec::new();
        let mut last_error = None;
        for round in 0..self.max_rounds {
            if unknown
                && let Some((seq, ts)) = self
                    .receipt(ctx.namespace_key(), &op, "claim_start")
                    .await?
            {
                let event = Self::events(vec![template], ctx, origin, seq, &ts)?.pop();
                let claim = SessionClaim {
                    held_by: None,
                    overridden,
                };
                return Ok((claim, event));
            }
            match self
                .claim_start_round(log_key, ctx, &template, stale_after, &op, &mut overridden)
                .await
            {
                Ok(Some((claim, None))) => return Ok((claim, None)),
                Ok(Some((claim, Some((seq, ts))))) => {
                    let event = Self::events(vec![template], ctx, origin, seq, &ts)?.pop();
                    return Ok((claim, event));
                }
                Ok(None) => {}
                Err(e) if e.is_transient() => {
                    // The EXEC may or may not have applied: the next round reads the receipt first.
                    unknown = true;
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
            self.backoff(round).await;
        }
        if let Some(e) = last_error {
            return Err(e);
        }
        Err(Error::Contended {
            op: "claim_start",
            key: self.keys.log(ctx.namespace_key(), log_key),
            attempts: self.max_rounds,
        })
    }

    async fn claim_resume(
        &self,
        log_key: &str,
        run_id: &str,
        resumed: RunResumed,
        ctx: &RunContext,
        origin: &str,
    ) -> Result<Option<Event>> {
        checks::resume_target(run_id, ctx)?;
        let resumed = Payload::RunResumed(resumed);
        checks::payloads(std::slice::from_ref(&resumed))?;
        let template = template(resumed, ctx, origin)?;
        let op = new_token();
        let mut unknown = false;
        let mut last_error = None;
        for round in 0..self.max_rounds {
            if unknown
                && let Some((seq, ts)) = self
                    .receipt(ctx.namespace_key(), &op, "claim_resume")
                    .await?
            {
                return Ok(Self::events(vec![template], ctx, origin, seq, &ts)?.pop());
            }
            match self.claim_resume_round(log_key, ctx, &template, &op).await {
                Ok(Some(None)) => return Ok(None),
                Ok(Some(Some((seq, ts)))) => {
                    return Ok(Self::events(vec![template], ctx, origin, seq, &ts)?.pop());
                }
                Ok(None) => {}
                Err(e) if e.is_transient() => {
                    unknown = true;
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
            self.backoff(round).await;
        }
        if let Some(e) = last_error {
            return Err(e);
        }
        Err(Error::Contended {
            op: "claim_resume",
            key: self.keys.run(ctx.namespace_key(), log_key, run_id),
            attempts: self.max_rounds,
        })
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        let ns = ctx.namespace_key();
        let runs_key = self.keys.runs(ns);
        let client = self.pool.next();
        let mut members: Vec<String> = client
            .smembers(&runs_key)
            .await
            .map_err(|e| backend("list_runs", &runs_key, e))?;
        members.sort();
        let mut runs = Vec::with_capacity(members.len());
        for member in &members {
            let (log, run) = split_member(member).ok_or_else(|| {
                Error::corrupt(
                    format!("{runs_key}[{member}]"),
                    "member is not \"{esc(log)}:{esc(run)}\"",
                )
            })?;
            runs.push((log, run));
        }
        let lifes: Vec<Option<String>> = if runs.is_empty() {
            Vec::new()
        } else {
            let pipe = client.pipeline();
            for (log, run) in &runs {
                let _: () = pipe
                    .get(self.keys.life(ns, log, run))
                    .await
                    .map_err(|e| backend("list_runs", &runs_key, e))?;
            }
            pipe.all()
                .await
                .map_err(|e| backend("list_runs", &runs_key, e))?
        };
        let mut out = Vec::new();
        for ((log, run), life) in runs.into_iter().zip(lifes) {
            let folded = self
                .run_life(client, ns, &log, &run, life, "list_runs")
                .await?;
            if let Some(folded) = folded
                && status.is_none_or(|s| s == folded)
            {
                out.push(RunSummary {
                    log_key: log,
                    run_id: run,
                    status: folded,
                });
            }
        }
        Ok(out)
    }

    async fn run_status(&self, log_key: &str, run_id: &str, ctx: &RunContext) -> Result<RunStatus> {
        let ns = ctx.namespace_key();
        let life_key = self.keys.life(ns, log_key, run_id);
        let client = self.pool.next();
        let life: Option<String> = client
            .get(&life_key)
            .await
            .map_err(|e| backend("run_status", &life_key, e))?;
        Ok(self
            .run_life(client, ns, log_key, run_id, life, "run_status")
            .await?
            .unwrap_or(RunStatus::Pending))
    }
}

#[cfg(test)]
mod tests {
    use super::is_permanent_reply;

    #[test]
    fn client_side_failures_are_transient_and_error_replies_are_not() {
        assert!(!is_permanent_reply("Failed to route command."));
        assert!(!is_permanent_reply("Max attempts exceeded"));
        assert!(!is_permanent_reply(
            "LOADING Redis is loading the dataset in memory"
        ));
        assert!(!is_permanent_reply(
            "OOM command not allowed when used memory > 'maxmemory'."
        ));
        assert!(is_permanent_reply("ERR wrong number of arguments"));
        assert!(is_permanent_reply("NOPERM this user has no permissions"));
    }
}
