//! The pool every call of the backend runs on, inside the support crate's circuit (ADR 0355).
//!
//! With the server down, sqlx's pool takes a refused connection for a server starting up and
//! retries it until the acquire timeout (10 s), so every call waited that long and then blamed the
//! pool's size. [`GuardedPool`] is the pool's executor with its one wait, getting a connection,
//! inside the [`Circuit`](support::Circuit): a call fails at once while the server is known to be
//! down, and within the circuit's suspicion delay when it turns out to be down meanwhile. It takes
//! the pool's place everywhere (the methods' statements, their transactions and the group
//! commit), so no call can bypass it.
//!
//! Only getting the connection (and a transaction's `BEGIN`) is guarded: once a statement was
//! sent, it runs to its end or to its connection's failure as before, so the circuit never
//! changes what a call did (a call ended while waiting for a connection sent nothing). A call
//! whose connection failed in a way that may mean the server is gone (the pooled connections of a
//! stopped server fail only when used) makes the circuit check: its error is then the circuit's
//! refusal, as for the calls after it, and its outcome unknown as before. Nothing is retried.

use std::fmt;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Describe, Either, Execute, Executor, Postgres, Transaction};
use switchyard_core::Error;
use switchyard_postgres_support as support;

/// The backend's pool with the circuit around getting a connection. Cheap to clone.
#[derive(Clone)]
pub(crate) struct GuardedPool {
    pool: PgPool,
    circuit: support::Circuit,
}

impl fmt::Debug for GuardedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedPool")
            .field("circuit", &self.circuit)
            .finish_non_exhaustive()
    }
}

/// The circuit's refusal, carried through sqlx's error type (the executor's methods answer
/// `sqlx::Error`) to [`refusal`], which the backend's error mapping asks first.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The circuit's message when `e` is its refusal ("cannot reach PostgreSQL at host:port: …").
pub(crate) fn refusal(e: &sqlx::Error) -> Option<&str> {
    match e {
        sqlx::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<Refused>())
            .map(|r| r.0.as_str()),
        _ => None,
    }
}

impl GuardedPool {
    pub(crate) fn new(pool: PgPool, circuit: support::Circuit) -> Self {
        GuardedPool { pool, circuit }
    }

    /// The pool itself, for what is not a call (closing it, the listening connection).
    pub(crate) fn raw(&self) -> &PgPool {
        &self.pool
    }

    /// `out` of a call, with a failure that may mean the server is gone checked: when the
    /// server cannot be reached, the circuit's refusal (now open) instead of the lost
    /// connection's error, so the call reads as the ones after it.
    async fn settle<T>(&self, out: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        match out {
            Err(e)
                if refusal(&e).is_none() && support::circuit::unreachable_reason(&e).is_some() =>
            {
                match self.circuit.confirm_down("call", "pool").await {
                    Some(down) => Err(refused(down)),
                    None => Err(e),
                }
            }
            out => out,
        }
    }

    /// A connection of the pool, unless the server is known to be down (or found to be while
    /// this waits): then the circuit's refusal.
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let acquire = async { Ok(self.pool.acquire().await) };
        match self.circuit.guard("acquire", "pool", acquire).await {
            Ok(got) => got,
            Err(e) => Err(refused(e)),
        }
    }

    /// A transaction, begun inside the circuit as [`acquire`](Self::acquire) gets a connection.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        // Getting the connection and its `BEGIN`: ending this early sends none of the call's
        // statements.
        let begin = async { Ok(self.pool.begin().await) };
        match self.circuit.guard("begin", "pool", begin).await {
            Ok(got) => self.settle(got).await,
            Err(e) => Err(refused(e)),
        }
    }
}

fn refused(e: Error) -> sqlx::Error {
    let message = match e {
        Error::Unavailable { source, .. } => source.to_string(),
        other => other.to_string(),
    };
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        Refused(message),
    ))
}

impl<'p> Executor<'p> for &GuardedPool {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        // The items are gathered before the first is yielded (the stream borrows its
        // connection); every caller of this backend gathers them anyway (`execute`, `fetch_all`,
        // `fetch_one`).
        futures::stream::once(async move {
            let mut conn = pool.acquire().await?;
            let items = (&mut *conn).fetch_many(query).try_collect::<Vec<_>>().await;
            let items = pool.settle(items).await?;
            Ok::<_, sqlx::Error>(futures::stream::iter(items.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            let out = (&mut *conn).fetch_optional(query).await;
            pool.settle(out).await
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            (&mut *conn).prepare_with(sql, parameters).await
        })
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Postgres>, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            (&mut *conn).describe(sql).await
        })
    }
}
