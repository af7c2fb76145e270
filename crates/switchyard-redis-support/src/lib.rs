//! # switchyard-redis-support
//!
//! Shared plumbing of switchyard's Redis adapters; **not for direct use** (as `sqlx-core` is to
//! sqlx). Depend on an adapter crate instead: `switchyard-store-redis`,
//! `switchyard-stream-bridge-redis`, `switchyard-checkpoint-cache-redis`, or the fleet's Redis
//! adapter. This crate's API speaks fred and may change with any release of the adapters.
//!
//! What every Redis adapter does the same way lives here, once:
//!
//! * [`url`]: a Redis URL → fred's config, for standalone (`redis://`, `rediss://` for TLS,
//!   `user:password@` ACL, `/db`), sentinel and cluster (`redis-cluster://host:port?node=…`)
//!   servers, and URL redaction for messages (a password is never printed);
//! * [`connect`]: the connection policy (timeouts, reconnect, re-sends) turned into a fred
//!   builder;
//! * [`keys`]: the one [`KeyLayout`] (the seeds' keys, or the same keys with a cluster hash tag),
//!   segment quoting and hash-tag helpers;
//! * [`error`]: the one rule that turns a fred error into a [`switchyard_core::Error`] (ADR 0170);
//! * [`script`]: Lua scripts from `.lua` files with a documented header, run by `EVALSHA` and
//!   reloaded on `NOSCRIPT` (ADR 0171).

pub mod connect;
pub mod error;
pub mod keys;
pub mod script;
pub mod url;

pub use connect::{ConnectionPolicy, Reconnect};
pub use error::classify;
pub use keys::KeyLayout;
pub use script::LuaScript;
pub use url::{RedisUrl, Topology, redact};
