//! The per-log SET of open runs (ADR 0021), brought up to date with what a writer that does not
//! keep it (the Python seed) appended since the SET's mark.

use std::collections::{BTreeMap, BTreeSet};

use fred::prelude::*;
use switchyard_core::Result;
use switchyard_core::event::Event;
use switchyard_core::status::{RunStatus, lifecycle_status};
use switchyard_redis_support::classify;

use super::RedisEventStore;
use super::watch::Watched;
use crate::keys::RunKeys;

impl RedisEventStore {
    /// Brings the open SET up to date with log entries written by a writer that does not keep it
    /// (the Python seed): returns the candidate open runs, runs to add and runs to remove.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn reconcile(
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
            .map_err(|e| classify(OP, &rk.log, e))?;
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
                .map_err(|e| classify(OP, &rk.logruns, e))?;
            for id in ids {
                let life_key = self.keys.life(ns, log_key, &id);
                let text: Option<String> = conn
                    .client()
                    .get(&life_key)
                    .await
                    .map_err(|e| classify(OP, &life_key, e))?;
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
}
