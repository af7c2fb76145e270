//! # switchyard-store-redis
//!
//! The [`EventStore`](switchyard_core::EventStore) on Redis, with the key layout and event JSON of
//! agentdeck-sdk 3.1.0's `RedisEventStore`, so a Python process of the seed and this store can work
//! on one Redis. Where the seed is wrong it is fixed (see the ADRs 0020–0029):
//!
//! * appends are one Lua script that stamps `seq` and `ts` on the server: no contention errors,
//!   whatever the number of appenders (the seed fails 35 of 100);
//! * one clock, Redis `TIME`, stamps `ts` and is the "now" of stale checks;
//! * claims are WATCH/MULTI/EXEC on connections of their own, safe against reconnects and re-sent
//!   EXECs, with bounded jittered retry and [`Error::Contended`](switchyard_core::Error) after it;
//! * a per-log SET of open runs bounds a claim by open runs, not by the session's history;
//! * `read_run(from_seq)` is an `LRANGE` from the seq position; `list_runs` filters by value.
//!
//! ## Redis Cluster (ADRs 0090, 0091)
//!
//! A `redis-cluster://host:port?node=host:port&…` URL (`rediss-cluster://` for TLS; several seed
//! nodes) selects fred's cluster client and [`KeyLayout::Cluster`]: the seed's keys with the
//! namespace as a hash tag, `{ns:<quote(ns)>}` (op receipts included), so every append script, claim
//! transaction and `list_runs` stays in the namespace's slot. No operation reads across
//! namespaces: `list_runs` lists one namespace, and one namespace lives on one primary (the
//! cluster spreads namespaces, not the runs of one namespace). `check_server` reads one node.
//!
//! ```no_run
//! # async fn demo() -> switchyard_core::Result<()> {
//! use switchyard_store_redis::RedisEventStore;
//! let store = RedisEventStore::connect("redis://127.0.0.1:6379/0").await?;
//! for issue in store.check_server().await?.issues {
//!     eprintln!("redis: {issue}");
//! }
//! # Ok(()) }
//! ```

mod config;
mod keys;
mod server;
mod store;

#[doc(hidden)]
pub use config::BeforeExecHook;
pub use config::{Reconnect, RedisStoreOptions};
pub use keys::{DEFAULT_PREFIX, KeyLayout, KeySpace};
pub use server::{ServerIssue, ServerReport};
pub use store::RedisEventStore;
