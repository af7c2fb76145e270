//! Redis URLs: which server topology a URL names, its fred config, and its redacted form.
//!
//! Accepted schemes (ADR 0172):
//!
//! | scheme | topology |
//! |---|---|
//! | `redis://[user:password@]host[:port][/db]` (`rediss://` = TLS via rustls) | standalone |
//! | `redis-sentinel://…` (`rediss-sentinel://`) | a standalone primary behind sentinels |
//! | `redis-cluster://[user:password@]host:port?node=host:port&…` (`rediss-cluster://`) | Redis Cluster |
//!
//! Every message this module writes names the URL by its [`redact`]ed form, and fred's own parse
//! messages are scrubbed of the password before they are quoted.

use fred::prelude::Config;
use switchyard_core::{Error, Result};

/// The server topology a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topology {
    /// One server (`redis://`, `rediss://`).
    Standalone,
    /// A primary found through sentinels (`redis-sentinel://`, `rediss-sentinel://`).
    Sentinel,
    /// A Redis Cluster (`redis-cluster://`, `rediss-cluster://`).
    Cluster,
}

impl Topology {
    /// The topology of `url` by its scheme alone; `None` for a scheme that is not a Redis one.
    pub fn of(url: &str) -> Option<Self> {
        match url.split_once("://").map_or("", |(scheme, _)| scheme) {
            "redis" | "rediss" => Some(Topology::Standalone),
            "redis-sentinel" | "rediss-sentinel" => Some(Topology::Sentinel),
            "redis-cluster" | "rediss-cluster" => Some(Topology::Cluster),
            _ => None,
        }
    }

    fn schemes(self) -> &'static str {
        match self {
            Topology::Standalone => "redis://[user:password@]host[:port][/db] (rediss:// for TLS)",
            Topology::Sentinel => {
                "redis-sentinel://[user:password@]host[:port][/db]?sentinelServiceName=… (rediss-sentinel:// for TLS)"
            }
            Topology::Cluster => {
                "redis-cluster://[user:password@]host:port?node=host:port&… (rediss-cluster:// for TLS)"
            }
        }
    }
}

/// A parsed Redis URL.
#[derive(Debug, Clone)]
pub struct RedisUrl {
    config: Config,
    topology: Topology,
    redacted: String,
}

impl RedisUrl {
    /// Parses `url` for an adapter that supports the topologies in `allowed`. `setting` names the
    /// option the URL came from (`url`, `redis_url`, …): every error is
    /// [`Error::Config`] under that key, says what to write instead, and never holds the password.
    pub fn parse(url: &str, setting: &str, allowed: &[Topology]) -> Result<Self> {
        let usage = || {
            allowed
                .iter()
                .map(|t| t.schemes())
                .collect::<Vec<_>>()
                .join(", or ")
        };
        let redacted = redact(url);
        let Some(topology) = Topology::of(url) else {
            let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
            return Err(Error::config(
                setting,
                format!("scheme {scheme:?} is not supported: use {}", usage()),
            ));
        };
        if !allowed.contains(&topology) {
            return Err(Error::config(
                setting,
                format!(
                    "{topology:?} URLs are not supported by this adapter ({redacted}): use {}",
                    usage()
                ),
            ));
        }
        let parsed = match topology {
            Topology::Standalone => Config::from_url_centralized(url),
            Topology::Sentinel => Config::from_url_sentinel(url),
            Topology::Cluster => Config::from_url_clustered(url),
        };
        let config = parsed.map_err(|e| {
            Error::config(
                setting,
                format!(
                    "unusable Redis URL {redacted}: {}; expected {}",
                    scrub(e.details(), url),
                    usage()
                ),
            )
        })?;
        Ok(Self {
            config,
            topology,
            redacted,
        })
    }

    /// The topology the URL names.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// Whether the URL names a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.topology == Topology::Cluster
    }

    /// Whether the connection uses TLS (`rediss…://`).
    pub fn uses_tls(&self) -> bool {
        self.config.tls.is_some()
    }

    /// fred's config for the URL.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The URL with its password replaced by `***`, for messages and logs.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }
}

/// `url` with the password of its `user:password@` part replaced by `***` (and a bare
/// `password@` too), for messages and logs. Anything that does not parse as `scheme://…@host`
/// is returned with everything before the last `@` replaced.
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
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// `details` with any occurrence of the URL's password (raw and percent-decoded) replaced.
fn scrub(details: &str, url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some((userinfo, _)) = rest[..end].rsplit_once('@') else {
        return details.to_string();
    };
    let password = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
    if password.is_empty() {
        return details.to_string();
    }
    let mut out = details.replace(password, "***");
    if let Ok(decoded) = percent_encoding::percent_decode_str(password).decode_utf8()
        && !decoded.is_empty()
    {
        out = out.replace(decoded.as_ref(), "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fred::types::config::ServerConfig;

    const ALL: &[Topology] = &[Topology::Standalone, Topology::Sentinel, Topology::Cluster];

    #[test]
    fn standalone_urls_carry_tls_acl_and_db() {
        let url = RedisUrl::parse("rediss://alice:s3cret@cache.example:6380/2", "url", ALL)
            .expect("valid URL");
        assert_eq!(url.topology(), Topology::Standalone);
        assert!(url.uses_tls(), "rediss:// turns TLS on");
        assert_eq!(url.config().username.as_deref(), Some("alice"));
        assert_eq!(url.config().password.as_deref(), Some("s3cret"));
        assert_eq!(url.config().database, Some(2));
        assert_eq!(url.redacted(), "rediss://alice:***@cache.example:6380/2");

        let plain = RedisUrl::parse("redis://127.0.0.1", "url", ALL).expect("valid URL");
        assert!(!plain.uses_tls());
        assert_eq!(plain.config().database, None);
        assert_eq!(plain.redacted(), "redis://127.0.0.1");
    }

    #[test]
    fn cluster_urls_keep_every_seed_node() {
        let url = RedisUrl::parse(
            "rediss-cluster://u:pw@10.0.0.1:7000?node=10.0.0.2:7001&node=10.0.0.3:7002",
            "url",
            ALL,
        )
        .expect("valid cluster URL");
        assert!(url.is_cluster());
        assert!(url.uses_tls(), "rediss-cluster:// turns TLS on");
        match &url.config().server {
            ServerConfig::Clustered { hosts, .. } => assert_eq!(hosts.len(), 3, "{hosts:?}"),
            other => panic!("not a clustered config: {other:?}"),
        }
        assert_eq!(
            url.redacted(),
            "rediss-cluster://u:***@10.0.0.1:7000?node=10.0.0.2:7001&node=10.0.0.3:7002"
        );
    }

    #[test]
    fn refusals_are_config_errors_under_the_setting_without_the_password() {
        let only = [Topology::Standalone, Topology::Cluster];
        for (url, says) in [
            ("http://user:s3cret@localhost", "\"http\""),
            ("redis-sentinel://user:s3cret@x:1", "Sentinel"),
            ("redis://user:s3cret@host:notaport", "unusable"),
            ("redis-cluster://user:s3cret@host:notaport", "unusable"),
            ("redis://:s3cret@[::1", "unusable"),
        ] {
            match RedisUrl::parse(url, "stream_bridge.redis_url", &only) {
                Err(Error::Config { key, reason }) => {
                    assert_eq!(key, "stream_bridge.redis_url");
                    assert!(reason.contains(says), "{url}: {reason}");
                    assert!(!reason.contains("s3cret"), "{url}: {reason}");
                    assert!(reason.contains("redis://"), "says what to write: {reason}");
                }
                other => panic!("{url}: expected a config error, got {other:?}"),
            }
        }
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("redis://u:p@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:p@h"), "redis://:***@h");
        assert_eq!(redact("redis://p@h"), "redis://:***@h");
        assert_eq!(redact("redis://u:p@ss@h?x=a@b"), "redis://u:***@h?x=a@b");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("junk:p@h"), "***@h");
        assert_eq!(
            scrub("bad p%40ss and p@ss", "redis://u:p%40ss@h"),
            "bad *** and ***"
        );
    }
}
