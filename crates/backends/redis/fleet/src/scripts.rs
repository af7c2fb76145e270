//! Lua scripts: every multi-step operation is one script, so it is atomic on the server and costs
//! one round trip. Time is always the server's (`TIME`), never the caller's, whose
//! clock may disagree with other callers'.
//!
//! Scripts run through `LuaScript::run` of the Redis support crate. The queue's scripts are the
//! functions of one library (`FCALL`, ADR 0400), whose shared helpers a server defines once, at
//! load; the library is loaded again when a server lacks it (after a restart without
//! persistence or `FUNCTION FLUSH`; on a cluster the load goes to every primary). The other
//! scripts are scripts of their own: `EVALSHA`, loaded again on `NOSCRIPT`.
//!
//! Every key a script touches is passed in `KEYS`, all in one slot on the cluster layout. The
//! only keys built inside Lua are pool claim keys in the standalone mode of `pool_list` and
//! `pool_claim` (mode `''`), kept so a claim stays one round trip there; the cluster layout runs
//! the declared mode (`'d'`), whose claim keys come in `KEYS`.
//!
//! Each script is a file of `scripts/` whose header names its KEYS, ARGV and reply (ADR 0171).
//! The queue library is `prelude.lua`, `queue_locals.lua`, `task_records.lua`, `task_ends.lua`
//! and `queue_schedule.lua`, then one function per queue script whose body is the script's file
//! after its header. Any other script runs as its file's header, `prelude.lua`, then
//! (`pool_size`, `pool_claim`) `sync_index.lua`, then its file's body: the header first, so the
//! script a server or reader sees opens with what it takes and returns.

use std::sync::LazyLock;

use switchyard_redis_support::{LuaLibrary, LuaScript};

/// Helpers shared by every script.
const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// Queue KEYS, in this order, for every queue function (unused ones are harmless).
/// 1 high, 2 normal, 3 low, 4 processing, 5 processing:body, 6 processing:meta, 7 scheduled,
/// 8 scheduled:body, 9 attempts, 10 dead, 11 wake, 12 scheduled:own, 13 progress, 14 paused,
/// 15 rate, 16–27 the task keys of ADR 0380 (tasks, task:body, task:result, task:error,
/// task:progress, done:ok, done:bad, done:dead, task:live, events, ends, retention), 28 the
/// call's op record (ADR 0140). It also holds the op record's write, the wide writes of hashes
/// filled in batches (ADR 0335) and the end-event log's position.
///
/// Scripts that change state take `ARGV[1]` = how long (ms) the op record lives. A call that
/// applied something records its reply under its op token; fred re-sends a command whose reply
/// a dropped connection lost, with the same token, and the re-send finds the record and answers
/// the first reply without applying anything again. A call that applied nothing records nothing
/// (its re-send applies nothing either, or applies what the first send did not).
const QUEUE_LOCALS: &str = include_str!("scripts/queue_locals.lua");

/// The task record steps every function that reads or moves a recorded task shares (ADR 0380).
const TASK_RECORDS: &str = include_str!("scripts/task_records.lua");

/// The ending steps of recorded tasks (end events, finished buckets and their trims, dead
/// letters leaving), for the functions that end tasks (ADR 0380).
const TASK_ENDS: &str = include_str!("scripts/task_ends.lua");

/// The steps several queue functions share: scheduling a delayed task in the seed's form
/// (ADR 0286), moving due tasks (the reserve's and `queue_promote_due`'s one copy, ADR 0353),
/// and the token bucket (ADR 0285). Uses the record steps.
const QUEUE_SCHEDULE: &str = include_str!("scripts/queue_schedule.lua");

/// Rebuilds a pool's expiry index when it disagrees with the hash (items written by the seed,
/// which keeps no index). Cheap check on every call; the rebuild is O(n) only after drift.
const SYNC_INDEX: &str = include_str!("scripts/sync_index.lua");

/// The queue's scripts, each `(file, source)`: the functions of [`QUEUE_LIBRARY`].
const QUEUE_SCRIPTS: [(&str, &str); 25] = [
    ("queue_push.lua", include_str!("scripts/queue_push.lua")),
    ("queue_submit.lua", include_str!("scripts/queue_submit.lua")),
    ("queue_pause.lua", include_str!("scripts/queue_pause.lua")),
    (
        "queue_rate_limit.lua",
        include_str!("scripts/queue_rate_limit.lua"),
    ),
    (
        "queue_progress.lua",
        include_str!("scripts/queue_progress.lua"),
    ),
    (
        "queue_in_flight.lua",
        include_str!("scripts/queue_in_flight.lua"),
    ),
    (
        "queue_delivered.lua",
        include_str!("scripts/queue_delivered.lua"),
    ),
    (
        "dlq_requeue_chosen.lua",
        include_str!("scripts/dlq_requeue_chosen.lua"),
    ),
    (
        "queue_reserve.lua",
        include_str!("scripts/queue_reserve.lua"),
    ),
    ("queue_ack.lua", include_str!("scripts/queue_ack.lua")),
    ("queue_nack.lua", include_str!("scripts/queue_nack.lua")),
    ("queue_extend.lua", include_str!("scripts/queue_extend.lua")),
    ("queue_fail.lua", include_str!("scripts/queue_fail.lua")),
    ("queue_dead.lua", include_str!("scripts/queue_dead.lua")),
    ("queue_sweep.lua", include_str!("scripts/queue_sweep.lua")),
    (
        "queue_promote.lua",
        include_str!("scripts/queue_promote.lua"),
    ),
    ("queue_stats.lua", include_str!("scripts/queue_stats.lua")),
    ("dlq_clear.lua", include_str!("scripts/dlq_clear.lua")),
    ("dlq_pop.lua", include_str!("scripts/dlq_pop.lua")),
    ("dlq_requeue.lua", include_str!("scripts/dlq_requeue.lua")),
    ("task_get.lua", include_str!("scripts/task_get.lua")),
    ("task_cancel.lua", include_str!("scripts/task_cancel.lua")),
    ("queue_purge.lua", include_str!("scripts/queue_purge.lua")),
    (
        "task_maintain.lua",
        include_str!("scripts/task_maintain.lua"),
    ),
    ("task_events.lua", include_str!("scripts/task_events.lua")),
];

/// The queue library (ADR 0400): every queue script a function over the helpers of the queue
/// parts, which a server defines once, when it loads the library. As scripts of their own,
/// each call defined every helper of its parts again (a closure per function, ADR 0392), which
/// cost more server time than the work of a call that finds little to do.
static QUEUE_LIBRARY: LazyLock<LuaLibrary> = LazyLock::new(|| {
    LuaLibrary::new(
        "fleet_queue",
        &[
            PRELUDE,
            QUEUE_LOCALS,
            TASK_RECORDS,
            TASK_ENDS,
            QUEUE_SCHEDULE,
        ],
        &QUEUE_SCRIPTS,
    )
});

/// The scripts, composed once per process and shared by every backend.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub push: LuaScript,
    pub submit: LuaScript,
    pub pause: LuaScript,
    pub rate_limit: LuaScript,
    pub progress: LuaScript,
    pub in_flight: LuaScript,
    pub delivered: LuaScript,
    pub dlq_requeue_chosen: LuaScript,
    pub reserve: LuaScript,
    pub ack: LuaScript,
    pub nack: LuaScript,
    pub extend: LuaScript,
    pub fail: LuaScript,
    pub dead: LuaScript,
    pub dlq_pop: LuaScript,
    pub sweep: LuaScript,
    pub promote: LuaScript,
    pub stats: LuaScript,
    pub dlq_clear: LuaScript,
    pub dlq_requeue: LuaScript,
    pub task_get: LuaScript,
    pub task_cancel: LuaScript,
    pub purge: LuaScript,
    pub task_maintain: LuaScript,
    pub task_events: LuaScript,
    pub pool_put: LuaScript,
    pub pool_list: LuaScript,
    pub pool_size: LuaScript,
    pub pool_remove: LuaScript,
    pub pool_release: LuaScript,
    pub pool_claim: LuaScript,
    pub lock_acquire: LuaScript,
    pub lock_release: LuaScript,
    pub lock_extend: LuaScript,
    pub stream_push: LuaScript,
    pub stream_trim: LuaScript,
    pub worker_register: LuaScript,
    pub worker_set_config: LuaScript,
    pub worker_set_state: LuaScript,
    pub worker_set_stats: LuaScript,
    pub worker_stats_push: LuaScript,
    pub worker_get: LuaScript,
    pub worker_remove: LuaScript,
}

/// A [`LuaScript`] named `name`: `own`'s header, then `parts`, then `own`'s body (ADR 0162).
fn script(name: &'static str, own: &str, parts: &[&str]) -> LuaScript {
    LuaScript::composed(name, own, parts)
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let plain = |name, own| script(name, own, &[PRELUDE]);
    let q = |name| QUEUE_LIBRARY.script(name);
    let pool = |name, own| script(name, own, &[PRELUDE, SYNC_INDEX]);
    Scripts {
        push: q("queue_push.lua"),
        submit: q("queue_submit.lua"),
        pause: q("queue_pause.lua"),
        rate_limit: q("queue_rate_limit.lua"),
        progress: q("queue_progress.lua"),
        in_flight: q("queue_in_flight.lua"),
        delivered: q("queue_delivered.lua"),
        dlq_requeue_chosen: q("dlq_requeue_chosen.lua"),
        reserve: q("queue_reserve.lua"),
        ack: q("queue_ack.lua"),
        nack: q("queue_nack.lua"),
        extend: q("queue_extend.lua"),
        fail: q("queue_fail.lua"),
        dead: q("queue_dead.lua"),
        sweep: q("queue_sweep.lua"),
        promote: q("queue_promote.lua"),
        stats: q("queue_stats.lua"),
        dlq_clear: q("dlq_clear.lua"),
        dlq_pop: q("dlq_pop.lua"),
        dlq_requeue: q("dlq_requeue.lua"),
        task_get: q("task_get.lua"),
        task_cancel: q("task_cancel.lua"),
        purge: q("queue_purge.lua"),
        task_maintain: q("task_maintain.lua"),
        task_events: q("task_events.lua"),
        pool_put: plain("pool_put.lua", include_str!("scripts/pool_put.lua")),
        pool_list: plain("pool_list.lua", include_str!("scripts/pool_list.lua")),
        pool_size: pool("pool_size.lua", include_str!("scripts/pool_size.lua")),
        pool_remove: plain("pool_remove.lua", include_str!("scripts/pool_remove.lua")),
        pool_release: plain("pool_release.lua", include_str!("scripts/pool_release.lua")),
        pool_claim: pool("pool_claim.lua", include_str!("scripts/pool_claim.lua")),
        lock_acquire: plain("lock_acquire.lua", include_str!("scripts/lock_acquire.lua")),
        lock_release: plain("lock_release.lua", include_str!("scripts/lock_release.lua")),
        lock_extend: plain("lock_extend.lua", include_str!("scripts/lock_extend.lua")),
        stream_push: plain("stream_push.lua", include_str!("scripts/stream_push.lua")),
        stream_trim: plain("stream_trim.lua", include_str!("scripts/stream_trim.lua")),
        worker_register: plain(
            "worker_register.lua",
            include_str!("scripts/worker_register.lua"),
        ),
        worker_set_config: plain(
            "worker_set_config.lua",
            include_str!("scripts/worker_set_config.lua"),
        ),
        worker_set_state: plain(
            "worker_set_state.lua",
            include_str!("scripts/worker_set_state.lua"),
        ),
        worker_set_stats: plain(
            "worker_set_stats.lua",
            include_str!("scripts/worker_set_stats.lua"),
        ),
        worker_stats_push: plain(
            "worker_stats_push.lua",
            include_str!("scripts/worker_stats_push.lua"),
        ),
        worker_get: plain("worker_get.lua", include_str!("scripts/worker_get.lua")),
        worker_remove: plain(
            "worker_remove.lua",
            include_str!("scripts/worker_remove.lua"),
        ),
    }
});

/// The fleet's scripts (composed on first use).
pub(crate) fn scripts() -> &'static Scripts {
    &SCRIPTS
}

#[cfg(test)]
mod tests {
    use switchyard_redis_support::script::check_header;

    use super::*;

    #[test]
    fn every_script_header_is_its_files_own() {
        let s = scripts();
        for (script, own) in [
            (&s.push, include_str!("scripts/queue_push.lua")),
            (&s.pool_claim, include_str!("scripts/pool_claim.lua")),
            (&s.lock_acquire, include_str!("scripts/lock_acquire.lua")),
        ] {
            assert_eq!(
                check_header(script.source()),
                check_header(own),
                "{}",
                script.name()
            );
            assert_ne!(check_header(script.source()), check_header(PRELUDE));
        }
    }
}
