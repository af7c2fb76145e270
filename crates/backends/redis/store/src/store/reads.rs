//! Reads: the log and run LISTs served by Redis (ADR 0024), runs listed from the namespace's SET
//! and statuses folded from the `life` keys.

use std::fmt;
use std::num::NonZeroU64;

use fred::prelude::*;
use switchyard_core::context::{RunContext, RunSummary};
use switchyard_core::event::Event;
use switchyard_core::status::{RunStatus, lifecycle_status};
use switchyard_core::{Error, Result};
use switchyard_redis_support::classify;

use super::RedisEventStore;
use crate::keys::split_member;

pub(super) fn corrupt_at(key: &str, index: impl fmt::Display, e: Error) -> Error {
    Error::corrupt(format!("{key}[{index}]"), e)
}

pub(super) fn decode(key: &str, index: impl fmt::Display, text: &str) -> Result<Event> {
    Event::from_json(text).map_err(|e| corrupt_at(key, index, e))
}

impl RedisEventStore {
    /// The status of a run from its `life` value; a missing or undecodable `life` key is
    /// recovered by folding the run's own LIST (documented in ADR 0021). `None` = pending.
    pub(super) async fn run_life(
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
            .map_err(|e| classify(op, &run_key, e))?;
        let mut status = None;
        for (i, row) in rows.iter().enumerate() {
            let event = decode(&run_key, i, row)?;
            if let Some(s) = lifecycle_status(event.kind()) {
                status = Some(s);
            }
        }
        Ok(status)
    }

    pub(super) async fn read_log(
        &self,
        log_key: &str,
        ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<Event>> {
        let key = self.keys.log(ctx.namespace_key(), log_key);
        let start = i64::try_from(offset).unwrap_or(i64::MAX);
        let end = match limit {
            None => -1,
            Some(l) => start.saturating_add(i64::try_from(l.get()).unwrap_or(i64::MAX)) - 1,
        };
        let rows: Vec<String> = self
            .pool
            .next()
            .lrange(&key, start, end)
            .await
            .map_err(|e| classify("read", &key, e))?;
        rows.iter()
            .enumerate()
            .map(|(i, row)| decode(&key, start.saturating_add(i as i64), row))
            .collect()
    }

    pub(super) async fn read_run_list(
        &self,
        log_key: &str,
        run_id: &str,
        ctx: &RunContext,
        from_seq: u64,
    ) -> Result<Vec<Event>> {
        let key = self.keys.run(ctx.namespace_key(), log_key, run_id);
        // The front hands on no `from_seq` past `i64::MAX` (ADR 0371).
        let start = i64::try_from(from_seq).unwrap_or(i64::MAX);
        let client = self.pool.next();
        // A run LIST is dense in seq order (index i holds seq i), so the server serves the slice.
        let rows: Vec<String> = client
            .lrange(&key, start, -1)
            .await
            .map_err(|e| classify("read_run", &key, e))?;
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
                    .map_err(|e| classify("read_run", &key, e))?;
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
            .map_err(|e| classify("read_run", &key, e))?;
        let mut out = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let event = decode(&key, i, row)?;
            if event.seq >= from_seq {
                out.push(event);
            }
        }
        Ok(out)
    }

    pub(super) async fn list_runs_in(
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
            .map_err(|e| classify("list_runs", &runs_key, e))?;
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
                    .map_err(|e| classify("list_runs", &runs_key, e))?;
            }
            pipe.all()
                .await
                .map_err(|e| classify("list_runs", &runs_key, e))?
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

    pub(super) async fn status_of_run(
        &self,
        log_key: &str,
        run_id: &str,
        ctx: &RunContext,
    ) -> Result<RunStatus> {
        let ns = ctx.namespace_key();
        let life_key = self.keys.life(ns, log_key, run_id);
        let client = self.pool.next();
        let life: Option<String> = client
            .get(&life_key)
            .await
            .map_err(|e| classify("run_status", &life_key, e))?;
        Ok(self
            .run_life(client, ns, log_key, run_id, life, "run_status")
            .await?
            .unwrap_or(RunStatus::Pending))
    }
}
