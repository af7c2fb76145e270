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

use crate::backend;

/// A backend URL, checked by the backend its scheme names (see [`crate::backend`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendUrl {
    backend: &'static str,
    url: String,
    path: Option<PathBuf>,
}

impl BackendUrl {
    /// Parses `url`; `key` names the setting in errors (e.g. `SWITCHYARD_EVENT_STORE_URL`).
    ///
    /// The built-in schemes: `memory://` (in-process, nothing survives the process);
    /// `sqlite://PATH` or `sqlite:PATH` (sqlx's form; a SQLite file, created if absent, a
    /// relative path resolved against the working directory when the store opens and logged,
    /// ADR 0254); `redis://…` or `rediss://…` (TLS) with optional ACL user, password and database
    /// index, or `redis-cluster://host1:port?node=host2:port&node=…` (seed nodes of a Redis
    /// Cluster, fred's form); `postgres://…` or `postgresql://…` (any case) with the options
    /// sqlx reads (`sslmode`, `application_name`, …) and `schema=NAME` for the adapters'
    /// schema. A backend added with [`register`](crate::backend::register) brings its own.
    pub fn parse(key: &str, url: &str) -> Result<Self> {
        let url = url.trim();
        let (scheme, rest, opaque) = match url.split_once("://") {
            Some((scheme, rest)) => (scheme, rest, false),
            None => match url.split_once(':') {
                Some((scheme, rest)) => (scheme, rest, true),
                None => (url, "", true),
            },
        };
        let backend = backend::for_scheme(scheme).filter(|b| !opaque || b.accepts_opaque_form());
        match backend {
            Some(backend) => backend.parse(key, url, rest),
            None if opaque => Err(Error::config(
                key,
                format!(
                    "{} is not a backend URL: use one of {} (e.g. sqlite://switchyard.db, \
                     redis://HOST:PORT, postgres://USER@HOST:PORT/DATABASE)",
                    redact(url),
                    backend::known_schemes()
                ),
            )),
            None => Err(Error::config(
                key,
                format!(
                    "unknown scheme {:?} in {}: use one of {}",
                    scheme.to_ascii_lowercase(),
                    redact(url),
                    backend::known_schemes()
                ),
            )),
        }
    }

    /// A URL of `backend` kept as given: what [`Backend::parse`](crate::backend::Backend::parse)
    /// returns for a backend that reads its URL itself when it opens.
    pub fn new(backend: &'static str, url: &str) -> Self {
        BackendUrl {
            backend,
            url: url.to_string(),
            path: None,
        }
    }

    /// `memory://`.
    pub fn memory() -> Self {
        BackendUrl::new("memory", "memory://")
    }

    /// The SQLite file at `path`.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        BackendUrl {
            backend: "sqlite",
            url: format!("sqlite://{}", path.display()),
            path: Some(path),
        }
    }

    /// The name of the backend that answers it (`"memory"`, `"sqlite"`, `"redis"`,
    /// `"postgres"`, or a registered backend's).
    pub fn kind(&self) -> &'static str {
        self.backend
    }

    /// True for `memory://`.
    pub fn is_memory(&self) -> bool {
        self.backend == "memory"
    }

    /// The URL (for SQLite, `sqlite://PATH` whichever form was given). It may carry a password:
    /// never log it as it is.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The file of a SQLite URL.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(
            BackendUrl::parse("k", "memory://").expect("memory"),
            BackendUrl::memory()
        );
        assert_eq!(
            BackendUrl::parse("k", "sqlite:///tmp/x.db").expect("sqlite"),
            BackendUrl::sqlite("/tmp/x.db")
        );
        assert_eq!(
            BackendUrl::parse("k", "sqlite://rel.db").expect("sqlite"),
            BackendUrl::sqlite("rel.db")
        );
        for sqlx_form in ["sqlite:rel.db", "SQLITE:rel.db", "sqlite:rel.db?mode=rwc"] {
            let url = BackendUrl::parse("k", sqlx_form).expect(sqlx_form);
            assert_eq!(url, BackendUrl::sqlite("rel.db"));
            assert_eq!(url.path(), Some(std::path::Path::new("rel.db")));
        }
        assert_eq!(
            BackendUrl::parse("k", "sqlite:/abs/x.db").expect("sqlite"),
            BackendUrl::sqlite("/abs/x.db")
        );
        for redis in ["rediss://user:pw@h:6380/2", "redis-cluster://a:1?node=b:2"] {
            let url = BackendUrl::parse("k", redis).expect(redis);
            assert_eq!((url.kind(), url.url()), ("redis", redis));
        }
        for pg in [
            "postgres://u:pw@db:5432/app",
            "postgresql://db/app?sslmode=require",
            "PostgreSQL://db/app?schema=agents",
        ] {
            assert_eq!(
                BackendUrl::parse("k", pg).expect(pg),
                BackendUrl::new("postgres", pg)
            );
        }
        // Only SQLite answers the form without `//`.
        assert!(BackendUrl::parse("k", "redis:h:6379").is_err());
        assert!(BackendUrl::parse("k", "memory:").is_err());
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
