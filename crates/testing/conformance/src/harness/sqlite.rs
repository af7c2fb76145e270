use std::path::{Path, PathBuf};

/// A SQLite database file in its own temporary directory (WAL needs a real file and its `-wal` and
/// `-shm` siblings). The directory is removed when this value drops.
#[derive(Debug)]
pub struct TempSqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl TempSqlite {
    /// A new, not yet created, database path.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("switchyard-sqlite-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for SQLite: {e}"));
        let path = dir.path().join("test.db");
        Self { _dir: dir, path }
    }

    /// The database file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A `sqlite://` URL for the file.
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }
}

impl Default for TempSqlite {
    fn default() -> Self {
        Self::new()
    }
}
