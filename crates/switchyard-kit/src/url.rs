//! Backend URLs: which adapter a URL names, checked before anything connects.
//!
//! ```
//! use switchyard_kit::BackendUrl;
//!
//! // sqlx's form and the URL form name the same file.
//! assert_eq!(
//!     BackendUrl::parse("event_store", "sqlite:app.db")?,
//!     BackendUrl::parse("event_store", "sqlite://app.db")?,
//! );
//! assert_eq!(BackendUrl::parse("fleet", "redis-cluster://a:7000?node=b:7001")?.kind(), "redis");
//! assert_eq!(BackendUrl::parse("fleet", "postgresql://db/app?schema=agents")?.kind(), "postgres");
//! assert!(BackendUrl::parse("fleet", "mysql://db").is_err());
//! # Ok::<(), switchyard_kit::core::Error>(())
//! ```

use std::path::PathBuf;

use switchyard_core::{Error, Result};

/// A parsed backend URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendUrl {
    /// `memory://` — in-process, nothing survives the process.
    Memory,
    /// `sqlite://PATH` or `sqlite:PATH` (sqlx's form) — a SQLite file, created if absent
    /// (`sqlite:///abs/path.db`, `sqlite://relative.db`, `sqlite:relative.db`). A relative path
    /// is resolved against the working directory when the store opens, and the absolute path is
    /// logged (ADR 0254).
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// `redis://…` or `rediss://…` (TLS), with optional ACL user, password and database index, or
    /// `redis-cluster://host1:port?node=host2:port&node=…` (seed nodes of a Redis Cluster, fred's form).
    Redis {
        /// The URL as given, handed to the Redis adapters.
        url: String,
        /// True for a cluster URL.
        cluster: bool,
    },
    /// `postgres://…` or `postgresql://…` (any case), with the options sqlx reads (`sslmode`,
    /// `application_name`, …) and `schema=NAME` for the adapters' schema.
    Postgres {
        /// The URL as given, handed to the Postgres adapters.
        url: String,
    },
}

impl BackendUrl {
    /// Parses `url`; `key` names the setting in errors (e.g. `SWITCHYARD_EVENT_STORE_URL`).
    pub fn parse(key: &str, url: &str) -> Result<Self> {
        let url = url.trim();
        // sqlx's own form: `sqlite:PATH` (and `sqlite::memory:`), no `//`.
        if let Some(rest) = url
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("sqlite:"))
            .and_then(|_| url.get(7..))
            .filter(|rest| !rest.starts_with("//"))
        {
            return sqlite_path(key, rest);
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::config(
                key,
                format!(
                    "{url:?} is not a backend URL: use memory://, sqlite://PATH, redis://HOST:PORT, \
                     rediss://HOST:PORT, redis-cluster://HOST:PORT?node=HOST:PORT or \
                     postgres://USER@HOST:PORT/DATABASE"
                ),
            ));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "memory" => Ok(BackendUrl::Memory),
            "sqlite" => sqlite_path(key, rest),
            "redis" | "rediss" | "redis-cluster" | "rediss-cluster" => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                if host.split(['/', '?']).next().unwrap_or_default().is_empty() {
                    return Err(Error::config(key, format!("{url:?} names no host")));
                }
                Ok(BackendUrl::Redis {
                    url: url.to_string(),
                    cluster: scheme.ends_with("-cluster"),
                })
            }
            "postgres" | "postgresql" => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                if host.split(['/', '?']).next().unwrap_or_default().is_empty() {
                    return Err(Error::config(
                        key,
                        "a postgres:// URL needs a host: postgres://USER:PASSWORD@HOST:5432/DATABASE",
                    ));
                }
                Ok(BackendUrl::Postgres {
                    url: url.to_string(),
                })
            }
            other => Err(Error::config(
                key,
                format!(
                    "unknown scheme {other:?} in {}: use memory://, sqlite://, redis://, rediss://, \
                     redis-cluster:// or postgres://",
                    redact(url)
                ),
            )),
        }
    }

    /// The scheme's name, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            BackendUrl::Memory => "memory",
            BackendUrl::Sqlite { .. } => "sqlite",
            BackendUrl::Redis { .. } => "redis",
            BackendUrl::Postgres { .. } => "postgres",
        }
    }
}

/// `url` for messages: the password of a `user:password@` part and the value of a `password=`
/// query parameter replaced by `***`, and nothing else changed. A URL without a password is
/// shown as given: `mysql://app@db` stays `mysql://app@db`, so the message names what the user
/// wrote, not a password they never gave.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The authority ends at the first '/', '?' or '#'; its userinfo at the last '@' within it.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, password)) if !password.is_empty() => format!("{user}:***@{host}"),
            _ => authority.to_string(),
        },
        None => authority.to_string(),
    };
    format!("{scheme}://{authority}{}", redact_query(tail))
}

/// A path-and-query tail with the values of its `password=` parameters replaced by `***`.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if key.eq_ignore_ascii_case("password") && !value.is_empty() => {
                format!("{key}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// The file of a `sqlite:` URL (query parameters dropped).
fn sqlite_path(key: &str, rest: &str) -> Result<BackendUrl> {
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
    Ok(BackendUrl::Sqlite {
        path: PathBuf::from(path),
    })
}

/// A SQLite path made absolute against the working directory, logged so a relative URL's file can
/// be found (ADR 0254).
// Only the SQLite adapters open files; the unit tests check it in every build.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn resolve_sqlite_path(key: &str, path: &std::path::Path) -> Result<PathBuf> {
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

/// The error for a URL whose adapter was not compiled in.
pub(crate) fn feature_missing(key: &str, feature: &str, url: &BackendUrl) -> Error {
    Error::config(
        key,
        format!(
            "this build has no {} adapter: enable the `{feature}` feature of the `switchyard` crate \
             (or `full`), or use memory://",
            url.kind()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(
            BackendUrl::parse("k", "memory://").expect("memory"),
            BackendUrl::Memory
        );
        assert_eq!(
            BackendUrl::parse("k", "sqlite:///tmp/x.db").expect("sqlite"),
            BackendUrl::Sqlite {
                path: "/tmp/x.db".into()
            }
        );
        assert_eq!(
            BackendUrl::parse("k", "sqlite://rel.db").expect("sqlite"),
            BackendUrl::Sqlite {
                path: "rel.db".into()
            }
        );
        for sqlx_form in ["sqlite:rel.db", "SQLITE:rel.db", "sqlite:rel.db?mode=rwc"] {
            assert_eq!(
                BackendUrl::parse("k", sqlx_form).expect(sqlx_form),
                BackendUrl::Sqlite {
                    path: "rel.db".into()
                }
            );
        }
        assert_eq!(
            BackendUrl::parse("k", "sqlite:/abs/x.db").expect("sqlite"),
            BackendUrl::Sqlite {
                path: "/abs/x.db".into()
            }
        );
        assert!(matches!(
            BackendUrl::parse("k", "rediss://user:pw@h:6380/2").expect("redis"),
            BackendUrl::Redis { cluster: false, .. }
        ));
        assert!(matches!(
            BackendUrl::parse("k", "redis-cluster://a:1?node=b:2").expect("cluster"),
            BackendUrl::Redis { cluster: true, .. }
        ));
        for pg in [
            "postgres://u:pw@db:5432/app",
            "postgresql://db/app?sslmode=require",
            "PostgreSQL://db/app?schema=agents",
        ] {
            assert_eq!(
                BackendUrl::parse("k", pg).expect(pg),
                BackendUrl::Postgres { url: pg.into() }
            );
        }
    }

    #[test]
    fn relative_sqlite_paths_resolve_against_the_working_directory() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            resolve_sqlite_path("k", std::path::Path::new("rel.db")).expect("resolve"),
            cwd.join("rel.db")
        );
        assert_eq!(
            resolve_sqlite_path("k", std::path::Path::new("/abs/x.db")).expect("resolve"),
            std::path::PathBuf::from("/abs/x.db")
        );
    }

    #[test]
    fn redaction_masks_only_a_password_that_was_given() {
        for (given, shown) in [
            ("mysql://app@db:3306/x", "mysql://app@db:3306/x"),
            ("mysql://db/x", "mysql://db/x"),
            ("mysql://app:@db/x", "mysql://app:@db/x"),
            ("mysql://app:s3cret@db/x", "mysql://app:***@db/x"),
            ("mysql://:s3cret@db", "mysql://:***@db"),
            ("mysql://app:p@ss@db?x=a@b", "mysql://app:***@db?x=a@b"),
            (
                "mysql://db/x?user=app&password=s3cret",
                "mysql://db/x?user=app&password=***",
            ),
            ("mysql://db/x?password=", "mysql://db/x?password="),
            ("nonsense", "nonsense"),
        ] {
            assert_eq!(redact(given), shown, "{given}");
        }
        // The message of `--postgres mysql://app@db` names the URL as given.
        match BackendUrl::parse("postgres", "mysql://app@db:3306/x") {
            Err(Error::Config { key, reason }) => {
                assert_eq!(key, "postgres");
                assert!(reason.contains("in mysql://app@db:3306/x:"), "{reason}");
                assert!(!reason.contains("***"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_urls_name_the_setting_and_say_what_to_do() {
        for bad in [
            "mysql://u:s3cret@x",
            "nonsense",
            "sqlite://",
            "sqlite:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "redis://",
            "postgres://",
            "postgres:///db",
        ] {
            match BackendUrl::parse("SWITCHYARD_EVENT_STORE_URL", bad) {
                Err(Error::Config { key, reason }) => {
                    assert_eq!(key, "SWITCHYARD_EVENT_STORE_URL");
                    assert!(!reason.is_empty());
                    assert!(!reason.contains("s3cret"), "{reason}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
