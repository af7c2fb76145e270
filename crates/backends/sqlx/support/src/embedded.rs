//! Migrations embedded in the binary without sqlx's `migrate!` macro (ADR 0346).
//!
//! `migrate!` needs sqlx's `macros` feature, which builds sqlx's drivers a second time for the
//! compiler host; these crates use no other sqlx macro. [`embed_migrations!`](crate::embed_migrations)
//! embeds the listed files, and [`embedded_migrator`] builds the same [`Migrator`] `migrate!`
//! would: version and description from each file name (`<version>_<description>.sql`, `_` read
//! as a space), the SHA-384 checksum of the SQL, `-- no-transaction` honoured. So databases
//! migrated by earlier builds see the same checksums.

use std::path::Path;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use std::future::Future;
use std::pin::Pin;
use switchyard_core::{Error, Result};

/// One migration file: its name and its SQL.
pub type EmbeddedMigration = (&'static str, &'static str);

/// Embeds migration files of a directory of the calling crate.
///
/// As an expression, `embed_migrations!("migrations", "0001_events.sql", "0002_open_runs.sql")`
/// is a `&'static [EmbeddedMigration]`. As an item,
/// `embed_migrations!(const MIGRATIONS = "migrations", "0001_events.sql");` declares that
/// constant and a unit test, `every_migration_file_is_embedded`, that fails when a `.sql` file of
/// the directory is not listed (the form for an adapter; once per module).
#[macro_export]
macro_rules! embed_migrations {
    ($(#[$meta:meta])* const $name:ident = $dir:literal $(, $file:literal)+ $(,)?) => {
        $(#[$meta])*
        const $name: &[$crate::EmbeddedMigration] = $crate::embed_migrations!($dir $(, $file)+);

        #[cfg(test)]
        #[test]
        fn every_migration_file_is_embedded() {
            let unlisted = $crate::unlisted_migrations(env!("CARGO_MANIFEST_DIR"), $dir, $name);
            assert!(unlisted.is_empty(), "not in {}: {unlisted:?}", stringify!($name));
        }
    };
    ($dir:literal $(, $file:literal)+ $(,)?) => {
        &[$((
            $file,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file)),
        )),+]
    };
}

#[derive(Debug)]
struct Embedded(Vec<Migration>);

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<Vec<Migration>, BoxDynError>> + Send + 's>>
    {
        Box::pin(async move { Ok(self.0) })
    }
}

/// The [`Migrator`] of `files`, as sqlx's `migrate!` builds it from the same directory.
/// [`Error::Config`] for a file name that is not `<version>_<description>.sql`.
pub async fn embedded_migrator(files: &[EmbeddedMigration]) -> Result<Migrator> {
    let mut migrations = Vec::with_capacity(files.len());
    for (name, sql) in files {
        let bad = || {
            Error::config(
                "migrations",
                format!("{name:?} is not named <version>_<description>.sql"),
            )
        };
        let (version, rest) = name.split_once('_').ok_or_else(bad)?;
        let version: i64 = version.parse().map_err(|_| bad())?;
        if !rest.ends_with(".sql") {
            return Err(bad());
        }
        let kind = MigrationType::from_filename(name);
        let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
        let no_tx = sql.starts_with("-- no-transaction");
        migrations.push(Migration::new(
            version,
            description.into(),
            kind,
            (*sql).into(),
            no_tx,
        ));
    }
    Migrator::new(Embedded(migrations))
        .await
        .map_err(|e| Error::config("migrations", e.to_string()))
}

/// The `.sql` files of the directory `dir` of the crate at `manifest_dir` that `files` does not
/// list, for each adapter's test that its list is whole:
/// `unlisted_migrations(env!("CARGO_MANIFEST_DIR"), "migrations", MIGRATIONS)` is empty.
pub fn unlisted_migrations(
    manifest_dir: &str,
    dir: &str,
    files: &[EmbeddedMigration],
) -> Vec<String> {
    let dir = Path::new(manifest_dir).join(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![format!("{} cannot be read", dir.display())];
    };
    let mut missing: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".sql") && !files.iter().any(|(f, _)| f == n))
        .collect();
    missing.sort();
    missing
}
