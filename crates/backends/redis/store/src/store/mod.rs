//! `RedisEventStore`, by area: [`append`] (the append script) with [`group`] (concurrent appends
//! in one script call), [`claims`] (WATCH/MULTI/EXEC
//! rounds) with [`watch`] (the claim connections) and [`open_runs`] (the open-run index),
//! [`reads`], and [`line`] (the lines of waiting runs, ADR 0394).

mod append;
mod claims;
mod group;
mod line;
mod open_runs;
mod reads;
mod watch;

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fred::clients::ExclusivePool;
use fred::prelude::*;
use switchyard_core::context::{RunContext, RunSummary, SessionClaim};
use switchyard_core::event::{Event, Payload};
use switchyard_core::status::RunStatus;
use switchyard_core::store::QueuedRun;
use switchyard_core::store::adapter::{Call, EventStoreOps};
use switchyard_core::{Appended, Clock, Result};
use switchyard_redis_support::connect::build_error;
use switchyard_redis_support::{Circuit, LuaScript, classify};

use crate::config::{BeforeExecHook, RedisStoreOptions};
use crate::keys::KeySpace;

/// The append script: its header, then append_lib.lua's helpers, then its body.
fn append_script() -> LuaScript {
    LuaScript::composed(
        "append.lua",
        include_str!("../append.lua"),
        &[include_str!("../append_lib.lua")],
    )
}

/// An [`EventStore`](switchyard_core::EventStore) on Redis, sharing the seed's key layout and event JSON.
///
/// * Appends are one Lua script each: seq and `ts` (Redis `TIME`) are stamped atomically on the
///   server, so any number of concurrent appenders succeed (ADR 0020). `append_if_open` is the
///   same script, which first reads the run's status from the seed's `life` key (ADR 0365).
///   Concurrent appends without a lifecycle event share one script call (ADR 0385).
/// * Claims are WATCH/MULTI/EXEC transactions on connections of their own (an `ExclusivePool`),
///   whose EXEC block re-verifies its precondition and carries an op receipt, so neither a
///   reconnect between WATCH and EXEC nor a re-sent EXEC can apply a write twice or unguarded
///   (ADR 0022).
/// * A per-log SET of open runs bounds a claim by the open runs, not the history (ADR 0021).
/// * Runs waiting for a session wait in a LIST beside the log, never in it; a push is one script
///   (ADR 0394).
pub struct RedisEventStore {
    pool: Pool,
    claims: ExclusivePool,
    // Whether Redis is known to be down: calls then fail at once instead of waiting in fred's
    // reconnect queue for the command timeout, round after round of a claim (ADR 0355).
    circuit: Circuit,
    keys: KeySpace,
    script: LuaScript,
    // The line's push and removal scripts (ADR 0394).
    line_push: LuaScript,
    line_remove: LuaScript,
    // The lanes of concurrent plain appends, one script call per group (ADR 0385).
    groups: Arc<group::Groups>,
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

fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
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
        let (url, policy, layout) = options.connection_parts(url)?;
        let builder = policy.builder(&url);
        let pool = builder
            .build_pool(options.pool_size)
            .map_err(|e| build_error("url", &url, &e))?;
        let claims = builder
            .build_exclusive_pool(options.claim_connections)
            .map_err(|e| build_error("url", &url, &e))?;
        let circuit = Circuit::new(&url);
        for client in pool.clients() {
            circuit.watch(client);
        }
        for client in claims.clients() {
            circuit.watch(&*client.lock().await);
        }
        pool.init()
            .await
            .map_err(|e| classify("connect", "pool", e))?;
        claims
            .init()
            .await
            .map_err(|e| classify("connect", "claims", e))?;
        let script = append_script();
        script
            .load(pool.next())
            .await
            .map_err(|e| classify("connect", "SCRIPT LOAD", e))?;
        let grouped = group::group_script();
        grouped
            .load(pool.next())
            .await
            .map_err(|e| classify("connect", "SCRIPT LOAD", e))?;
        let line_push = line::push_script();
        let line_remove = line::remove_script();
        for script in [&line_push, &line_remove] {
            script
                .load(pool.next())
                .await
                .map_err(|e| classify("connect", "SCRIPT LOAD", e))?;
        }
        Ok(Self {
            groups: group::Groups::new(pool.clone(), grouped),
            pool,
            claims,
            circuit,
            keys: KeySpace::with_layout(options.prefix.clone(), layout),
            script,
            line_push,
            line_remove,
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
            .map_err(|e| classify("close", "pool", e))?;
        self.claims
            .quit()
            .await
            .map_err(|e| classify("close", "claims", e))
    }

    /// The shared pool's next client, for crate-internal helpers (server checks).
    pub(crate) fn client(&self) -> &Client {
        self.pool.next()
    }
}

// Each method is the call as it runs on Redis; the front runs it inside the circuit (`guard`).
#[async_trait]
impl EventStoreOps for RedisEventStore {
    async fn append(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Vec<Event>> {
        self.append_with_op(ctx.log_key(), payloads, ctx, origin, &new_token())
            .await
    }

    /// One `EVALSHA` of `append.lua` with guard `open`: the run's status (its `life` key, or
    /// the fold of its LIST) and the write in one script, one round trip (ADR 0365).
    async fn append_if_open(
        &self,
        ctx: &RunContext,
        payloads: Vec<Payload>,
        origin: &str,
    ) -> Result<Appended> {
        self.append_if_open_with_op(ctx.log_key(), payloads, ctx, origin, &new_token())
            .await
    }

    async fn read(
        &self,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>> {
        self.read_log(ctx.log_key(), ctx, offset, limit).await
    }

    async fn read_run(&self, ctx: &RunContext, from_seq: u64) -> Result<Vec<Event>> {
        self.read_run_list(ctx.log_key(), ctx.run_id(), ctx, from_seq)
            .await
    }

    async fn claim_start(
        &self,
        ctx: &RunContext,
        opening: Payload,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        self.start_claim(ctx.log_key(), opening, ctx, origin, stale_after)
            .await
    }

    async fn claim_resume(
        &self,
        ctx: &RunContext,
        resumed: Payload,
        origin: &str,
    ) -> Result<Option<Event>> {
        self.resume_claim(ctx.log_key(), ctx.run_id(), resumed, ctx, origin)
            .await
    }

    async fn list_runs(
        &self,
        ctx: &RunContext,
        status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        self.list_runs_in(ctx, status).await
    }

    async fn run_status(&self, ctx: &RunContext) -> Result<RunStatus> {
        self.status_of_run(ctx.log_key(), ctx.run_id(), ctx).await
    }

    /// One `EVALSHA` of `line_push.lua`: the membership check, the bound and the `RPUSH` in one
    /// step (ADR 0394).
    async fn line_push(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        self.push_to_line(ctx, entry).await
    }

    async fn line_read(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        self.read_line(ctx, limit).await
    }

    async fn line_remove(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        self.remove_from_line(ctx, run_id).await
    }

    /// Every call runs inside the circuit: it fails at once while Redis is known to be down,
    /// instead of waiting in fred's reconnect queue for the command timeout, and the circuit also
    /// ends a claim's retry rounds once Redis is known to be down (ADR 0355).
    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        key: &'a str,
        call: Call<'a, T>,
    ) -> Call<'a, T> {
        Box::pin(self.circuit.guard(op, key, call))
    }
}
