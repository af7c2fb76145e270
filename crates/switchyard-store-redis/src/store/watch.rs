//! The claim connections: a WATCH that is always undone, and the guarded EXEC of `append.lua`.

use fred::clients::Pipeline;
use fred::prelude::*;
use fred::types::config::Options;
use fred::types::{ClusterHash, CustomCommand};
use switchyard_core::{Error, Result};
use switchyard_redis_support::classify;
use switchyard_redis_support::error::is_noscript;
use tokio::sync::OwnedMutexGuard;

use super::RedisEventStore;

impl RedisEventStore {
    /// Runs one guarded MULTI { EVALSHA append.lua } EXEC on a watched connection; `Ok(None)` is
    /// a round to retry (aborted by WATCH, or the script had to be loaded again).
    pub(super) async fn exec_guarded(
        &self,
        conn: &mut Watched,
        keys: Vec<Key>,
        args: Vec<Value>,
        opname: &'static str,
        log_key: &str,
    ) -> std::result::Result<Option<Value>, Error> {
        if let Some(hook) = &self.before_exec {
            let id: i64 = conn
                .client()
                .client_id()
                .await
                .map_err(|e| classify(opname, log_key, e))?;
            hook(u64::try_from(id).unwrap_or(0)).await;
        }
        let trx = conn.client().multi();
        // fred has no Lua interface on a transaction; EVALSHA as a custom command. EVAL with the
        // full source would survive a flushed script cache, but sends and hashes the whole script
        // on every claim; a NOSCRIPT instead loads the script and costs one round (ADR 0271).
        let mut eval = Vec::with_capacity(2 + keys.len() + args.len());
        eval.push(Value::from(self.script.sha1()));
        eval.push(Value::from(keys.len().to_string()));
        eval.extend(keys.into_iter().map(Value::from));
        eval.extend(args);
        let queued: std::result::Result<(), _> = trx
            .custom(
                CustomCommand::new_static("EVALSHA", ClusterHash::Offset(2), false),
                eval,
            )
            .await;
        queued.map_err(|e| classify(opname, log_key, e))?;
        // An EXEC aborted by WATCH replies nil: decode into Value and treat Null as a conflict
        // (decoding into `()` would report it as success).
        let reply: Value = match trx.exec(true).await {
            Ok(reply) => reply,
            // The script did not run, so nothing was written: load it and let the caller start
            // a new round, as after a lost race.
            Err(e) if is_noscript(&e) => {
                conn.disarm();
                self.script
                    .load(conn.client())
                    .await
                    .map_err(|e| classify(opname, log_key, e))?;
                return Ok(None);
            }
            Err(e) => return Err(classify(opname, log_key, e)),
        };
        // EXEC, aborted or not, clears every WATCH of the connection.
        conn.disarm();
        match reply {
            Value::Null => Ok(None),
            Value::Array(mut items) if items.len() == 1 => Ok(items.pop()),
            other => Err(Error::Rejected {
                op: opname,
                key: log_key.to_string(),
                message: format!("unexpected EXEC reply {other:?}"),
            }),
        }
    }

    /// A claim connection whose WATCH of `keys` is queued first on a pipeline: the caller
    /// queues the round's reads behind it, so WATCH and the reads it guards cost one round trip
    /// (commands of one connection run in order, so the reads still see the watched state).
    /// The connection counts as armed from the start: an error before or during the pipeline
    /// sends UNWATCH on drop, which is harmless if the WATCH never arrived (ADR 0271).
    pub(super) async fn watch(
        &self,
        opname: &'static str,
        keys: Vec<String>,
    ) -> Result<(Watched, Pipeline<Client>)> {
        let guard = self.claims.acquire().await;
        let slot = keys
            .first()
            .map_or(0, |k| fred::util::redis_keyslot(k.as_bytes()));
        let conn = Watched {
            client: Some(guard),
            armed: true,
            slot,
        };
        let pipe = conn.client().pipeline();
        // As a custom command: fred's `watch` expects `OK` at once, which a pipeline only
        // delivers on `all`.
        let _: () = pipe
            .custom(
                CustomCommand::new_static("WATCH", ClusterHash::Custom(slot), false),
                keys.clone(),
            )
            .await
            .map_err(|e| classify(opname, keys.first().map_or("", String::as_str), e))?;
        Ok((conn, pipe))
    }
}

/// A claim connection with a WATCH that may still be armed. Dropping it while armed (an error
/// path, or the claim future cancelled) sends UNWATCH before the connection goes back to the pool,
/// so no later transaction inherits a stale WATCH.
pub(super) struct Watched {
    client: Option<OwnedMutexGuard<Client>>,
    armed: bool,
    /// The slot of the watched keys. On a cluster the WATCH lives on the connection to that
    /// slot's node, and a plain UNWATCH would go to a random node (fred routes a keyless command to any node).
    slot: u16,
}

/// `UNWATCH` on the connection that holds the WATCH of `slot`.
pub(super) async fn unwatch(client: &Client, slot: u16) {
    let options = Options {
        cluster_hash: Some(ClusterHash::Custom(slot)),
        ..Options::default()
    };
    // A failed UNWATCH means the connection is gone, and the WATCH with it.
    let _ = client.with_options(&options).unwatch().await;
}

impl Watched {
    pub(super) fn client(&self) -> &Client {
        // Only `release` and `drop` take the guard, and both consume or end the value.
        self.client
            .as_deref()
            .unwrap_or_else(|| unreachable!("claim connection used after release"))
    }

    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// UNWATCH now (a refusal needs no EXEC).
    pub(super) async fn release(&mut self) {
        if let Some(client) = self.client.as_deref()
            && self.armed
        {
            unwatch(client, self.slot).await;
            self.armed = false;
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let (Some(client), Ok(rt)) = (self.client.take(), tokio::runtime::Handle::try_current())
        {
            let slot = self.slot;
            // The guard moves into the task: the connection returns to the pool only after UNWATCH.
            rt.spawn(async move {
                unwatch(&client, slot).await;
                drop(client);
            });
        }
    }
}
