//! Appends: every batch is one run of `append.lua`, which stamps seq and `ts` on the server
//! (ADR 0020); a conditional append is the same run with guard `open`, which checks the run's
//! status in the script first (ADR 0365). The batch's events are rendered here around two holes
//! (seq, ts) that the script fills, so the stored bytes are the event JSON of the seed.

use std::time::Duration;

use chrono::{DateTime, FixedOffset, Utc};
use fred::prelude::*;
use switchyard_core::context::RunContext;
use switchyard_core::event::{Event, Payload, SchemaVersion, format_ts, parse_ts, stamp};
use switchyard_core::status::{RunStatus, lifecycle_status};
use switchyard_core::{Appended, Error, Result};
use switchyard_redis_support::{KeyLayout, LuaScript, classify};

use super::{RedisEventStore, group};
use crate::keys::RunKeys;

/// One event of a batch, ready for the script: its lifecycle flag and its JSON around seq and ts.
pub(super) struct Template {
    pub(super) flag: &'static str,
    pub(super) p1: String,
    pub(super) p2: String,
    pub(super) p3: String,
    pub(super) payload: Payload,
}

/// What the append script reported.
pub(super) enum Outcome {
    Written {
        first_seq: u64,
        ts: String,
        /// Guard `open` on a first write: the run's (open) status before the batch. `None`
        /// without that guard, and for a resent call answered from its receipt.
        before: Option<RunStatus>,
    },
    GuardFailed,
    /// Guard `open` found the run pending or finished; nothing was written.
    NotOpen(RunStatus),
}

fn ts_of(text: &str) -> Result<DateTime<FixedOffset>> {
    parse_ts(text).map_err(|e| Error::corrupt("append script ts", e))
}

impl RedisEventStore {
    pub(super) fn templates(
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
    pub(super) fn ts_arg(&self) -> String {
        match &self.clock {
            Some(clock) => format_ts(&stamp(clock.now())),
            None => String::new(),
        }
    }

    /// The script's arguments as fred values: built once per call, so a retry clones reference
    /// counts rather than strings.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn script_args(
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

    pub(super) fn script_keys(&self, rk: &RunKeys, op: &str) -> Vec<Key> {
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

    /// A claim's guarded write answered as if guarded by `open`: the script and this build
    /// disagree.
    pub(super) fn unexpected_not_open(op: &'static str, rk: &RunKeys) -> Error {
        Error::Rejected {
            op,
            key: rk.log.clone(),
            message: "the append script answered \"not open\" to a claim's write, which it never \
                      does: the loaded script is not this build's; nothing was written"
                .into(),
        }
    }

    /// Decodes the script's reply.
    pub(super) fn outcome(
        op: &'static str,
        rk: &RunKeys,
        keys: &[Key],
        reply: Value,
    ) -> Result<Outcome> {
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
                let before = match items.get(3).and_then(Value::as_string) {
                    None => None,
                    Some(text) => match text.parse::<RunStatus>() {
                        Ok(status) if status.is_open() => Some(status),
                        _ => {
                            return Err(Error::corrupt(
                                rk.life.clone(),
                                format!(
                                    "the append script stored a batch of a run whose status was \
                                     {text:?}, which is not open"
                                ),
                            ));
                        }
                    },
                };
                Ok(Outcome::Written {
                    first_seq,
                    ts,
                    before,
                })
            }
            Some(0) => Ok(Outcome::GuardFailed),
            Some(2) => {
                let text = items.get(1).and_then(Value::as_string).unwrap_or_default();
                match text.parse::<RunStatus>() {
                    Ok(status) if !status.is_open() => Ok(Outcome::NotOpen(status)),
                    _ => Err(Error::corrupt(
                        rk.life.clone(),
                        format!(
                            "the append script refused the run as not open with status {text:?}"
                        ),
                    )),
                }
            }
            Some(-2) => {
                let index = items.get(1).and_then(Value::as_i64).unwrap_or(0);
                let key = usize::try_from(index - 1)
                    .ok()
                    .and_then(|i| keys.get(i))
                    .map_or_else(|| rk.run.clone(), |k| k.as_str_lossy().into_owned());
                let entry = items.get(2).and_then(Value::as_i64).unwrap_or(-1);
                Err(Error::corrupt(
                    format!("{key}[{entry}]"),
                    "not an event, and the run's life key is missing or unreadable, so its status could not be folded; \
                     nothing was written: repair or remove the entry",
                ))
            }
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

    /// An op's part of `append_group.lua`'s `ARGV`: ts, op_ttl, guard, n, then each event's
    /// flag and its JSON around the seq and ts holes, moved out of `batch` (only its payloads
    /// are read afterwards).
    fn group_args(&self, guard: &'static str, batch: &mut [Template]) -> Vec<Value> {
        let mut args = Vec::with_capacity(4 + 4 * batch.len());
        args.push(Value::from(self.ts_arg()));
        args.push(Value::from(self.op_ttl.clone()));
        args.push(Value::from_static_str(guard));
        args.push(Value::from(batch.len().to_string()));
        for t in batch {
            args.push(Value::from_static_str(t.flag));
            args.push(Value::from(std::mem::take(&mut t.p1)));
            args.push(Value::from(std::mem::take(&mut t.p2)));
            args.push(Value::from(std::mem::take(&mut t.p3)));
        }
        args
    }

    /// One `EVALSHA` of `append.lua` for a batch of its own (one with a lifecycle event).
    async fn single(
        &self,
        opname: &'static str,
        rk: &RunKeys,
        run_id: &str,
        keys: Vec<Key>,
        guard: &'static str,
        batch: &[Template],
    ) -> Result<Value> {
        // One array value: fred takes it as is (a Vec would be converted element by element on
        // every call), and a retry clones reference counts.
        let args =
            Value::Array(self.script_args(rk, run_id, (guard, 0, ""), &[], &[], None, batch));
        run_receipted(&self.script, &self.pool, keys, args, opname, &rk.log).await
    }

    pub(super) fn events(
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
    /// `payloads` is what the port's front hands on: a batch that is not empty and valid
    /// (ADR 0371).
    #[doc(hidden)]
    pub async fn append_with_op(
        &self,
        log_key: &str,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
        op: &str,
    ) -> Result<Vec<Event>> {
        match self
            .run_append("append", "", log_key, payloads, ctx, origin, op)
            .await?
        {
            Appended::Stored { events, .. } => Ok(events),
            Appended::NotOpen(_) => Err(Error::Rejected {
                op: "append",
                key: self.keys.log(ctx.namespace_key(), log_key),
                message: "the append script refused an unconditional append as if it were \
                          conditional; nothing was written: retry, and report it if it persists"
                    .into(),
            }),
        }
    }

    /// [`EventStore::append_if_open`](switchyard_core::EventStore::append_if_open) under an
    /// explicit op token, as [`Self::append_with_op`]: one `EVALSHA` of the append script with
    /// guard `open`, which reads the run's status and writes only while it is open (ADR 0365).
    /// `payloads`, as for [`Self::append_with_op`], is not empty and valid.
    #[doc(hidden)]
    pub async fn append_if_open_with_op(
        &self,
        log_key: &str,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
        op: &str,
    ) -> Result<Appended> {
        self.run_append("append_if_open", "open", log_key, payloads, ctx, origin, op)
            .await
    }

    /// One `EVALSHA` of the append script for a non-empty, validated batch, with `guard` `''`
    /// (unconditional) or `'open'`.
    #[allow(clippy::too_many_arguments)]
    async fn run_append(
        &self,
        opname: &'static str,
        guard: &'static str,
        log_key: &str,
        payloads: Vec<Payload>,
        ctx: &RunContext,
        origin: &str,
        op: &str,
    ) -> Result<Appended> {
        let mut batch = self.templates(payloads, ctx, origin)?;
        let rk = self
            .keys
            .for_run(ctx.namespace_key(), log_key, ctx.run_id());
        let keys = self.script_keys(&rk, op);
        let plain = matches!(guard, "" | "open") && batch.iter().all(|t| t.flag == "0");
        let reply = if plain {
            // With the appends concurrent with it, in one script call (ADR 0385).
            let lane = match self.keys.layout() {
                // Every key of a namespace is in its slot: a group stays on one node.
                KeyLayout::Cluster => rk.ns.as_str(),
                KeyLayout::Seed => "",
            };
            let op = group::Op {
                keys: keys.clone(),
                args: self.group_args(guard, &mut batch),
                events: batch.len(),
            };
            self.groups.run(lane, op, opname, &rk.log).await?
        } else {
            self.single(opname, &rk, ctx.run_id(), keys.clone(), guard, &batch)
                .await?
        };
        match Self::outcome(opname, &rk, &keys, reply)? {
            Outcome::Written {
                first_seq,
                ts,
                before,
            } => {
                let events = Self::events(batch, ctx, origin, first_seq, &ts)?;
                let before = match before {
                    Some(status) => status,
                    // Only the unconditional append, which does not look at the status.
                    None if guard != "open" => RunStatus::Running,
                    None => {
                        return Err(Error::corrupt(
                            rk.log.clone(),
                            "the append script stored a conditional batch without the run's \
                             status: the server runs another build's script",
                        ));
                    }
                };
                Ok(Appended::stored(events, before))
            }
            Outcome::NotOpen(status) if guard == "open" => Ok(Appended::NotOpen(status)),
            Outcome::GuardFailed | Outcome::NotOpen(_) => Err(Error::Rejected {
                op: opname,
                key: rk.log.clone(),
                message: format!(
                    "the append script replied with a refusal guard {guard:?} cannot give; \
                     nothing was written: retry, and report it if it persists"
                ),
            }),
        }
    }
}

pub(super) fn template(payload: Payload, ctx: &RunContext, origin: &str) -> Result<Template> {
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

/// Runs `script` with `keys` and `args` (calls whose writes carry op receipts, so a resent call
/// is answered from them and never writes twice): transient failures are retried a few times
/// before they reach the caller. `opname` and `key` name the call in errors.
pub(super) async fn run_receipted(
    script: &LuaScript,
    pool: &Pool,
    keys: Vec<Key>,
    args: Value,
    opname: &'static str,
    key: &str,
) -> Result<Value> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match script.run(pool.next(), keys.clone(), args.clone()).await {
            Ok(reply) => return Ok(reply),
            Err(e) => {
                let err = classify(opname, key, e);
                if attempt >= 3 || !err.is_transient() {
                    return Err(err);
                }
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
        }
    }
}
