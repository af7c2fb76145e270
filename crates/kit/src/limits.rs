//! The gateway's limits and timeouts (`[limits]` in the config). Every value has a default that
//! suits one gateway on a small machine; `docs/security.md` says what each one protects.
//!
//! ```toml
//! [limits]
//! max_body_bytes = 2097152        # larger bodies get a JSON 413 naming this number
//! header_read_secs = 10           # a client must send its request head within this
//! request_secs = 30               # whole-request deadline of every route but SSE streams
//! idle_secs = 60                  # a keep-alive connection with no request open is closed
//! max_connections = 512           # past it new connections get 503 + Retry-After
//! max_streams = 256               # past it new SSE streams get 503 + Retry-After
//! max_streams_per_token = 64      # open SSE streams of one token; past it 429 + Retry-After
//! max_tickets_per_token = 100     # live stream tickets of one token; past it 429 + Retry-After
//! max_pending_per_ip = 128        # connections of one IP yet to send a request head; past it the oldest is closed
//! health_connections = 8          # kept past max_connections for /healthz and /readyz only
//! ```
//!
//! ```
//! let config = switchyard_kit::Config::from_toml_str("[limits]\nmax_body_bytes = 1024", "inline")?;
//! assert_eq!(config.limits.max_body_bytes, 1024);
//! # Ok::<(), switchyard_kit::core::Error>(())
//! ```

use serde::Deserialize;
use switchyard_core::{Error, Result};

/// The longest timeout any setting accepts (one day): larger values are almost surely a typo, and
/// a bound keeps every deadline computation far from overflow.
pub const MAX_TIMEOUT_SECS: u64 = 86_400;
/// The largest connection or stream cap any setting accepts.
pub const MAX_COUNT: usize = 1_000_000;
/// The largest body limit any setting accepts (1 GiB).
pub const MAX_BODY_BYTES: usize = 1 << 30;

/// Limits and timeouts of the gateway's listener; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Seconds a client has to send a complete request head (also bounds a silent new socket).
    pub header_read_secs: u64,
    /// Seconds a non-streaming request may take, body upload included.
    pub request_secs: u64,
    /// Seconds a keep-alive connection may sit with no request in progress.
    pub idle_secs: u64,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open SSE streams at most.
    pub max_streams: usize,
    /// Open SSE streams of one token at most (with `--auth`), so one token cannot take
    /// `max_streams`.
    pub max_streams_per_token: usize,
    /// Live stream tickets of one token at most.
    pub max_tickets_per_token: usize,
    /// Connections from one IP address (an IPv6 /64) that have not yet sent a complete request
    /// head; a new one past it closes that address's oldest, so one peer's silent sockets cannot
    /// fill `max_connections`.
    pub max_pending_per_ip: usize,
    /// Connections accepted past `max_connections` that serve only `/healthz` and `/readyz`, so
    /// probes are answered while the gateway is full.
    pub health_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 2 * 1024 * 1024,
            header_read_secs: 10,
            request_secs: 30,
            idle_secs: 60,
            max_connections: 512,
            max_streams: 256,
            max_streams_per_token: 64,
            max_tickets_per_token: 100,
            max_pending_per_ip: 128,
            health_connections: 8,
        }
    }
}

impl Limits {
    /// Checks every value, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        for (key, secs) in [
            ("limits.header_read_secs", self.header_read_secs),
            ("limits.request_secs", self.request_secs),
            ("limits.idle_secs", self.idle_secs),
        ] {
            if secs == 0 || secs > MAX_TIMEOUT_SECS {
                return Err(Error::config(
                    key,
                    format!("must be 1..={MAX_TIMEOUT_SECS} seconds, got {secs}"),
                ));
            }
        }
        for (key, n, max) in [
            ("limits.max_body_bytes", self.max_body_bytes, MAX_BODY_BYTES),
            ("limits.max_connections", self.max_connections, MAX_COUNT),
            ("limits.max_streams", self.max_streams, MAX_COUNT),
            (
                "limits.max_streams_per_token",
                self.max_streams_per_token,
                MAX_COUNT,
            ),
            (
                "limits.max_tickets_per_token",
                self.max_tickets_per_token,
                MAX_COUNT,
            ),
            (
                "limits.max_pending_per_ip",
                self.max_pending_per_ip,
                MAX_COUNT,
            ),
            (
                "limits.health_connections",
                self.health_connections,
                MAX_COUNT,
            ),
        ] {
            if n == 0 || n > max {
                return Err(Error::config(key, format!("must be 1..={max}, got {n}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_zero_or_huge_is_refused() {
        assert!(Limits::default().validate().is_ok());
        let zero = Limits {
            request_secs: 0,
            ..Limits::default()
        };
        assert!(
            matches!(zero.validate(), Err(Error::Config { key, .. }) if key == "limits.request_secs")
        );
        let huge = Limits {
            idle_secs: u64::MAX,
            ..Limits::default()
        };
        assert!(
            matches!(huge.validate(), Err(Error::Config { key, .. }) if key == "limits.idle_secs")
        );
        let many = Limits {
            max_connections: usize::MAX,
            ..Limits::default()
        };
        assert!(
            matches!(many.validate(), Err(Error::Config { key, .. }) if key == "limits.max_connections")
        );
        let none = Limits {
            max_streams: 0,
            ..Limits::default()
        };
        assert!(
            matches!(none.validate(), Err(Error::Config { key, .. }) if key == "limits.max_streams")
        );
    }
}
