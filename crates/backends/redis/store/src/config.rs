//! Connection options. fred's defaults (no reconnect, no command timeout) are never used as is.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use switchyard_core::{Clock, Error, Result};
use switchyard_redis_support::ConnectionPolicy;
use switchyard_redis_support::keys::LayoutRules;
use switchyard_redis_support::url::{RedisUrl, Topology};

use crate::keys::{DEFAULT_PREFIX, KeyLayout};

/// Called between a claim's WATCH (and its reads) and its EXEC with the Redis `CLIENT ID` of the
/// claim's connection. For fault-injection tests only.
#[doc(hidden)]
pub type BeforeExecHook =
    Arc<dyn Fn(u64) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How a lost connection is re-established (shared by every Redis adapter).
pub use switchyard_redis_support::Reconnect;

/// Options of a [`RedisEventStore`](crate::RedisEventStore).
#[derive(Clone)]
pub struct RedisStoreOptions {
    /// Key prefix; the seed's `agentdeck:events` by default.
    pub prefix: String,
    /// Key layout; `None` = from the URL: [`KeyLayout::Cluster`] for `redis-cluster://` and
    /// `rediss-cluster://`, else [`KeyLayout::Seed`]. The cluster layout also works on a standalone
    /// server; the seed layout on a cluster is a config error (its keys of one namespace span
    /// slots).
    pub layout: Option<KeyLayout>,
    /// Connections of the shared pool (reads and appends; auto-pipelined).
    pub pool_size: usize,
    /// Connections reserved for WATCH/MULTI/EXEC claims, one transaction each at a time.
    pub claim_connections: usize,
    /// Timeout of every command (and of a whole transaction).
    pub command_timeout: Duration,
    /// Timeout of a TCP (and TLS) connect.
    pub connect_timeout: Duration,
    /// Reconnect policy.
    pub reconnect: Reconnect,
    /// Optimistic rounds a claim tries before [`Error::Contended`].
    pub max_claim_rounds: u32,
    /// Largest jittered backoff between claim rounds.
    pub max_backoff: Duration,
    /// `None` = Redis `TIME` (the production clock); `Some` = an injected clock (tests).
    pub clock: Option<Arc<dyn Clock>>,
    /// How long a write's op receipt lives (what makes a re-sent write apply once).
    pub op_receipt_ttl: Duration,
    #[doc(hidden)]
    pub before_exec: Option<BeforeExecHook>,
}

impl fmt::Debug for RedisStoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreOptions")
            .field("prefix", &self.prefix)
            .field("layout", &self.layout)
            .field("pool_size", &self.pool_size)
            .field("claim_connections", &self.claim_connections)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("reconnect", &self.reconnect)
            .field("max_claim_rounds", &self.max_claim_rounds)
            .field("max_backoff", &self.max_backoff)
            .field("clock", &self.clock)
            .field("op_receipt_ttl", &self.op_receipt_ttl)
            .finish_non_exhaustive()
    }
}

impl Default for RedisStoreOptions {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_string(),
            layout: None,
            pool_size: 4,
            claim_connections: 4,
            command_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            reconnect: Reconnect::default(),
            max_claim_rounds: 16,
            max_backoff: Duration::from_millis(100),
            clock: None,
            op_receipt_ttl: Duration::from_secs(60),
            before_exec: None,
        }
    }
}

impl RedisStoreOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the key layout (instead of deriving it from the URL).
    pub fn layout(mut self, layout: KeyLayout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Injects a clock instead of Redis `TIME`.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let positive = |d: Duration, key: &str| {
            if d.is_zero() {
                Err(Error::config(key, "must be greater than zero"))
            } else {
                Ok(())
            }
        };
        if self.pool_size == 0 {
            return Err(Error::config("pool_size", "must be at least 1"));
        }
        if self.claim_connections == 0 {
            return Err(Error::config("claim_connections", "must be at least 1"));
        }
        if self.max_claim_rounds == 0 {
            return Err(Error::config("max_claim_rounds", "must be at least 1"));
        }
        if self.prefix.is_empty() {
            return Err(Error::config("prefix", "must not be empty"));
        }
        positive(self.command_timeout, "command_timeout")?;
        positive(self.connect_timeout, "connect_timeout")?;
        if self.op_receipt_ttl.as_secs() == 0 {
            return Err(Error::config("op_receipt_ttl", "must be at least 1 s"));
        }
        Ok(())
    }

    /// The parsed URL, the connection policy, and the key layout the store writes there.
    pub(crate) fn connection_parts(
        &self,
        url: &str,
    ) -> Result<(RedisUrl, ConnectionPolicy, KeyLayout)> {
        // Sentinel URLs are refused: nothing here follows a sentinel failover of the claim
        // connections' WATCH.
        let url = RedisUrl::parse(url, "url", &[Topology::Standalone, Topology::Cluster])?;
        let layout = KeyLayout::resolve(
            self.layout,
            url.is_cluster(),
            &self.prefix,
            &LayoutRules {
                layout_setting: "layout",
                prefix_setting: "prefix",
                seed_on_cluster: Some(
                    "the seed layout spreads one namespace over many cluster slots",
                ),
            },
        )?;
        let policy = ConnectionPolicy {
            command_timeout: self.command_timeout,
            connect_timeout: self.connect_timeout,
            internal_command_timeout: self.command_timeout,
            // In-flight commands are re-sent after a reconnect; every write here is idempotent
            // through its op receipt (ADR 0022), so a resend is safe.
            max_command_attempts: 3,
            unresponsive: Some((self.command_timeout, Duration::from_millis(500))),
            reconnect: self.reconnect,
            fail_fast: true,
        };
        Ok((url, policy, layout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_reach_the_client_config() {
        let options = RedisStoreOptions::default();
        let (url, policy, layout) = options
            .connection_parts("rediss://alice:s3cret@cache.example:6380/2")
            .expect("valid URL");
        assert!(url.uses_tls(), "rediss:// turns TLS on");
        assert_eq!(layout, KeyLayout::Seed);
        assert_eq!(url.config().password.as_deref(), Some("s3cret"));
        assert_eq!(policy.command_timeout, options.command_timeout);
        assert_eq!(policy.connect_timeout, options.connect_timeout);
        assert_eq!(policy.max_command_attempts, 3);
        assert_eq!(
            policy.unresponsive.map(|(max, _)| max),
            Some(options.command_timeout)
        );
        assert_eq!(policy.reconnect, Reconnect::default());

        let (url, _, layout) = options
            .connection_parts("rediss-cluster://u:pw@10.0.0.1:7000?node=10.0.0.2:7001")
            .expect("valid cluster URL");
        assert_eq!(layout, KeyLayout::Cluster);
        assert!(url.is_cluster());
        let (.., layout) = RedisStoreOptions::default()
            .layout(KeyLayout::Cluster)
            .connection_parts("redis://127.0.0.1")
            .expect("cluster layout on a standalone server");
        assert_eq!(layout, KeyLayout::Cluster);
    }

    #[test]
    fn cluster_layout_refuses_what_would_break_its_tags() {
        let err = RedisStoreOptions::default()
            .layout(KeyLayout::Seed)
            .connection_parts("redis-cluster://127.0.0.1:7000")
            .expect_err("seed layout on a cluster");
        assert!(matches!(err, Error::Config { key, .. } if key == "layout"));
        let err = RedisStoreOptions::default()
            .prefix("app{x}")
            .connection_parts("redis-cluster://127.0.0.1:7000")
            .expect_err("brace in a cluster prefix");
        assert!(matches!(err, Error::Config { key, .. } if key == "prefix"));
        // The seed layout has no tags to protect.
        RedisStoreOptions::default()
            .prefix("app{x}")
            .connection_parts("redis://127.0.0.1")
            .expect("seed layout takes any prefix");
    }

    #[test]
    fn bad_options_are_config_errors() {
        let options = RedisStoreOptions {
            pool_size: 0,
            ..RedisStoreOptions::default()
        };
        assert!(matches!(options.validate(), Err(Error::Config { key, .. }) if key == "pool_size"));
        let options = RedisStoreOptions::default().prefix("");
        assert!(matches!(options.validate(), Err(Error::Config { key, .. }) if key == "prefix"));
        let err = RedisStoreOptions::default()
            .connection_parts("redis://:pw@host:notaport")
            .expect_err("bad port");
        assert!(
            !err.to_string().contains("pw"),
            "no password in errors: {err}"
        );
    }
}
