//! Claims: `claim_start` and `claim_resume` as WATCH/MULTI/EXEC rounds on connections of their
//! own (ADR 0022). Each round reads the open runs under WATCH, decides, and writes through
//! `append.lua` inside MULTI with a guard, so a round that lost a race writes nothing and the
//! next round starts over; after an EXEC whose outcome is unknown, the rounds read the claim's
//! op receipt with their reads (ADR 0351).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use fred::clients::Pipeline;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use switchyard_core::context::{RunContext, SessionClaim};
use switchyard_core::event::{Event, Payload, stamp};
use switchyard_core::status::{RunStatus, can_resume};
use switchyard_core::store::checks;
use switchyard_core::{Error, Result};
use switchyard_redis_support::classify;

use super::append::{Outcome, Template, template};
use super::reads::decode;
use super::{RedisEventStore, new_token};

impl RedisEventStore {
    /// Queues the store's "now" on `pipe`: Redis `TIME` unless a clock was injected. On a
    /// cluster it is read from the node that owns `key`'s slot, the node whose `TIME` the append
    /// script stamps there. Returns whether a reply was queued (see [`Self::now_from`]).
    async fn queue_now(
        &self,
        pipe: &Pipeline<Client>,
        key: &str,
        op: &'static str,
    ) -> Result<bool> {
        if self.clock.is_some() {
            return Ok(false);
        }
        let slot = fred::util::redis_keyslot(key.as_bytes());
        let queued: std::result::Result<(), _> = pipe
            .custom(
                CustomCommand::new_static("TIME", ClusterHash::Custom(slot), false),
                Vec::<String>::new(),
            )
            .await;
        queued.map_err(|e| classify(op, "TIME", e))?;
        Ok(true)
    }

    /// The store's "now" from the `TIME` reply [`Self::queue_now`] queued, or the injected clock.
    fn now_from(&self, time: Option<Value>) -> Result<DateTime<FixedOffset>> {
        if let Some(clock) = &self.clock {
            return Ok(stamp(clock.now()));
        }
        let time: Vec<i64> = time
            .ok_or_else(|| Error::corrupt("TIME", "no reply"))?
            .convert()
            .map_err(|e| Error::corrupt("TIME", e.details()))?;
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

    pub(super) async fn backoff(&self, round: u32) {
        let cap = Duration::from_millis(2u64 << round.min(10)).min(self.max_backoff);
        let jitter = rand::random_range(0..=cap.as_micros() as u64);
        tokio::time::sleep(Duration::from_micros(jitter)).await;
    }

    /// Runs a round's WATCH pipeline. After a round whose outcome is unknown (`receipt` names the
    /// claim's op receipt) it reads the receipt too, last: the script writes the receipt in the
    /// same step as the run, so if the reads saw that step, the receipt read sees it as well.
    /// Otherwise a re-sent or late EXEC of the earlier round applying between a separate receipt
    /// read and the round's reads would show the claim its own run as a rival's (ADR 0351).
    /// Returns the replies of the reads (the WATCH's first) and the receipt's `(seq, ts)`.
    async fn run_reads(
        pipe: Pipeline<Client>,
        receipt: Option<&str>,
        opname: &'static str,
        log_key: &str,
    ) -> Result<(Value, Option<(u64, String)>)> {
        if let Some(key) = receipt {
            let _: () = pipe.get(key).await.map_err(|e| classify(opname, key, e))?;
        }
        let mut replies: Vec<Value> = pipe.all().await.map_err(|e| classify(opname, log_key, e))?;
        let written = match receipt {
            None => None,
            Some(_) => replies
                .pop()
                .and_then(|v| v.convert::<Option<String>>().ok().flatten())
                .and_then(|text| {
                    let (seq, ts) = text.split_once(' ')?;
                    let ts = ts.split(' ').next()?.to_string();
                    Some((seq.parse().ok()?, ts))
                }),
        };
        Ok((Value::Array(replies), written))
    }

    /// One claim_start round. `Ok(None)` = lost the race (WATCH abort or guard), retry. After a
    /// round with an unknown outcome (`unknown`), a receipt of `op` answers as this round's write.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn claim_start_round(
        &self,
        log_key: &str,
        ctx: &RunContext,
        opening: &Template,
        stale_after: Duration,
        op: &str,
        unknown: bool,
        overridden_out: &mut Vec<Event>,
    ) -> Result<Option<(SessionClaim, Option<(u64, String)>)>> {
        const OP: &str = "claim_start";
        let ns = ctx.namespace_key();
        let rk = self.keys.for_run(ns, log_key, ctx.run_id());
        // WATCH and the reads in one round trip (ADR 0330). The log LIST is the version of the
        // whole log: every write to any key of it (ours or the seed's) pushes to it, and nothing
        // is ever removed.
        let mut conn = self.claim_connection(&rk.log).await;
        let (len, mark, open, run_len): (i64, Option<String>, Vec<String>, i64) = {
            let pipe = conn
                .watching(
                    OP,
                    vec![rk.log.clone(), rk.open.clone(), rk.openlen.clone()],
                )
                .await?;
            let _: () = pipe
                .llen(&rk.log)
                .await
                .map_err(|e| classify(OP, &rk.log, e))?;
            let _: () = pipe
                .get(&rk.openlen)
                .await
                .map_err(|e| classify(OP, &rk.openlen, e))?;
            let _: () = pipe
                .smembers(&rk.open)
                .await
                .map_err(|e| classify(OP, &rk.open, e))?;
            let _: () = pipe
                .llen(&rk.run)
                .await
                .map_err(|e| classify(OP, &rk.run, e))?;
            let receipt = unknown.then(|| self.keys.op(ns, op));
            let (replies, written) = Self::run_reads(pipe, receipt.as_deref(), OP, &rk.log).await?;
            if let Some(written) = written {
                conn.release().await;
                let claim = SessionClaim {
                    held_by: None,
                    overridden: overridden_out.clone(),
                };
                return Ok(Some((claim, Some(written))));
            }
            let ((), len, mark, open, run_len) =
                replies.convert().map_err(|e| classify(OP, &rk.log, e))?;
            (len, mark, open, run_len)
        };
        // A run id with events in this log is taken (guarantee `claim.run_ids_unique`). Every write
        // to the run also pushes to the watched log LIST, so this answer holds until EXEC.
        if run_len > 0 {
            conn.release().await;
            return checks::run_is_new(true, ctx).map(|()| None);
        }
        let open: BTreeSet<String> = open.into_iter().collect();
        let (candidates, adds, mut rems) = self
            .reconcile(&conn, ns, log_key, &rk, len, mark.as_deref(), &open)
            .await?;

        // One round trip for every open run's latest lifecycle event and tail, and the server's
        // "now" to judge them by. With no open run there is nothing to judge: no round trip.
        let ids: Vec<&String> = candidates.iter().collect();
        let mut lifes = Vec::with_capacity(ids.len());
        let mut tails = Vec::with_capacity(ids.len());
        let mut stale_before = None;
        if !ids.is_empty() {
            let pipe = conn.client().pipeline();
            for id in &ids {
                let _: () = pipe
                    .get(self.keys.life(ns, log_key, id))
                    .await
                    .map_err(|e| classify(OP, &rk.log, e))?;
                let _: () = pipe
                    .lindex(self.keys.run(ns, log_key, id), -1)
                    .await
                    .map_err(|e| classify(OP, &rk.log, e))?;
            }
            let timed = self.queue_now(&pipe, &rk.log, OP).await?;
            let mut replies: Vec<Value> = pipe.all().await.map_err(|e| classify(OP, &rk.log, e))?;
            let time = if timed { replies.pop() } else { None };
            stale_before = Some(checks::stale_before(self.now_from(time)?, stale_after));
            let text = |v: Option<&Value>| -> Result<Option<String>> {
                match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .clone()
                        .convert()
                        .map_err(|e| Error::corrupt(rk.log.clone(), e.details())),
                }
            };
            for pair in replies.chunks(2) {
                lifes.push(text(pair.first())?);
                tails.push(text(pair.get(1))?);
            }
        }
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
                        .map_err(|e| classify(OP, &life_key, e))?;
                    match text {
                        Some(text) => decode(&life_key, "", &text)?,
                        None => continue,
                    }
                }
            };
            if stale_before.is_some_and(|before| tail.ts > before) {
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
            Outcome::Written { first_seq, ts, .. } => Ok(Some((
                SessionClaim {
                    held_by: None,
                    overridden,
                },
                Some((first_seq, ts)),
            ))),
            Outcome::GuardFailed => Ok(None),
            Outcome::NotOpen(_) => Err(Self::unexpected_not_open(OP, &rk)),
        }
    }

    /// One claim_resume round: `Ok(None)` = lost the race, retry; `Ok(Some(None))` = the run is
    /// not waiting. After a round with an unknown outcome (`unknown`), a receipt of `op` answers as
    /// this round's write.
    pub(super) async fn claim_resume_round(
        &self,
        log_key: &str,
        ctx: &RunContext,
        resumed: &Template,
        op: &str,
        unknown: bool,
    ) -> Result<Option<Option<(u64, String)>>> {
        const OP: &str = "claim_resume";
        let ns = ctx.namespace_key();
        let rk = self.keys.for_run(ns, log_key, ctx.run_id());
        // WATCH and the reads in one round trip (ADR 0330).
        let mut conn = self.claim_connection(&rk.run).await;
        let (len, life): (i64, Option<String>) = {
            let pipe = conn
                .watching(OP, vec![rk.run.clone(), rk.life.clone()])
                .await?;
            let _: () = pipe
                .llen(&rk.run)
                .await
                .map_err(|e| classify(OP, &rk.run, e))?;
            let _: () = pipe
                .get(&rk.life)
                .await
                .map_err(|e| classify(OP, &rk.life, e))?;
            let receipt = unknown.then(|| self.keys.op(ns, op));
            let (replies, written) = Self::run_reads(pipe, receipt.as_deref(), OP, &rk.run).await?;
            if let Some(written) = written {
                conn.release().await;
                return Ok(Some(Some(written)));
            }
            let ((), len, life) = replies.convert().map_err(|e| classify(OP, &rk.run, e))?;
            (len, life)
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
            Outcome::Written { first_seq, ts, .. } => Ok(Some(Some((first_seq, ts)))),
            Outcome::GuardFailed => Ok(None),
            Outcome::NotOpen(_) => Err(Self::unexpected_not_open(OP, &rk)),
        }
    }

    pub(super) async fn start_claim(
        &self,
        log_key: &str,
        opening: Payload,
        ctx: &RunContext,
        origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<Event>)> {
        const OP: &str = "claim_start";
        let template = template(opening, ctx, origin)?;
        let op = new_token();
        let mut unknown = false;
        let mut overridden = Vec::new();
        let mut last_error = None;
        let (seq, ts) = 'won: {
            for round in 0..self.max_rounds {
                let answer = self
                    .claim_start_round(
                        log_key,
                        ctx,
                        &template,
                        stale_after,
                        &op,
                        unknown,
                        &mut overridden,
                    )
                    .await;
                match answer {
                    Ok(Some((claim, None))) => return Ok((claim, None)),
                    Ok(Some((_, Some(written)))) => break 'won written,
                    Ok(None) => {}
                    Err(e) if e.is_transient() => {
                        // The EXEC may or may not have applied: the next rounds read the receipt.
                        unknown = true;
                        last_error = Some(e);
                    }
                    Err(e) => return Err(e),
                }
                self.backoff(round).await;
            }
            return Err(last_error.unwrap_or_else(|| Error::Contended {
                op: OP,
                key: self.keys.log(ctx.namespace_key(), log_key),
                attempts: self.max_rounds,
            }));
        };
        let event = Self::events(vec![template], ctx, origin, seq, &ts)?.pop();
        let claim = SessionClaim {
            held_by: None,
            overridden,
        };
        Ok((claim, event))
    }

    pub(super) async fn resume_claim(
        &self,
        log_key: &str,
        run_id: &str,
        resumed: Payload,
        ctx: &RunContext,
        origin: &str,
    ) -> Result<Option<Event>> {
        const OP: &str = "claim_resume";
        let template = template(resumed, ctx, origin)?;
        let op = new_token();
        let mut unknown = false;
        let mut last_error = None;
        let (seq, ts) = 'won: {
            for round in 0..self.max_rounds {
                let answer = self
                    .claim_resume_round(log_key, ctx, &template, &op, unknown)
                    .await;
                match answer {
                    Ok(Some(None)) => return Ok(None),
                    Ok(Some(Some(written))) => break 'won written,
                    Ok(None) => {}
                    Err(e) if e.is_transient() => {
                        unknown = true;
                        last_error = Some(e);
                    }
                    Err(e) => return Err(e),
                }
                self.backoff(round).await;
            }
            return Err(last_error.unwrap_or_else(|| Error::Contended {
                op: OP,
                key: self.keys.run(ctx.namespace_key(), log_key, run_id),
                attempts: self.max_rounds,
            }));
        };
        Ok(Self::events(vec![template], ctx, origin, seq, &ts)?.pop())
    }
}
