//! Migrations, with the one retry policy of every SQLite adapter (ADR 0176).

use std::time::Duration;

use sqlx::SqliteConnection;
use sqlx::migrate::{MigrateError, Migrator};
use switchyard_core::{Error, Result};
use switchyard_sqlx_support::{EmbeddedMigration, embedded_migrator};

/// How many times [`migrate`] runs the migrator before giving up (ADR 0176).
pub const MIGRATE_ATTEMPTS: u32 = 10;

/// Pause before retry `n` (1-based): 20 ms × n, so ten attempts wait at most 0.9 s in all.
fn pause(attempt: u32) -> Duration {
    Duration::from_millis(20 * u64::from(attempt))
}

/// The [`Migrator`] of an adapter's embedded `files` for a database file other adapters may
/// share: the versions they recorded in `_sqlx_migrations` are not this adapter's to check
/// (ADR 0346).
pub async fn shared_file_migrator(files: &[EmbeddedMigration]) -> Result<Migrator> {
    let mut migrator = embedded_migrator(files).await?;
    migrator.set_ignore_missing(true);
    Ok(migrator)
}

/// Runs `migrator` on the writer connection of the file `shown`.
///
/// Two processes opening a new file at once race to record the same migration: the loser's
/// statement fails (a unique clash on `_sqlx_migrations`, or busy) and finds it applied on the
/// next round. Such database errors are retried up to [`MIGRATE_ATTEMPTS`] times; they become
/// [`Error::Unavailable`] after the last. A migration that is not the race (a changed or
/// unknown applied version, a dirty or broken migration set) is never retried and fails at once
/// with [`Error::Config`]: the file belongs to another build.
///
/// Adapters that share one file (the event store and the fleet do) share its
/// `_sqlx_migrations` table; each must build its migrator with [`shared_file_migrator`] (or
/// `set_ignore_missing(true)`), and their version ranges must not overlap.
pub async fn migrate(
    writer: &mut SqliteConnection,
    migrator: &Migrator,
    shown: &str,
) -> Result<()> {
    let mut attempt = 1;
    loop {
        match migrator.run_direct(&mut *writer).await {
            Ok(()) => return Ok(()),
            Err(e) if !is_race(&e) => {
                return Err(Error::config(
                    "path",
                    format!(
                        "{shown}: its schema does not match this build ({e}); \
                         open it with the build that wrote it or use another file"
                    ),
                ));
            }
            Err(_) if attempt < MIGRATE_ATTEMPTS => {
                tokio::time::sleep(pause(attempt)).await;
                attempt += 1;
            }
            Err(e) => return Err(Error::unavailable("migrate", shown.to_string(), e)),
        }
    }
}

/// Whether a failed migration can be another process migrating at the same time.
fn is_race(e: &MigrateError) -> bool {
    matches!(
        e,
        MigrateError::Execute(_) | MigrateError::ExecuteMigration(..)
    )
}
