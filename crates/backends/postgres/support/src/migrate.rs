//! Migrations: embedded, re-runnable, inside the adapter's schema, recorded in a table of the
//! adapter's own (ADR 0221).
//!
//! sqlx's own runner records every migration of a database in one `_sqlx_migrations` table,
//! where two adapters (or another application) would have to share version numbers and could
//! mistake each other's records for their own. Here each adapter names its record table
//! (`store_migrations`, `bridge_migrations`, …) and [`migrate`] touches nothing else: it creates
//! the schema if it is missing, the record table if it is missing, and runs the adapter's
//! pending migrations, all in one transaction under an advisory lock of the schema, so
//! processes opening at once apply each migration exactly once.

use std::collections::HashMap;

use sqlx::migrate::Migrator;
use sqlx::postgres::PgPool;
use sqlx::{Acquire, Executor, Row};
use switchyard_core::{Error, Result};

use crate::error::error;
use crate::pool::Schema;

/// The first key of the advisory lock [`migrate`] holds (the second is the schema's hash):
/// the ASCII bytes of "swyd", so it is recognisable in `pg_locks`.
const LOCK_CLASS: i32 = 0x7377_7964;

/// Applies `migrator`'s pending migrations to `schema` for the adapter `what`, recording them in
/// `schema.table`.
///
/// In one transaction, holding an advisory lock of the schema: `CREATE SCHEMA IF NOT EXISTS`,
/// `CREATE TABLE IF NOT EXISTS` for the record table, then every migration whose version is not
/// recorded, in version order, each recorded with its checksum. Re-running it is a no-op.
///
/// Fails with [`Error::Config`] when a recorded migration's checksum differs from this build's
/// (the schema was migrated by a different build of the adapter), when the table records a
/// version this build does not know (a newer build migrated it: run that build, or use another
/// schema), when `table` is not a plain lowercase name, or when a migration fails; with
/// [`Error::Unavailable`] when the server cannot be reached.
pub async fn migrate(
    pool: &PgPool,
    schema: &Schema,
    table: &str,
    migrator: &Migrator,
    what: &'static str,
) -> Result<()> {
    // The record table's name follows the schema's rules: it goes into SQL unquoted.
    let table = Schema::new(table)
        .map_err(|_| Error::config("table", format!("{what}: {table:?} is not a plain name")))?;
    let shown = format!("{schema}.{table}");
    let fail = |e: sqlx::Error| error(what, "migrate", &shown, e);
    let mut conn = pool.acquire().await.map_err(fail)?;
    let mut tx = conn.begin().await.map_err(fail)?;
    // A pool with a statement timeout (the facade's `command_timeout_ms`) must still wait for
    // another process's migration behind the advisory lock, and a long migration must finish.
    (&mut *tx)
        .execute("SET LOCAL statement_timeout = 0")
        .await
        .map_err(fail)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(LOCK_CLASS)
        .bind(schema.as_str())
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
    let setup = format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         SET LOCAL search_path TO {schema};
         CREATE TABLE IF NOT EXISTS {schema}.{table} (
             version BIGINT PRIMARY KEY,
             description TEXT NOT NULL,
             checksum BYTEA NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );"
    );
    // `Executor::execute` on a `&str` runs it with the simple protocol (several statements), as
    // sqlx's own migrator does. `raw_sql(..).execute(..)` would too, but its future is `Send`
    // for one lifetime only, which makes every future that opens an adapter unusable in
    // `tokio::spawn`.
    (&mut *tx).execute(setup.as_str()).await.map_err(fail)?;
    let applied: HashMap<i64, Vec<u8>> =
        sqlx::query(&format!("SELECT version, checksum FROM {schema}.{table}"))
            .fetch_all(&mut *tx)
            .await
            .map_err(fail)?
            .into_iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(fail)?;
    let ours: Vec<_> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .collect();
    if let Some(unknown) = applied
        .keys()
        .filter(|v| !ours.iter().any(|m| m.version == **v))
        .max()
    {
        return Err(Error::config(
            "schema",
            format!(
                "{shown} records migration {unknown}, which this build of {what} does not know: \
                 a newer build migrated the schema; run that build, or give this one another schema"
            ),
        ));
    }
    for migration in ours {
        match applied.get(&migration.version) {
            Some(checksum) if checksum.as_slice() == migration.checksum.as_ref() => continue,
            Some(_) => {
                return Err(Error::config(
                    "schema",
                    format!(
                        "{shown}: migration {} ({}) was applied with other contents than this \
                         build's; the schema belongs to another build of {what}",
                        migration.version, migration.description
                    ),
                ));
            }
            None => {}
        }
        (&mut *tx).execute(&*migration.sql).await.map_err(|e| {
            match error(what, "migrate", &shown, e) {
                Error::Rejected { message, .. } => Error::config(
                    "schema",
                    format!(
                        "{shown}: migration {} ({}) failed: {message}; the schema holds objects \
                         this build does not expect",
                        migration.version, migration.description
                    ),
                ),
                other => other,
            }
        })?;
        sqlx::query(&format!(
            "INSERT INTO {schema}.{table} (version, description, checksum) VALUES ($1, $2, $3)"
        ))
        .bind(migration.version)
        .bind(migration.description.as_ref())
        .bind(migration.checksum.as_ref())
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
    }
    tx.commit().await.map_err(fail)
}
