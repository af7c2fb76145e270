//! Appends that commit in groups (ADR 0385): concurrent plain appends (no lifecycle event; guard
//! none or `open`) wait in one lane per slot and go to Redis together, one `append_group.lua`
//! call for many, so the per-call cost of a script (its dispatch, its argument and reply
//! handling, the clock read, the client's round trip) is shared. A lone append goes out at once,
//! as a group of one; under load each call carries what arrived while the previous one was in
//! flight. Each op of a group is exactly the short path of its own `append.lua` call, on its
//! own keys with its own receipt, so what a caller observes is what it would observe alone: the
//! group only merges calls that were concurrent, whose relative order no caller can know.

use std::sync::Arc;

use fred::prelude::*;
use switchyard_core::lane::{self, Joined, Lanes};
use switchyard_core::{Error, Result};
use switchyard_redis_support::LuaScript;

/// Ops in one group call at most.
const GROUP_OPS: usize = 128;
/// Events in one group call at most (a group always takes its first op, whatever its size).
const GROUP_EVENTS: usize = 2_000;

/// One op of a group: its nine keys and its part of `ARGV` (ts, op_ttl, guard, n, events).
pub(super) struct Op {
    pub(super) keys: Vec<Key>,
    pub(super) args: Vec<Value>,
    pub(super) events: usize,
}

/// The lanes and what a flight needs, shared with the flights' tasks.
pub(super) struct Groups {
    lanes: Lanes<Op, Value>,
    pool: Pool,
    script: LuaScript,
}

/// The group script: its header, then append_lib.lua's helpers, then its body.
pub(super) fn group_script() -> LuaScript {
    LuaScript::composed(
        "append_group.lua",
        include_str!("../append_group.lua"),
        &[include_str!("../append_lib.lua")],
    )
}

impl Groups {
    pub(super) fn new(pool: Pool, script: LuaScript) -> Arc<Self> {
        Arc::new(Groups {
            lanes: Lanes::new(),
            pool,
            script,
        })
    }

    /// Runs `op` in the next group of `lane` and returns its own reply (as `append.lua` would
    /// give it). `opname` and `key` name the call in errors.
    pub(super) async fn run(
        self: &Arc<Self>,
        lane_key: &str,
        op: Op,
        opname: &'static str,
        key: &str,
    ) -> Result<Value> {
        let (reply, start) = match self.lanes.join(lane_key, op) {
            // An idle lane: the append goes out alone from this task (ADR 0398).
            Joined::Lead(op, lead) => {
                let outcome = self.call(vec![op]).await;
                let rest = lead.hand_over(GROUP_OPS, GROUP_EVENTS, |op: &Op| op.events);
                if !rest.is_empty() {
                    let me = self.clone();
                    let lane_key = lane_key.to_owned();
                    tokio::spawn(async move { me.fly(&lane_key, rest).await });
                }
                return outcome?
                    .pop()
                    .ok_or_else(|| Error::corrupt(key, "append_group.lua: no reply for the op"));
            }
            Joined::Queued(reply, start) => (reply, start),
        };
        if start {
            let me = self.clone();
            let lane_key = lane_key.to_owned();
            // A flight carries other callers' ops: it runs in its own task, so a caller that
            // stops waiting cannot cancel it.
            tokio::spawn(async move { me.fly(&lane_key, Vec::new()).await });
        }
        match reply.await {
            Ok(outcome) => outcome,
            Err(_) => Err(lane::dropped(opname, key)),
        }
    }

    async fn fly(&self, lane_key: &str, first: Vec<(Op, lane::Reply<Value>)>) {
        lane::fly(
            &self.lanes,
            lane_key,
            first,
            GROUP_OPS,
            GROUP_EVENTS,
            |op: &Op| op.events,
            |ops| self.call(ops),
        )
        .await;
    }

    /// One `append_group.lua` call for `ops`. Each op carries its own receipt, so a resent call
    /// answers the ops that were written from their receipts and writes the rest: it is retried
    /// as a lone append is.
    async fn call(&self, ops: Vec<Op>) -> Result<Vec<Value>> {
        let count = ops.len();
        let mut keys = Vec::with_capacity(9 * count);
        let mut args = Vec::with_capacity(1 + ops.iter().map(|o| o.args.len()).sum::<usize>());
        args.push(Value::from(count.to_string()));
        for op in ops {
            keys.extend(op.keys);
            args.extend(op.args);
        }
        let args = Value::Array(args);
        let reply = super::append::run_receipted(
            &self.script,
            &self.pool,
            keys,
            args,
            "append",
            "append group",
        )
        .await?;
        match reply {
            Value::Array(replies) if replies.len() == count => Ok(replies),
            other => Err(Error::Rejected {
                op: "append",
                key: "append group".into(),
                message: format!(
                    "the group script answered {other:?} for {count} appends: the server runs \
                     another build's script; the outcome of these appends is unknown"
                ),
            }),
        }
    }
}
