//! The connection policy every Redis adapter states explicitly (ADR 0172): fred's defaults (no
//! reconnect, no command timeout, no unresponsive-connection detection) are never used as is.
//!
//! Adapters differ on purpose in two settings, and say why where they pick them:
//! `max_command_attempts` (a command in flight when a connection drops is re-sent only where a
//! re-send cannot apply twice — the store's op receipts, ADR 0022 — and never for a stream
//! publish or a cache write) and whether the first connect may fail (a cache serves misses).

use std::time::Duration;

use fred::prelude::{ConnectionConfig, PerformanceConfig, ReconnectPolicy};
use fred::types::Builder;
use fred::types::config::UnresponsiveConfig;
use switchyard_core::{Error, Result};

use crate::url::RedisUrl;

/// How a lost connection is re-established: exponential backoff with fred's jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Attempts before a client gives up for good; 0 = never give up.
    pub max_attempts: u32,
    /// First delay.
    pub min_delay: Duration,
    /// Largest delay (the delay doubles up to this).
    pub max_delay: Duration,
}

impl Default for Reconnect {
    /// Never give up; 20 ms doubling to 2 s.
    fn default() -> Self {
        Self {
            max_attempts: 0,
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl Reconnect {
    /// fred's reconnect policy for these settings (delays beyond `u32::MAX` ms saturate).
    pub fn policy(&self) -> ReconnectPolicy {
        ReconnectPolicy::new_exponential(
            self.max_attempts,
            millis(self.min_delay),
            millis(self.max_delay),
            2,
        )
    }
}

/// Timeouts, re-sends and reconnects of an adapter's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionPolicy {
    /// Timeout of every command (and of a whole transaction).
    pub command_timeout: Duration,
    /// Timeout of a TCP (and TLS) connect.
    pub connect_timeout: Duration,
    /// Timeout of fred's own commands (handshake, `CLUSTER SLOTS`, …).
    pub internal_command_timeout: Duration,
    /// Times a command is written at most: 1 = never re-sent after a reconnect.
    pub max_command_attempts: u32,
    /// `Some((max, interval))`: a connection that answers nothing for `max` (checked every
    /// `interval`) is dropped and reconnected. `None` = fred does not watch for it.
    pub unresponsive: Option<(Duration, Duration)>,
    /// Reconnect backoff.
    pub reconnect: Reconnect,
    /// Whether commands fail at once while the connection is down, and whether a failed first
    /// connect is an error (`true`) or left to the reconnect loop (`false`).
    pub fail_fast: bool,
}

impl Default for ConnectionPolicy {
    /// 5 s command, connect and internal timeouts, one write per command, no unresponsive check,
    /// [`Reconnect::default`], fail fast.
    fn default() -> Self {
        Self {
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            internal_command_timeout: Duration::from_secs(5),
            max_command_attempts: 1,
            unresponsive: None,
            reconnect: Reconnect::default(),
            fail_fast: true,
        }
    }
}

impl ConnectionPolicy {
    /// Refuses zero timeouts and zero attempts (`Error::Config` under `setting.<field>`).
    pub fn validate(&self, setting: &str) -> Result<()> {
        let field = |name: &str| {
            if setting.is_empty() {
                name.to_string()
            } else {
                format!("{setting}.{name}")
            }
        };
        for (name, value) in [
            ("command_timeout", self.command_timeout),
            ("connect_timeout", self.connect_timeout),
            ("internal_command_timeout", self.internal_command_timeout),
        ] {
            if value.is_zero() {
                return Err(Error::config(
                    field(name),
                    "must be greater than zero (a call must never hang)",
                ));
            }
        }
        if self.max_command_attempts == 0 {
            return Err(Error::config(
                field("max_command_attempts"),
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// fred's performance config: the default command timeout.
    pub fn performance(&self) -> PerformanceConfig {
        PerformanceConfig {
            default_command_timeout: self.command_timeout,
            ..PerformanceConfig::default()
        }
    }

    /// fred's connection config.
    pub fn connection(&self) -> ConnectionConfig {
        ConnectionConfig {
            connection_timeout: self.connect_timeout,
            internal_command_timeout: self.internal_command_timeout,
            max_command_attempts: self.max_command_attempts,
            unresponsive: match self.unresponsive {
                Some((max, interval)) => UnresponsiveConfig {
                    max_timeout: Some(max),
                    interval,
                },
                None => UnresponsiveConfig::default(),
            },
            ..ConnectionConfig::default()
        }
    }

    /// A fred builder for `url` under this policy; build clients, pools or subscribers from it.
    pub fn builder(&self, url: &RedisUrl) -> Builder {
        let mut config = url.config().clone();
        config.fail_fast = self.fail_fast;
        let mut builder = Builder::from_config(config);
        builder
            .set_performance_config(self.performance())
            .set_connection_config(self.connection())
            .set_policy(self.reconnect.policy());
        builder
    }
}

/// A fred builder that refused to build: the config is unusable.
pub fn build_error(setting: &str, url: &RedisUrl, e: &fred::error::Error) -> Error {
    Error::config(
        setting,
        format!(
            "cannot build a Redis client for {}: {}",
            url.redacted(),
            e.details()
        ),
    )
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::Topology;

    #[test]
    fn the_policy_reaches_the_client_config() {
        let policy = ConnectionPolicy {
            command_timeout: Duration::from_millis(1500),
            connect_timeout: Duration::from_secs(3),
            internal_command_timeout: Duration::from_secs(4),
            max_command_attempts: 3,
            unresponsive: Some((Duration::from_secs(2), Duration::from_millis(500))),
            reconnect: Reconnect {
                max_attempts: 7,
                min_delay: Duration::from_millis(50),
                max_delay: Duration::from_secs(u64::MAX),
            },
            fail_fast: false,
        };
        policy.validate("x").expect("valid");
        assert_eq!(
            policy.performance().default_command_timeout,
            Duration::from_millis(1500)
        );
        let c = policy.connection();
        assert_eq!(c.connection_timeout, Duration::from_secs(3));
        assert_eq!(c.internal_command_timeout, Duration::from_secs(4));
        assert_eq!(c.max_command_attempts, 3);
        assert_eq!(c.unresponsive.max_timeout, Some(Duration::from_secs(2)));
        assert_eq!(c.unresponsive.interval, Duration::from_millis(500));
        match policy.reconnect.policy() {
            ReconnectPolicy::Exponential {
                max_attempts,
                min_delay,
                max_delay,
                ..
            } => {
                assert_eq!(max_attempts, 7);
                assert_eq!(min_delay, 50);
                assert_eq!(max_delay, u32::MAX, "saturates, no panic");
            }
            other => panic!("not exponential: {other:?}"),
        }
        let url =
            RedisUrl::parse("redis://127.0.0.1", "url", &[Topology::Standalone]).expect("url");
        let builder = policy.builder(&url);
        assert!(!builder.get_config().expect("config").fail_fast);
        assert_eq!(
            ConnectionPolicy::default()
                .connection()
                .unresponsive
                .max_timeout,
            None
        );
    }

    #[test]
    fn zero_timeouts_and_attempts_are_config_errors() {
        let zero = ConnectionPolicy {
            command_timeout: Duration::ZERO,
            ..ConnectionPolicy::default()
        };
        assert!(
            matches!(zero.validate("cache"), Err(Error::Config { key, .. }) if key == "cache.command_timeout")
        );
        let none = ConnectionPolicy {
            max_command_attempts: 0,
            ..ConnectionPolicy::default()
        };
        assert!(
            matches!(none.validate(""), Err(Error::Config { key, .. }) if key == "max_command_attempts")
        );
    }
}
