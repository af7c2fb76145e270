//! Options of the `open_*_with` openers: key prefix, timeouts, pool size and retention, given in
//! code, as URL query parameters or as configuration keys (ADR 0254).
//!
//! The three spellings name the same settings:
//!
//! ```toml
//! [options.event_store]          # or ?command_timeout_ms=500&pool_size=8 on the URL
//! command_timeout_ms = 500
//! connect_timeout_ms = 2000
//! pool_size = 8
//! [options.stream_bridge]
//! retention = 1024               # events kept per run for Last-Event-ID replay
//! [options.fleet]
//! prefix = "staging:"
//! ```
//!
//! Every field left out keeps the adapter's default. The Redis adapters read the prefix, the
//! timeouts and the pool size; the PostgreSQL adapters read the timeouts and the pool size, and
//! refuse a prefix (their tables live in the URL's `?schema=`, ADR 0345); SQLite and memory have
//! no key space and no network. Every stream bridge reads `retention`. In [`open_event_store_with`] and its
//! siblings, a field set in code wins over the same URL parameter; the facade removes its own
//! parameters from the URL before the Redis client sees it and leaves the others (`node=` of a
//! cluster URL) in place.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> switchyard_kit::core::Result<()> {
//! use switchyard_kit::{OpenOptions, open_stream_bridge_with};
//!
//! // Keep 1,024 events per run for replay; the same as "memory://?retention=1024".
//! let options = OpenOptions { retention: Some(1024), ..OpenOptions::default() };
//! let bridge = open_stream_bridge_with("memory://", &options).await?;
//! # let _ = bridge;
//! let (url, from_url) = OpenOptions::from_url("fleet", "redis://h:6379?prefix=t:&pool_size=4")?;
//! assert_eq!(url, "redis://h:6379");
//! assert_eq!(from_url.prefix.as_deref(), Some("t:"));
//! assert_eq!(from_url.pool_size, Some(4));
//! # Ok(())
//! # }
//! ```
//!
//! [`open_event_store_with`]: crate::open_event_store_with

use std::time::Duration;

use serde::Deserialize;
use switchyard_core::{Error, Result};

/// Settings of one port's adapter; `None` keeps the adapter's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenOptions {
    /// Redis key prefix (`prefix=`); the seeds' layout by default. Refused on PostgreSQL, whose
    /// adapters keep their tables in the URL's `?schema=`.
    pub prefix: Option<String>,
    /// Longest a Redis command waits, in milliseconds (`command_timeout_ms=`); 5,000 by default.
    /// On PostgreSQL: the pool's acquire timeout and each statement's `statement_timeout`
    /// (default 10 s to acquire, the server's statement limit).
    pub command_timeout_ms: Option<u64>,
    /// Longest the Redis event store and the Redis stream bridge wait for a connection, the
    /// handshake included, in milliseconds (`connect_timeout_ms=`); 5,000 by default. The Redis
    /// fleet's connect is bounded by its command timeout. On PostgreSQL: how long opening may
    /// take, migrations included (10 s by default).
    pub connect_timeout_ms: Option<u64>,
    /// Connections of the event store's or the fleet's pool (`pool_size=`), Redis or
    /// PostgreSQL; on PostgreSQL also the stream bridge's.
    pub pool_size: Option<usize>,
    /// Events kept per run for replay by the stream bridge (`retention=`); 256 by default.
    pub retention: Option<usize>,
    /// The largest task result the fleet's ack stores, in bytes (ADR 0380); 1 MiB by default.
    /// Set in code, or by the configuration's `queues.max_result_bytes` (ADR 0384): it is not a
    /// URL parameter nor an `[options.fleet]` key, so the limit has one spelling in a file. The
    /// SQLite, Redis and PostgreSQL fleets read it; the memory fleet refuses any other value
    /// than its fixed 1 MiB.
    #[serde(skip)]
    pub max_result_bytes: Option<usize>,
}

/// The query parameters the facade reads.
const KEYS: [&str; 5] = [
    "prefix",
    "command_timeout_ms",
    "connect_timeout_ms",
    "pool_size",
    "retention",
];

impl OpenOptions {
    /// Splits `url` into the URL without the facade's parameters and the options they set.
    /// `key` names the setting in errors. Values are percent-decoded; a number that does not
    /// parse, or is zero where zero makes no sense, is [`Error::Config`].
    pub fn from_url(key: &str, url: &str) -> Result<(String, OpenOptions)> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_string(), OpenOptions::default()));
        };
        let mut options = OpenOptions::default();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !KEYS.contains(&name) {
                kept.push(pair);
                continue;
            }
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|e| Error::config(key, format!("`{name}` is not UTF-8: {e}")))?
                .into_owned();
            match name {
                "prefix" => options.prefix = Some(value),
                "command_timeout_ms" => {
                    options.command_timeout_ms = Some(positive(key, name, &value)?)
                }
                "connect_timeout_ms" => {
                    options.connect_timeout_ms = Some(positive(key, name, &value)?)
                }
                "pool_size" => options.pool_size = Some(count(key, name, &value)?),
                _ => options.retention = Some(count(key, name, &value)?),
            }
        }
        let url = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok((url, options))
    }

    /// `self`, with every field it leaves `None` taken from `fallback`.
    pub fn or(&self, fallback: &OpenOptions) -> OpenOptions {
        OpenOptions {
            prefix: self.prefix.clone().or_else(|| fallback.prefix.clone()),
            command_timeout_ms: self.command_timeout_ms.or(fallback.command_timeout_ms),
            connect_timeout_ms: self.connect_timeout_ms.or(fallback.connect_timeout_ms),
            pool_size: self.pool_size.or(fallback.pool_size),
            retention: self.retention.or(fallback.retention),
            max_result_bytes: self.max_result_bytes.or(fallback.max_result_bytes),
        }
    }

    /// Refuses zero timeouts, pool sizes and retention (they would hang or hold nothing).
    pub fn validate(&self, key: &str) -> Result<()> {
        let zero = |name: &str| {
            Err(Error::config(
                key,
                format!("`{name}` must be at least 1; leave it out for the default"),
            ))
        };
        if self.command_timeout_ms == Some(0) {
            return zero("command_timeout_ms");
        }
        if self.connect_timeout_ms == Some(0) {
            return zero("connect_timeout_ms");
        }
        if self.pool_size == Some(0) {
            return zero("pool_size");
        }
        if self.retention == Some(0) {
            return zero("retention");
        }
        Ok(())
    }

    /// The command timeout as a duration, if set.
    pub fn command_timeout(&self) -> Option<Duration> {
        self.command_timeout_ms.map(Duration::from_millis)
    }

    /// The connect timeout as a duration, if set.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout_ms.map(Duration::from_millis)
    }
}

/// Per-port options in the configuration file (`[options.<port>]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PortOptions {
    /// `[options.event_store]`.
    pub event_store: OpenOptions,
    /// `[options.stream_bridge]`.
    pub stream_bridge: OpenOptions,
    /// `[options.fleet]`.
    pub fleet: OpenOptions,
}

fn positive(key: &str, name: &str, value: &str) -> Result<u64> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::config(
            key,
            format!("`{name}={value}` must be a whole number of milliseconds, at least 1"),
        )),
    }
}

fn count(key: &str, name: &str, value: &str) -> Result<usize> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::config(
            key,
            format!("`{name}={value}` must be a whole number, at least 1"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facade_parameters_are_taken_others_kept() {
        let (url, o) = OpenOptions::from_url(
            "k",
            "redis-cluster://a:1?node=b:2&prefix=p%3Ax&command_timeout_ms=250&node=c:3",
        )
        .expect("parse");
        assert_eq!(url, "redis-cluster://a:1?node=b:2&node=c:3");
        assert_eq!(o.prefix.as_deref(), Some("p:x"));
        assert_eq!(o.command_timeout(), Some(Duration::from_millis(250)));
        let (url, o) = OpenOptions::from_url("k", "memory://").expect("parse");
        assert_eq!((url.as_str(), o), ("memory://", OpenOptions::default()));
    }

    #[test]
    fn bad_numbers_name_the_setting() {
        for bad in [
            "redis://h?pool_size=0",
            "redis://h?retention=x",
            "redis://h?command_timeout_ms=-1",
            "redis://h?connect_timeout_ms=",
        ] {
            assert!(
                matches!(OpenOptions::from_url("SWITCHYARD_FLEET_URL", bad), Err(Error::Config { key, .. }) if key == "SWITCHYARD_FLEET_URL"),
                "{bad}"
            );
        }
    }

    #[test]
    fn code_wins_over_the_url() {
        let code = OpenOptions {
            pool_size: Some(2),
            ..OpenOptions::default()
        };
        let url = OpenOptions {
            pool_size: Some(9),
            retention: Some(5),
            ..OpenOptions::default()
        };
        let merged = code.or(&url);
        assert_eq!((merged.pool_size, merged.retention), (Some(2), Some(5)));
    }
}
