//! Lua scripts: every multi-step operation is one script, so it is atomic on the server and costs
//! one round trip. Time is always the server's (`TIME`), never the caller's (fleet flaw R3).
//!
//! Scripts run through `EVALSHA` and are loaded again on `NOSCRIPT` (after a restart or
//! `SCRIPT FLUSH`; on a cluster the load goes to every primary).
//!
//! Every key a script touches is passed in `KEYS`, all in one slot on the cluster layout. The
//! only keys built inside Lua are pool claim keys in the standalone mode of `pool_list` and
//! `pool_claim` (mode `''`), kept so a claim stays one round trip there; the cluster layout runs
//! the declared mode (`'d'`), whose claim keys come in `KEYS`.
//!
//! Each script is a file of `scripts/` whose header names its KEYS, ARGV and reply. A script runs
//! as `prelude.lua` + (queue scripts) `queue_locals.lua` or (`pool_size`, `pool_claim`)
//! `sync_index.lua` + its own file.

use fred::types::scripts::Script;

/// Helpers shared by every script.
const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// The scripts, compiled once per backend.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub push: Script,
    pub submit_once: Script,
    pub reserve: Script,
    pub ack: Script,
    pub nack: Script,
    pub extend: Script,
    pub fail: Script,
    pub dead: Script,
    pub dlq_pop: Script,
    pub sweep: Script,
    pub stats: Script,
    pub dlq_clear: Script,
    pub dlq_requeue: Script,
    pub pool_put: Script,
    pub pool_list: Script,
    pub pool_size: Script,
    pub pool_remove: Script,
    pub pool_release: Script,
    pub pool_claim: Script,
    pub lock_acquire: Script,
    pub lock_release: Script,
    pub lock_extend: Script,
    pub stream_push: Script,
    pub stream_trim: Script,
    pub worker_register: Script,
    pub worker_set_config: Script,
    pub worker_set_state: Script,
    pub worker_set_stats: Script,
    pub worker_stats_push: Script,
    pub worker_get: Script,
    pub worker_remove: Script,
}

fn script(body: &str) -> Script {
    Script::from_lua(format!("{PRELUDE}\n{body}"))
}

/// Queue KEYS, in this order, for every queue script (unused ones are harmless).
/// 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta, 7 scheduled,
/// 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 the call's op record (ADR 0140).
///
/// Scripts that change state take `ARGV[1]` = how long (ms) the op record lives. A call that
/// applied something records its reply under its op token; fred re-sends a command whose reply
/// a dropped connection lost, with the same token, and the re-send finds the record and answers
/// the first reply without applying anything again. A call that applied nothing records nothing
/// (its re-send applies nothing either, or applies what the first send did not).
const QUEUE_LOCALS: &str = include_str!("scripts/queue_locals.lua");

impl Scripts {
    pub fn new() -> Self {
        let q = |body: &str| script(&format!("{QUEUE_LOCALS}\n{body}"));
        Scripts {
            push: q(include_str!("scripts/queue_push.lua")),
            submit_once: q(include_str!("scripts/queue_submit_once.lua")),
            reserve: q(include_str!("scripts/queue_reserve.lua")),
            ack: q(include_str!("scripts/queue_ack.lua")),
            nack: q(include_str!("scripts/queue_nack.lua")),
            extend: q(include_str!("scripts/queue_extend.lua")),
            fail: q(include_str!("scripts/queue_fail.lua")),
            dead: q(include_str!("scripts/queue_dead.lua")),
            sweep: q(include_str!("scripts/queue_sweep.lua")),
            stats: q(include_str!("scripts/queue_stats.lua")),
            dlq_clear: q(include_str!("scripts/dlq_clear.lua")),
            dlq_pop: q(include_str!("scripts/dlq_pop.lua")),
            dlq_requeue: q(include_str!("scripts/dlq_requeue.lua")),
            pool_put: script(include_str!("scripts/pool_put.lua")),
            pool_list: script(include_str!("scripts/pool_list.lua")),
            pool_size: script(&format!(
                "{SYNC_INDEX}\n{}",
                include_str!("scripts/pool_size.lua")
            )),
            pool_remove: script(include_str!("scripts/pool_remove.lua")),
            pool_release: script(include_str!("scripts/pool_release.lua")),
            pool_claim: script(&format!(
                "{SYNC_INDEX}\n{}",
                include_str!("scripts/pool_claim.lua")
            )),
            lock_acquire: script(include_str!("scripts/lock_acquire.lua")),
            lock_release: script(include_str!("scripts/lock_release.lua")),
            lock_extend: script(include_str!("scripts/lock_extend.lua")),
            stream_push: script(include_str!("scripts/stream_push.lua")),
            stream_trim: script(include_str!("scripts/stream_trim.lua")),
            worker_register: script(include_str!("scripts/worker_register.lua")),
            worker_set_config: script(include_str!("scripts/worker_set_config.lua")),
            worker_set_state: script(include_str!("scripts/worker_set_state.lua")),
            worker_set_stats: script(include_str!("scripts/worker_set_stats.lua")),
            worker_stats_push: script(include_str!("scripts/worker_stats_push.lua")),
            worker_get: script(include_str!("scripts/worker_get.lua")),
            worker_remove: script(include_str!("scripts/worker_remove.lua")),
        }
    }
}

/// Rebuilds a pool's expiry index when it disagrees with the hash (items written by the seed,
/// which keeps no index). Cheap check on every call; the rebuild is O(n) only after drift.
const SYNC_INDEX: &str = include_str!("scripts/sync_index.lua");
