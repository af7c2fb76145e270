//! The line of runs waiting for a session (ADR 0394, guarantee `line.order`): one LIST per log,
//! `P:line:{ns}:{log}` ([`KeySpace::line`](crate::KeySpace::line)), holding each waiting run's
//! [`QueuedRun`] JSON, the head first. It sits beside the log, in the log's slot in the cluster
//! layout, and the seed never reads it.
//!
//! A push is one script (`line_push.lua`): the membership check, the bound and the `RPUSH` in one
//! step, so concurrent pushes get distinct places in the order they ran. A removal is one script
//! too (`line_remove.lua`), which finds the entry and removes its exact text in the same step. A
//! read is one `LRANGE`. Neither script call is sent again after a failure (only after
//! `NOSCRIPT`, which means it did not run): a push or a removal whose reply was lost has an
//! unknown outcome, and a second call could answer "already waiting" or "not there" for what the
//! first one did.

use fred::prelude::*;
use switchyard_core::context::RunContext;
use switchyard_core::store::{MAX_LINE, QueuedRun, checks};
use switchyard_core::{Error, Result};
use switchyard_redis_support::{LuaScript, classify};

use super::RedisEventStore;

/// The push script.
pub(super) fn push_script() -> LuaScript {
    LuaScript::new("line_push.lua", include_str!("../line_push.lua"))
}

/// The removal script.
pub(super) fn remove_script() -> LuaScript {
    LuaScript::new("line_remove.lua", include_str!("../line_remove.lua"))
}

/// The run id as a JSON string, quotes included: the exact text the scripts search entries for.
/// [`QueuedRun::to_json`] writes the id with the same serializer, so a waiting run's entry always
/// holds this text (`an_entry_holds_its_run_ids_needle`).
fn needle(run_id: &str) -> String {
    serde_json::Value::from(run_id).to_string()
}

/// Where entry `index` of `key` is, for [`Error::Corrupt`].
fn at(key: &str, index: impl std::fmt::Display) -> String {
    format!("{key}[{index}]")
}

/// The reply of either script, checked: an array whose first item is a code.
fn items_of(op: &'static str, key: &str, reply: Value) -> Result<(i64, Vec<Value>)> {
    let unexpected = |reply: &dyn std::fmt::Debug| Error::Rejected {
        op,
        key: key.to_string(),
        message: format!(
            "unexpected script reply {reply:?}: the server runs another build's script"
        ),
    };
    match reply {
        Value::Array(items) => match items.first().and_then(Value::as_i64) {
            Some(code) => Ok((code, items)),
            None => Err(unexpected(&items)),
        },
        other => Err(unexpected(&other)),
    }
}

/// The `{-2, index}` reply of either script: an entry that holds the run id's text but is not an
/// entry, so whether the run waits is unknown.
fn unreadable(key: &str, items: &[Value]) -> Error {
    let index = items.get(1).and_then(Value::as_i64).unwrap_or(-1);
    Error::corrupt(
        at(key, index),
        "a line entry holds the run id but is not a waiting run's JSON, so whether the run \
         waits is unknown; nothing was written: repair or remove the entry",
    )
}

impl RedisEventStore {
    /// `line_push`: one `EVALSHA` of `line_push.lua`.
    pub(super) async fn push_to_line(&self, ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        let key = self.keys.line(ctx.namespace_key(), ctx.log_key());
        let args = Value::Array(vec![
            Value::from(entry.run_id.as_str()),
            Value::from(needle(&entry.run_id)),
            Value::from(entry.to_json()),
            Value::from(MAX_LINE.to_string()),
        ]);
        let reply: Value = self
            .line_push
            .run(self.pool.next(), vec![Key::from(key.as_str())], args)
            .await
            .map_err(|e| classify("line_push", &key, e))?;
        let (code, items) = items_of("line_push", &key, reply)?;
        match code {
            1 => items
                .get(1)
                .and_then(Value::as_i64)
                .and_then(|place| u64::try_from(place).ok())
                .filter(|place| *place >= 1)
                .ok_or_else(|| {
                    Error::corrupt(
                        key.clone(),
                        format!("the push answered no place: {items:?}"),
                    )
                }),
            0 => Err(Error::AlreadyExists {
                what: "waiting run",
                id: entry.run_id.clone(),
            }),
            2 => Err(checks::line_full(ctx)),
            -2 => Err(unreadable(&key, &items)),
            _ => Err(Error::Rejected {
                op: "line_push",
                key,
                message: format!(
                    "unexpected script reply {items:?}: the server runs another build's script"
                ),
            }),
        }
    }

    /// `line_read`: one `LRANGE` from the head; the front passes a `limit` of 1 to
    /// [`MAX_LINE`].
    pub(super) async fn read_line(&self, ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        let key = self.keys.line(ctx.namespace_key(), ctx.log_key());
        let end = i64::try_from(limit).unwrap_or(i64::MAX).saturating_sub(1);
        let rows: Vec<String> = self
            .pool
            .next()
            .lrange(&key, 0, end)
            .await
            .map_err(|e| classify("line_read", &key, e))?;
        rows.iter()
            .enumerate()
            .map(|(i, row)| QueuedRun::from_json(row, &at(&key, i)))
            .collect()
    }

    /// `line_remove`: one `EVALSHA` of `line_remove.lua`.
    pub(super) async fn remove_from_line(&self, ctx: &RunContext, run_id: &str) -> Result<bool> {
        let key = self.keys.line(ctx.namespace_key(), ctx.log_key());
        let args = Value::Array(vec![Value::from(run_id), Value::from(needle(run_id))]);
        let reply: Value = self
            .line_remove
            .run(self.pool.next(), vec![Key::from(key.as_str())], args)
            .await
            .map_err(|e| classify("line_remove", &key, e))?;
        let (code, items) = items_of("line_remove", &key, reply)?;
        match code {
            1 => Ok(true),
            0 => Ok(false),
            -2 => Err(unreadable(&key, &items)),
            _ => Err(Error::Rejected {
                op: "line_remove",
                key,
                message: format!(
                    "unexpected script reply {items:?}: the server runs another build's script"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use switchyard_core::event::{Block, InvocableKind, RunStarted};

    use super::*;

    fn entry(run_id: &str) -> QueuedRun {
        QueuedRun {
            run_id: run_id.into(),
            opening: RunStarted {
                invocable: "helper".into(),
                kind_of_invocable: InvocableKind::Agent,
                input: vec![Block::text(format!("{run_id} \"run_id\":{run_id}"))],
            },
            origin: "test".into(),
            stale_after: Duration::from_secs(60),
        }
    }

    /// The scripts find an entry by its run id's JSON text: every id, however escaped, must
    /// appear in its entry exactly as [`needle`] writes it.
    #[test]
    fn an_entry_holds_its_run_ids_needle() {
        for id in [
            "r",
            "é~_.-",
            "a\"b",
            "back\\slash",
            "new\nline\u{1}",
            "slash/",
            "{ns:}",
            "😀",
            "",
        ] {
            let json = entry(id).to_json();
            assert!(json.contains(&needle(id)), "{id:?}: {json}");
            let back = QueuedRun::from_json(&json, "k");
            assert_eq!(back.ok().map(|r| r.run_id), Some(id.to_string()));
        }
    }
}
