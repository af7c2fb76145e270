//! The floors: what the same machine does with no adapter in the way.

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::{Builder, Client, ClientLike, Config, KeysInterface};
use fred::types::InfoKind;
use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};

use crate::Ctx;
use crate::measure::{closed_loop, err};
use crate::report::Case;
use crate::suites::case;

/// Floor rates of this run, per second.
#[derive(Debug, Default, Clone)]
pub(crate) struct Floors {
    /// SET round trips on one connection, one at a time.
    pub redis_rtt: Option<f64>,
    /// SETs on 64 connections, one at a time each.
    pub redis_set64: Option<f64>,
    /// SETs pipelined 1,000 at a time on one connection.
    pub redis_pipelined: Option<f64>,
    /// One-row write transactions on one SQLite connection.
    pub sqlite_tx: Option<f64>,
    /// One-row INSERT transactions on one PostgreSQL connection.
    pub postgres_tx: Option<f64>,
    /// One-row INSERT transactions on 64 PostgreSQL connections.
    pub postgres_tx64: Option<f64>,
}

pub(crate) const RTT: &str = "floor: Redis SET round trip, 1 connection";
pub(crate) const SET64: &str = "floor: Redis SET, 64 connections, unpipelined";
pub(crate) const PIPELINED: &str = "floor: Redis SET, pipelined ×1000, 1 connection";
pub(crate) const SQLITE_TX: &str = "floor: SQLite 1-row write transaction";
pub(crate) const PG_TX: &str = "floor: Postgres 1-row INSERT transaction, 1 connection";
pub(crate) const PG_TX64: &str = "floor: Postgres 1-row INSERT transaction, 64 connections";

/// A payload about the size of one stored event.
fn event_sized_row() -> String {
    format!(
        "{{\"v\":1,\"kind\":\"text.delta\",\"text\":\"{}\"}}",
        "x".repeat(190)
    )
}

/// A plain fred client on `url` (one connection, no reconnect policy).
pub(crate) async fn client(url: &str) -> Result<Client, String> {
    let config = Config::from_url(url).map_err(err)?;
    let client = Builder::from_config(config).build().map_err(err)?;
    client.init().await.map_err(err)?;
    Ok(client)
}

pub(crate) async fn redis_version(url: &str) -> Option<String> {
    let c = client(url).await.ok()?;
    let info: String = c.info(Some(InfoKind::Server)).await.ok()?;
    let _ = c.quit().await;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
}

pub(crate) async fn redis(ctx: &mut Ctx) -> Result<Vec<Case>, String> {
    let url = ctx.redis().to_string();
    let value = "x".repeat(64);
    let mut cases = Vec::new();

    let one = Arc::new(client(&url).await.map_err(|e| format!("{url}: {e}"))?);
    let key = format!("{}:floor:rtt", ctx.prefix);
    let (c, v, k) = (one.clone(), value.clone(), key.clone());
    let s = closed_loop(1, ctx.case_time, move |_, _| {
        let (c, v, k) = (c.clone(), v.clone(), k.clone());
        async move {
            c.set::<(), _, _>(k, v, None, None, false)
                .await
                .map_err(err)
        }
    })
    .await;
    ctx.floors.redis_rtt = Some(s.rate());
    cases.push(case("floor", "fred", RTT, "SETs/s", &s, 1.0));

    let mut clients = Vec::with_capacity(64);
    for _ in 0..64 {
        clients.push(client(&url).await?);
    }
    let clients = Arc::new(clients);
    let (cs, v, p) = (clients.clone(), value.clone(), ctx.prefix.clone());
    let s = closed_loop(64, ctx.case_time, move |w, _| {
        let c = cs[w].clone();
        let (v, k) = (v.clone(), format!("{p}:floor:set64:{w}"));
        async move {
            c.set::<(), _, _>(k, v, None, None, false)
                .await
                .map_err(err)
        }
    })
    .await;
    ctx.floors.redis_set64 = Some(s.rate());
    cases.push(case("floor", "fred", SET64, "SETs/s", &s, 1.0));
    for c in clients.iter() {
        let _ = c.quit().await;
    }

    const BATCH: usize = 1000;
    let keys: Arc<Vec<String>> = Arc::new(
        (0..BATCH)
            .map(|i| format!("{}:floor:pipe:{i}", ctx.prefix))
            .collect(),
    );
    let (c, v, ks) = (one.clone(), value.clone(), keys.clone());
    let s = closed_loop(1, ctx.case_time, move |_, _| {
        let (c, v, ks) = (c.clone(), v.clone(), ks.clone());
        async move {
            let pipe = c.pipeline();
            for k in ks.iter() {
                pipe.set::<(), _, _>(k.as_str(), v.as_str(), None, None, false)
                    .await
                    .map_err(err)?;
            }
            pipe.all::<Vec<fred::types::Value>>().await.map_err(err)?;
            Ok(())
        }
    })
    .await;
    ctx.floors.redis_pipelined = Some(s.rate() * BATCH as f64);
    let mut pipelined = case("floor", "fred", PIPELINED, "SETs/s", &s, BATCH as f64);
    pipelined.note = format!("p50/p99 per pipeline of {BATCH}");
    cases.push(pipelined);
    let _: Result<i64, _> = one.del(keys.to_vec()).await;
    let _ = one.quit().await;
    Ok(cases)
}

/// The pragmas of our stores: WAL, `synchronous=NORMAL`, a busy timeout.
pub(crate) fn sqlite_options(path: &std::path::Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
}

pub(crate) async fn sqlite_version() -> Option<String> {
    let mut conn = SqliteConnection::connect("sqlite::memory:").await.ok()?;
    let v: String = sqlx::query_scalar("SELECT sqlite_version()")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    let _ = conn.close().await;
    Some(v)
}

pub(crate) async fn sqlite(ctx: &mut Ctx) -> Result<Vec<Case>, String> {
    let path = ctx.sqlite_dir.join("floor.db");
    let mut conn = SqliteConnection::connect_with(&sqlite_options(&path))
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    sqlx::query("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .map_err(err)?;
    let row = event_sized_row();
    let conn = Arc::new(tokio::sync::Mutex::new(conn));
    let c = conn.clone();
    let s = closed_loop(1, ctx.case_time, move |_, _| {
        let (c, row) = (c.clone(), row.clone());
        async move {
            let mut conn = c.lock().await;
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(err)?;
            sqlx::query("INSERT INTO floor (data) VALUES (?1)")
                .bind(row)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)
        }
    })
    .await;
    ctx.floors.sqlite_tx = Some(s.rate());
    let mut c = case("floor", "sqlx", SQLITE_TX, "tx/s", &s, 1.0);
    c.note = "BEGIN IMMEDIATE; INSERT ~230 B; COMMIT".into();
    if let Ok(conn) = Arc::try_unwrap(conn) {
        let _ = conn.into_inner().close().await;
    }
    Ok(vec![c])
}

/// A pool of `size` connections to the bench's PostgreSQL, in `schema` (created if missing).
pub(crate) async fn postgres_pool(ctx: &Ctx, schema: &str, size: u32) -> Result<PgPool, String> {
    let url = ctx.postgres();
    let options = PgConnectOptions::from_str(url)
        .map_err(err)?
        .options([("search_path", schema)]);
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .min_connections(size)
        .connect_with(options)
        .await
        .map_err(|e| format!("{}: {e}", redacted(url)))?;
    sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(&pool)
        .await
        .map_err(err)?;
    Ok(pool)
}

/// `url` without its password, for messages.
fn redacted(url: &str) -> String {
    switchyard_postgres_support::redact(url)
}

pub(crate) async fn postgres_version(url: &str) -> Option<String> {
    let mut conn = PgConnection::connect(url).await.ok()?;
    let v: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    let _ = conn.close().await;
    Some(v)
}

/// One-row INSERTs, each its own transaction (autocommit: one round trip, one commit, the least
/// a durable write costs), on 1 and on 64 connections.
pub(crate) async fn postgres(ctx: &mut Ctx) -> Result<Vec<Case>, String> {
    let schema = ctx.pg_schema("floor");
    let pool = postgres_pool(ctx, &schema, 64).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS floor (id bigserial PRIMARY KEY, data text NOT NULL)")
        .execute(&pool)
        .await
        .map_err(err)?;
    let row = event_sized_row();
    let mut cases = Vec::new();
    for (concurrency, name) in [(1, PG_TX), (64, PG_TX64)] {
        let (p, r) = (pool.clone(), row.clone());
        let s = closed_loop(concurrency, ctx.case_time, move |_, _| {
            let (p, r) = (p.clone(), r.clone());
            async move {
                sqlx::query("INSERT INTO floor (data) VALUES ($1)")
                    .bind(r)
                    .execute(&p)
                    .await
                    .map(drop)
                    .map_err(err)
            }
        })
        .await;
        if concurrency == 1 {
            ctx.floors.postgres_tx = Some(s.rate());
        } else {
            ctx.floors.postgres_tx64 = Some(s.rate());
        }
        let mut c = case("floor", "sqlx", name, "tx/s", &s, 1.0);
        c.note = "INSERT ~230 B, autocommit: one round trip, one commit".into();
        cases.push(c);
    }
    pool.close().await;
    Ok(cases)
}

/// Drops the run's schemas from a PostgreSQL the bench did not start (best effort).
pub(crate) async fn postgres_cleanup(ctx: &Ctx) {
    let Ok(mut conn) = PgConnection::connect(ctx.postgres()).await else {
        return;
    };
    for what in ["floor", "store", "store_switchyard", "queue"] {
        let _ = sqlx::query(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            ctx.pg_schema(what)
        ))
        .execute(&mut conn)
        .await;
    }
    let _ = conn.close().await;
}

/// Removes the run's keys from a Redis the bench did not start (best effort).
pub(crate) async fn cleanup(url: &str, prefix: &str) {
    let Ok(c) = client(url).await else { return };
    let mut cursor = "0".to_string();
    for _ in 0..10_000 {
        let r: Result<(String, Vec<String>), _> = c
            .custom(
                fred::cmd!("SCAN"),
                vec![
                    cursor.clone(),
                    "MATCH".into(),
                    format!("*{prefix}*"),
                    "COUNT".into(),
                    "1000".into(),
                ],
            )
            .await;
        let Ok((next, keys)) = r else { break };
        if !keys.is_empty() {
            let _: Result<i64, _> = c.del(keys).await;
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let _ = c.quit().await;
}
