//! The claim connections: a WATCH that is always undone, and the guarded EXEC of `append.lua`.

use fred::prelude::*;
use fred::types::config::Options;
use fred::types::{ClusterHash, CustomCommand};
use switchyard_core::{Error, Result};
use switchyard_redis_support::classify;
use tokio::sync::OwnedMutexGuard;

use super::RedisEventStore;

impl RedisEventStore {
    /// Runs one guarded MULTI { EVAL append.lua } EXEC on a watched connection.
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
        // fred has no Lua interface on a transaction; EVAL as a custom command (full source, so
        // a flushed script cache cannot fail inside MULTI with NOSCRIPT).
        let mut eval = Vec::with_capacity(2 + keys.len() + args.len());
        eval.push(Value::from_static_str(self.script.source()));
        eval.push(Value::from(keys.len().to_string()));
        eval.extend(keys.into_iter().map(Value::from));
        eval.extend(args);
        let queued: std::result::Result<(), _> = trx
            .custom(
                CustomCommand::new_static("EVAL", ClusterHash::Offset(2), false),
                eval,
            )
            .await;
        queued.map_err(|e| classify(opname, log_key, e))?;
        // An EXEC aborted by WATCH replies nil: decode into Value and treat Null as a conflict
        // (decoding into `()` would report it as success).
        let reply: Value = trx
            .exec(true)
            .await
            .map_err(|e| classify(opname, log_key, e))?;
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

    pub(super) async fn watch(&self, opname: &'static str, keys: Vec<String>) -> Result<Watched> {
        let guard = self.claims.acquire().await;
        let slot = keys
            .first()
            .map_or(0, |k| fred::util::redis_keyslot(k.as_bytes()));
        let conn = Watched {
            client: Some(guard),
            armed: true,
            slot,
        };
        conn.client()
            .watch(keys.clone())
            .await
            .map_err(|e| classify(opname, keys.first().map_or("", String::as_str), e))?;
        Ok(conn)
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
