//! `sqlite://PATH` and sqlx's `sqlite:PATH`: the event store and the fleet in one SQLite file
//! (feature `sqlite`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_core::{Error, Result};

use super::{Backend, async_trait};
use crate::cache::CacheSettings;
use crate::options::OpenOptions;
use crate::url::BackendUrl;

/// `switchyard-store-sqlite` and `switchyard-fleet-sqlite`.
#[derive(Debug)]
pub(super) struct Sqlite;

#[async_trait]
impl Backend for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["sqlite"]
    }

    /// The file of the URL, query parameters dropped.
    fn parse(&self, key: &str, _url: &str, rest: &str) -> Result<BackendUrl> {
        let path = rest.split('?').next().unwrap_or_default();
        if path.is_empty() {
            return Err(Error::config(
                key,
                "sqlite:// needs a file path, e.g. sqlite://switchyard.db, sqlite:switchyard.db or \
                 sqlite:///var/lib/switchyard.db",
            ));
        }
        if path == ":memory:" {
            return Err(Error::config(
                key,
                "an in-memory SQLite database lives in one connection and would lose data between \
                 them: use memory:// for a store that lives in the process",
            ));
        }
        Ok(BackendUrl::sqlite(PathBuf::from(path)))
    }

    fn accepts_opaque_form(&self) -> bool {
        true
    }

    #[allow(unused_variables)]
    async fn event_store(
        &self,
        url: &BackendUrl,
        key: &str,
        _opts: &OpenOptions,
    ) -> Result<Arc<dyn EventStore>> {
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(
            switchyard_store_sqlite::SqliteEventStore::open(resolve_path(key, url)?).await?,
        ));
        #[cfg(not(feature = "sqlite"))]
        Err(super::feature_missing(key, self.name()))
    }

    async fn stream_bridge(
        &self,
        _url: &BackendUrl,
        key: &str,
        _opts: &OpenOptions,
    ) -> Result<Arc<dyn StreamBridge>> {
        Err(Error::config(
            key,
            "the stream bridge has no SQLite adapter: use memory:// (one process) or redis:// (several)",
        ))
    }

    #[allow(unused_variables)]
    async fn fleet(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn FleetBackend>> {
        #[cfg(feature = "sqlite")]
        {
            let mut options = switchyard_fleet_sqlite::SqliteFleetOptions::default();
            if let Some(n) = opts.max_result_bytes {
                options.max_result_bytes = n;
            }
            Ok(Arc::new(
                switchyard_fleet_sqlite::SqliteFleetBackend::open_with(
                    resolve_path(key, url)?,
                    options,
                )
                .await?,
            ))
        }
        #[cfg(not(feature = "sqlite"))]
        Err(super::feature_missing(key, self.name()))
    }

    async fn checkpoint_cache(
        &self,
        _url: &BackendUrl,
        key: &str,
        _settings: &CacheSettings,
    ) -> Result<Arc<dyn CheckpointCache>> {
        Err(Error::config(
            key,
            "the checkpoint cache has no SQLite adapter: use memory:// or redis://",
        ))
    }
}

/// The URL's file made absolute against the working directory.
#[cfg(feature = "sqlite")]
fn resolve_path(key: &str, url: &BackendUrl) -> Result<PathBuf> {
    let path = url
        .path()
        .ok_or_else(|| Error::config(key, "a SQLite URL names a file"))?;
    resolve_sqlite_path(key, path)
}

/// A SQLite path made absolute against the working directory, logged so a relative URL's file can
/// be found (ADR 0254).
// Only the SQLite adapters open files; the unit tests check it in every build.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn resolve_sqlite_path(key: &str, path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| {
        Error::config(
            key,
            format!("{path:?} is relative and the working directory is unreadable ({e}); use an absolute path"),
        )
    })?;
    let absolute = cwd.join(path);
    tracing::info!(setting = key, path = %absolute.display(), "relative SQLite path resolved against the working directory");
    Ok(absolute)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_sqlite_paths_resolve_against_the_working_directory() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            resolve_sqlite_path("k", Path::new("rel.db")).expect("resolve"),
            cwd.join("rel.db")
        );
        assert_eq!(
            resolve_sqlite_path("k", Path::new("/abs/x.db")).expect("resolve"),
            PathBuf::from("/abs/x.db")
        );
    }
}
