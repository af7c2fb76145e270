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
    /// Runs one guarded MULTI { EVALSHA append.lua } EXEC on a watched connection. `Ok(None)` is a
    /// conflict (the WATCH aborted the EXEC): run another round. A transient error is an unknown
    /// outcome, also when the server's script cache was emptied (ADR 0351).
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
        // fred has no Lua interface on a transaction: EVALSHA as a custom command. The script is
        // named by its SHA-1 rather than sent whole (ADR 0330); if the server lost it, the EXEC
        // replies NOSCRIPT for the block's only command, so nothing was written.
        let mut eval = Vec::with_capacity(2 + keys.len() + args.len());
        eval.push(Value::from(self.script.sha1().to_string()));
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
            Err(e) if is_noscript(&e) => {
                // The script cache was emptied (restart, SCRIPT FLUSH, a promoted replica). This
                // EXEC (or the DISCARD fred sends on a queueing error) cleared the WATCH and wrote
                // nothing, but it may be fred's re-send of a block the server applied before it
                // restarted: the outcome is unknown, so the claim reads its receipt before its
                // next round (ADR 0351). Load the script again for that round.
                conn.disarm();
                self.script
                    .load(conn.client())
                    .await
                    .map_err(|e| classify(opname, "SCRIPT LOAD", e))?;
                return Err(Error::unavailable(
                    opname,
                    log_key,
                    "the server's script cache was emptied (a restart or SCRIPT FLUSH) while the \
                     claim was being sent, so whether an earlier send applied is unknown; retry",
                ));
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

    /// A claim connection for keys in the slot of `slot_key`, counted as armed from the start:
    /// its first pipeline opens with the WATCH ([`Watched::watching`]), so the WATCH costs no
    /// round trip of its own (ADR 0330), and any way out of the round before EXEC undoes it.
    pub(super) async fn claim_connection(&self, slot_key: &str) -> Watched {
        let guard = self.claims.acquire().await;
        Watched {
            client: Some(guard),
            armed: true,
            slot: fred::util::redis_keyslot(slot_key.as_bytes()),
        }
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

    /// A pipeline on this connection that opens with `WATCH keys`; the round's first reads follow
    /// in the same pipeline. Redis runs one connection's commands in order, so the reads already
    /// see the watched state. On a cluster every key of a claim shares the namespace's slot, so the
    /// WATCH and the reads go to the slot's node, where the EXEC goes too.
    pub(super) async fn watching(
        &self,
        opname: &'static str,
        keys: Vec<String>,
    ) -> Result<Pipeline<Client>> {
        let pipe = self.client().pipeline();
        let first = keys.first().cloned().unwrap_or_default();
        // As a custom command: fred's `watch` checks for an `OK` reply, which a pipeline only
        // has once it runs.
        let queued: std::result::Result<(), _> = pipe
            .custom(
                CustomCommand::new_static("WATCH", ClusterHash::FirstKey, false),
                keys,
            )
            .await;
        queued.map_err(|e| classify(opname, &first, e))?;
        Ok(pipe)
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
