//! PostgreSQL URLs: parsed once, never shown with their password.

use std::fmt;
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use switchyard_core::{Error, Result};

/// What a PostgreSQL URL looks like, for messages.
const USAGE: &str = "postgres://user:password@host:5432/database (or postgresql://; \
                     ?sslmode=require for TLS)";

/// Whether `url` names a PostgreSQL server: its scheme is `postgres://` or `postgresql://`
/// (in any case).
pub fn is_postgres_url(url: &str) -> bool {
    let scheme = url
        .trim()
        .split_once("://")
        .map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql")
}

/// A parsed `postgres://` or `postgresql://` URL.
///
/// sqlx's own options print the password in `Debug`; this type never does: `Display` and
/// `Debug` show [`redact`]ed text, and so does every error it returns.
#[derive(Clone)]
pub struct PostgresUrl {
    options: PgConnectOptions,
    schema: Option<String>,
    redacted: String,
}

impl PostgresUrl {
    /// Parses `url`. `setting` names the option it came from (`url`, `--postgres`, …): every
    /// error is [`Error::Config`] under that key, says what to write instead, and never holds
    /// the password.
    pub fn parse(url: &str, setting: &str) -> Result<Self> {
        let url = url.trim();
        let redacted = redact(url);
        if !is_postgres_url(url) {
            let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
            return Err(Error::config(
                setting,
                format!("scheme {scheme:?} is not PostgreSQL: use {USAGE}"),
            ));
        }
        // `schema=` is ours (the adapters' schema, checked when they open); sqlx would ignore it
        // with a warning.
        let (url, schema) = take_schema(url);
        let options = PgConnectOptions::from_str(&url).map_err(|e| {
            Error::config(
                setting,
                format!(
                    "unusable PostgreSQL URL {redacted}: {}; expected {USAGE}",
                    scrub(&e.to_string(), &url)
                ),
            )
        })?;
        Ok(Self {
            options,
            schema,
            redacted,
        })
    }

    /// The schema the URL names with `?schema=NAME`, if any: where the adapters opened on this
    /// URL keep their tables unless their options name another.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// sqlx's connect options for the URL.
    pub fn connect_options(&self) -> &PgConnectOptions {
        &self.options
    }

    /// The URL with its password replaced by `***`, for messages and logs.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PostgresUrl").field(&self.redacted).finish()
    }
}

/// `url` without its `schema=` query parameter, and that parameter's value.
fn take_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((key, value)) if key.eq_ignore_ascii_case("schema") => {
                schema = Some(value.to_string());
                false
            }
            _ => true,
        })
        .collect();
    if kept.is_empty() {
        (base.to_string(), schema)
    } else {
        (format!("{base}?{}", kept.join("&")), schema)
    }
}

/// `url` with its password replaced by `***`: the one of a `user:password@` part and the value
/// of a `password=` query parameter. Anything that does not parse as `scheme://…@host` keeps only
/// what follows its last `@`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_string(),
        };
    };
    // The authority ends at the first '/', '?' or '#'; its userinfo at the last '@' within it.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    format!("{scheme}://{authority}{}", redact_query(tail))
}

/// The `password=` parameters of a path-and-query tail, with their values replaced.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// `details` with every password of `url` (raw and percent-decoded) replaced by `***`.
fn scrub(details: &str, url: &str) -> String {
    let mut secrets = Vec::new();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some((userinfo, _)) = rest[..end].rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
    {
        secrets.push(password.to_string());
    }
    if let Some((_, query)) = rest.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=')
                && key.eq_ignore_ascii_case("password")
            {
                secrets.push(value.to_string());
            }
        }
    }
    let mut out = details.to_string();
    for secret in secrets.into_iter().filter(|s| !s.is_empty()) {
        out = out.replace(&secret, "***");
        if let Ok(decoded) = sqlx_percent_decode(&secret)
            && !decoded.is_empty()
        {
            out = out.replace(&decoded, "***");
        }
    }
    out
}

/// Percent-decodes `s` (the URL's password as sqlx will use it).
fn sqlx_percent_decode(s: &str) -> std::result::Result<String, ()> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3).ok_or(())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| ())?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_schemes_parse_and_keep_their_parts() {
        for given in [
            "postgres://alice:s3cret@db.example:6543/app?sslmode=disable",
            "postgresql://alice:s3cret@db.example:6543/app?sslmode=disable",
            "POSTGRES://alice:s3cret@db.example:6543/app?sslmode=disable",
        ] {
            let url = PostgresUrl::parse(given, "url").expect(given);
            let options = url.connect_options();
            assert_eq!(options.get_host(), "db.example", "{given}");
            assert_eq!(options.get_port(), 6543, "{given}");
            assert_eq!(options.get_username(), "alice", "{given}");
            assert_eq!(options.get_database(), Some("app"), "{given}");
            assert!(!url.to_string().contains("s3cret"), "{url}");
            assert!(!format!("{url:?}").contains("s3cret"), "{url:?}");
        }
        let with_schema =
            PostgresUrl::parse("postgres://h/db?schema=agents&sslmode=disable", "url")
                .expect("schema parameter");
        assert_eq!(with_schema.schema(), Some("agents"));
        assert_eq!(with_schema.connect_options().get_database(), Some("db"));
        assert_eq!(
            PostgresUrl::parse("postgres://h/db", "url")
                .expect("plain")
                .schema(),
            None
        );
        assert!(is_postgres_url("postgresql://h/db"));
        assert!(is_postgres_url(" Postgres://h/db"));
        assert!(!is_postgres_url("redis://h"));
        assert!(!is_postgres_url("postgres:h"));
    }

    #[test]
    fn display_and_debug_never_show_the_password() {
        let url = PostgresUrl::parse(
            "postgres://u:p%40ss@h:5432/db?password=other&application_name=x",
            "url",
        )
        .expect("valid URL");
        assert_eq!(
            url.to_string(),
            "postgres://u:***@h:5432/db?password=***&application_name=x"
        );
        assert_eq!(
            format!("{url:?}"),
            "PostgresUrl(\"postgres://u:***@h:5432/db?password=***&application_name=x\")"
        );
    }

    #[test]
    fn refusals_are_config_errors_under_the_setting_without_the_password() {
        for (url, says) in [
            ("mysql://user:s3cret@localhost/db", "\"mysql\""),
            ("redis://user:s3cret@localhost", "\"redis\""),
            ("postgres://user:s3cret@host:notaport/db", "unusable"),
            ("postgres://user:s3cret@h/db?sslmode=sometimes", "unusable"),
            ("", "\"\""),
        ] {
            match PostgresUrl::parse(url, "event_store.url") {
                Err(Error::Config { key, reason }) => {
                    assert_eq!(key, "event_store.url");
                    assert!(reason.contains(says), "{url}: {reason}");
                    assert!(!reason.contains("s3cret"), "{url}: {reason}");
                    assert!(
                        reason.contains("postgres://"),
                        "says what to write: {reason}"
                    );
                }
                other => panic!("{url}: expected a config error, got {other:?}"),
            }
        }
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("postgres://u:p@h:1/db"), "postgres://u:***@h:1/db");
        assert_eq!(redact("postgres://:p@h"), "postgres://:***@h");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact("postgres://u:p@ss@h?x=a@b"),
            "postgres://u:***@h?x=a@b"
        );
        assert_eq!(
            redact("postgres://h/db?user=u&PASSWORD=p"),
            "postgres://h/db?user=u&PASSWORD=***"
        );
        assert_eq!(redact("postgres://h:1"), "postgres://h:1");
        assert_eq!(redact("junk:p@h"), "***@h");
        assert_eq!(
            scrub("bad p%40ss and p@ss", "postgres://u:p%40ss@h"),
            "bad *** and ***"
        );
    }
}
