//! Test servers for adapter tests: real servers, never mocks.
//!
//! * [`redis_url`] yields the Redis every test of one binary shares: `REDIS_URL` if set; otherwise a
//!   `redis-server` this binary starts on a free port (stopped when the binary exits); otherwise, with
//!   the `testcontainers` feature and a Docker engine, a `redis:7.2` container; otherwise the test
//!   fails with a message saying how to get a Redis.
//! * [`redis_cluster_url`] yields a Redis Cluster (3 masters, 3 replicas) every test of one binary
//!   shares, started from `redis-server` processes (`REDIS_CLUSTER_URL` overrides it);
//!   [`RedisCluster`] starts a private one a test can fail over.
//! * [`RedisServer`] starts a private server a test can stop, kill and restart (fault tests).
//! * [`unique_prefix`] gives every test its own key prefix, so tests run in parallel on one server.
//! * [`TempSqlite`] is a SQLite file in a temporary directory, removed on drop.
//! * [`postgres_url`] yields the PostgreSQL every test of one binary shares: `POSTGRES_URL` if set;
//!   otherwise a private server this binary starts with `initdb` and `pg_ctl` (as the `postgres`
//!   user when run as root); otherwise a `postgres:16` container with the `testcontainers`
//!   feature; otherwise the test fails with a message saying how to get one.
//!   [`unique_schema`] gives every test its own schema on it (adapters create their schema when
//!   they open), [`fresh_database`] a whole database; [`PostgresServer`] is a private server a
//!   test can stop, kill and restart.
//! * [`reply_losing_proxy`] stands between a client and a server and loses the replies a test
//!   picks, after the commands ran (what makes a client re-send them).

mod cluster;
mod postgres;
mod proxy;
mod python;
mod python_candidates;
mod redis;
mod sqlite;

pub use cluster::{RedisCluster, redis_cluster_url};
pub use postgres::{
    PostgresServer, fresh_database, postgres_exec, postgres_query, postgres_url, unique_schema,
    with_database,
};
pub use proxy::{LoseReply, reply_losing_proxy};
pub use python::{
    built_extension, python_312, python_package, python_package_venv, python_runs, python_venv,
    target_dir,
};
pub use redis::{RedisServer, redis_cmd, redis_url};
pub use sqlite::TempSqlite;

/// A free TCP port of 127.0.0.1 that this process has not handed out before. A server a test
/// kills frees its port at once; handed out again, the port would let the killed server's
/// clients reconnect to another test's server and read its data as their own.
pub(crate) fn free_port() -> std::io::Result<u16> {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, PoisonError};
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        if GIVEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(port)
        {
            return Ok(port);
        }
    }
    Err(std::io::Error::other(
        "the kernel kept offering ports this process already used",
    ))
}

/// A fresh key prefix / namespace for one test: `swt:<tag>:<random>`.
pub fn unique_prefix(tag: &str) -> String {
    format!("swt:{tag}:{:016x}", rand::random::<u64>())
}

/// A fresh random identifier (run ids, session ids, thread ids in tests).
pub fn unique_id(tag: &str) -> String {
    format!("{tag}-{:016x}", rand::random::<u64>())
}
