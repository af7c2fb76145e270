//! Appends that commit in groups on agentdeck's layout (ADR 0386).
//!
//! Every write of agentdeck's layout takes its log's advisory lock, so the appends of one log (the
//! runs of one session, the appenders of one run) take turns through a lock, a statement and a
//! commit each. Here concurrent appends of one log wait in the log's lane (core's [`lane`]) and go
//! to the server together: one call of the schema's `append_group` function takes the lock once,
//! runs each op as its own `append_events` or `append_if_open` call would, in arrival order, and
//! commits once. A lone append goes out at once, as a group of one. Each caller gets its own
//! op's reply; a failed call fails each of its ops, whose outcome is then unknown (the
//! transaction committed all of them or none).

use std::sync::Arc;

use sqlx::postgres::PgPool;
use switchyard_core::lane::{self, Joined, Lanes};
use switchyard_core::{Error, Result};

use switchyard_postgres_support::events::LogRef;

use crate::sql;
use crate::store::backend;

/// Ops in one group call at most.
const GROUP_OPS: usize = 128;
/// Events in one group call at most (a group always takes its first op, whatever its size).
const GROUP_EVENTS: usize = 2_000;

/// One append of a group: its log (the lane's), its run, whether it is conditional
/// (`append_if_open`), and its events' JSON around their seq and ts.
pub(crate) struct Op {
    pub(crate) lock_key: i64,
    pub(crate) namespace: String,
    pub(crate) log_key: String,
    pub(crate) run_id: String,
    pub(crate) guarded: bool,
    pub(crate) mid: String,
    pub(crate) heads: Vec<String>,
    pub(crate) tails: Vec<String>,
}

/// An op's reply, as `append_if_open`'s row: (first seq, ts text, status before).
pub(crate) type Row = (Option<i64>, Option<String>, Option<String>);

/// A row of `append_group`: the op's number (from 1), then its [`Row`].
type OpRow = (i32, Option<i64>, Option<String>, Option<String>);

/// The lanes of the store's logs, shared with the flights' tasks.
pub(crate) struct Groups {
    lanes: Lanes<Op, Row>,
    pool: PgPool,
}

impl Groups {
    pub(crate) fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(Groups {
            lanes: Lanes::new(),
            pool,
        })
    }

    /// Runs `op` in the next group of its log and returns its own row.
    pub(crate) async fn run(self: &Arc<Self>, op: Op) -> Result<Row> {
        // Neither part holds a NUL (the caller sends such appends alone), so the key is the log's.
        let key = format!("{}\0{}", op.namespace, op.log_key);
        let (reply, start) = match self.lanes.join(&key, op) {
            // An idle lane: the append goes out alone from this task (ADR 0398).
            Joined::Lead(op, lead) => {
                let outcome = self.call(vec![op]).await;
                let rest = lead.hand_over(GROUP_OPS, GROUP_EVENTS, |op: &Op| op.heads.len());
                if !rest.is_empty() {
                    let me = self.clone();
                    let flight = key.clone();
                    tokio::spawn(async move { me.fly(&flight, rest).await });
                }
                let (namespace, log_key) = key.split_once('\0').unwrap_or((&key, ""));
                return outcome?.pop().ok_or_else(|| {
                    Error::corrupt(
                        log_of(namespace, log_key).to_string(),
                        "append_group: no row for the op",
                    )
                });
            }
            Joined::Queued(reply, start) => (reply, start),
        };
        if start {
            let me = self.clone();
            let flight = key.clone();
            // A flight carries other callers' ops: it runs in its own task, so a caller that
            // stops waiting cannot cancel it.
            tokio::spawn(async move { me.fly(&flight, Vec::new()).await });
        }
        match reply.await {
            Ok(row) => row,
            Err(_) => {
                let (namespace, log_key) = key.split_once('\0').unwrap_or((&key, ""));
                Err(lane::dropped(
                    "append",
                    &log_of(namespace, log_key).to_string(),
                ))
            }
        }
    }

    async fn fly(&self, key: &str, first: Vec<(Op, lane::Reply<Row>)>) {
        lane::fly(
            &self.lanes,
            key,
            first,
            GROUP_OPS,
            GROUP_EVENTS,
            |op: &Op| op.heads.len(),
            |ops| self.call(ops),
        )
        .await;
    }

    /// One `append_group` call for `ops` (all of one log, at least one).
    async fn call(&self, ops: Vec<Op>) -> Result<Vec<Row>> {
        let count = ops.len();
        let Some(first) = ops.first() else {
            return Ok(Vec::new());
        };
        let (lock_key, namespace, log_key) = (
            first.lock_key,
            first.namespace.clone(),
            first.log_key.clone(),
        );
        let too_many = || Error::invalid("payloads", "too many events in one group of appends");
        let mut runs = Vec::with_capacity(count);
        let mut guarded = Vec::with_capacity(count);
        let mut mids = Vec::with_capacity(count);
        let mut starts = Vec::with_capacity(count);
        let mut counts = Vec::with_capacity(count);
        let mut heads = Vec::new();
        let mut tails = Vec::new();
        for op in ops {
            starts.push(i32::try_from(heads.len() + 1).map_err(|_| too_many())?);
            counts.push(i32::try_from(op.heads.len()).map_err(|_| too_many())?);
            runs.push(op.run_id);
            guarded.push(op.guarded);
            mids.push(op.mid);
            heads.extend(op.heads);
            tails.extend(op.tails);
        }
        let rows: Vec<OpRow> = sqlx::query_as(sql::agentdeck::APPEND_GROUP)
            .bind(lock_key)
            .bind(&namespace)
            .bind(&log_key)
            .bind(runs)
            .bind(guarded)
            .bind(mids)
            .bind(starts)
            .bind(counts)
            .bind(heads)
            .bind(tails)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend("append", log_of(&namespace, &log_key), e))?;
        let in_order =
            rows.len() == count && rows.iter().zip(1..).all(|((op, ..), want)| *op == want);
        if !in_order {
            return Err(Error::corrupt(
                log_of(&namespace, &log_key).to_string(),
                format!(
                    "the schema's append_group function answered {} rows for {count} appends: \
                     the schema holds another build's function; the outcome of these appends \
                     is unknown",
                    rows.len()
                ),
            ));
        }
        Ok(rows
            .into_iter()
            .map(|(_, first, ts, before)| (first, ts, before))
            .collect())
    }
}

/// The log of a group, named in errors as a lone append names it.
fn log_of<'a>(namespace: &'a str, log_key: &'a str) -> LogRef<'a> {
    LogRef { namespace, log_key }
}
