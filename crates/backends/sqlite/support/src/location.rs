//! Where the database is: a file, from a path or a URL.

use std::fmt;
use std::path::{Path, PathBuf};

use switchyard_core::{Error, Result};

/// What [`open`](crate::open) does when the file does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Create {
    /// Fail with [`Error::Config`]: the file must exist (an operator command that should not
    /// leave an empty database behind after a typo).
    Never,
    /// Create the file; its directory must exist.
    File,
    /// Create the file and any missing parent directories. The default.
    #[default]
    FileAndParents,
}

/// A database file, checked to be one: SQLite's in-memory databases are private to each
/// connection, so a read pool beside the writer would see none of its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    path: PathBuf,
}

impl Location {
    /// A file path as given. The empty path and anything naming an in-memory database
    /// (`:memory:`, `file::memory:…`, `mode=memory`) are refused with [`Error::Config`] naming
    /// `what` (the adapter).
    pub fn path(path: impl AsRef<Path>, what: &str) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let shown = path.to_string_lossy();
        if shown.is_empty() || shown.contains(":memory:") || shown.contains("mode=memory") {
            return Err(Error::config(
                "path",
                format!(
                    "{what} needs a database file (WAL and a read pool), not {shown:?}; \
                     use a temporary file for tests"
                ),
            ));
        }
        Ok(Location { path })
    }

    /// `sqlite://PATH`, `sqlite:PATH`, `file://PATH`, `file:PATH` or a bare path; a `?query`
    /// is ignored (the options are [`OpenOptions`](crate::OpenOptions)). `sqlite:///abs/x.db` is
    /// the absolute `/abs/x.db`, `sqlite://rel.db` the relative `rel.db`.
    pub fn url(url: &str, what: &str) -> Result<Self> {
        let url = url.trim();
        let rest = ["sqlite://", "file://", "sqlite:", "file:"]
            .iter()
            .find_map(|scheme| strip_prefix_ignore_case(url, scheme))
            .unwrap_or(url);
        // A memory URL keeps its query (`file::memory:?cache=shared`) so that it is refused.
        let path = if rest.contains(":memory:") || rest.contains("mode=memory") {
            rest
        } else {
            rest.split('?').next().unwrap_or_default()
        };
        Self::path(path, what)
    }

    /// The file.
    pub fn as_path(&self) -> &Path {
        &self.path
    }

    /// The file, owned.
    pub fn into_path(self) -> PathBuf {
        self.path
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.path.display().fmt(f)
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        for (given, want) in [
            ("sqlite:///var/lib/x.db", "/var/lib/x.db"),
            ("sqlite://rel.db", "rel.db"),
            ("SQLITE://rel.db?mode=rwc", "rel.db"),
            ("sqlite:rel.db", "rel.db"),
            ("file:///tmp/a.db", "/tmp/a.db"),
            ("plain/dir/a.db", "plain/dir/a.db"),
        ] {
            let loc = Location::url(given, "T").expect(given);
            assert_eq!(loc.as_path(), Path::new(want), "{given}");
        }
    }

    #[test]
    fn memory_and_empty_are_refused_as_config() {
        for bad in [
            "",
            "sqlite://",
            ":memory:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "file::memory:?cache=shared",
            "file:x.db?mode=memory",
        ] {
            let err = Location::url(bad, "TestAdapter").expect_err(bad);
            assert!(matches!(err, Error::Config { .. }), "{bad}: {err:?}");
            assert!(err.to_string().contains("TestAdapter"), "{bad}: {err}");
        }
    }
}
