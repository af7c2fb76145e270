//! Configuration: which backend each port uses, from a TOML file and `SWITCHYARD_…` variables.
//!
//! Resolution per port: its own URL, else the shared `redis` URL, else the embedded default (one
//! SQLite file for the event store and the fleet, memory for the bridge and the cache).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! sqlite_path = "switchyard.db"
//! # redis = "redis://127.0.0.1:6379"       # moves every port to Redis
//! [urls]
//! event_store = "sqlite://switchyard.db"
//! stream_bridge = "memory://"
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchyard_core::{Error, Result};

use crate::url::BackendUrl;

/// The default gateway address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default SQLite file of the embedded setup.
pub const DEFAULT_SQLITE_PATH: &str = "switchyard.db";

/// Backend URLs per port; `None` falls back as the module docs say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortUrls {
    /// `EventStore`.
    pub event_store: Option<String>,
    /// `StreamBridge`.
    pub stream_bridge: Option<String>,
    /// `CheckpointCache`.
    pub checkpoint_cache: Option<String>,
    /// `FleetBackend`.
    pub fleet: Option<String>,
}

/// switchyard's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the gateway listens.
    pub listen: String,
    /// The SQLite file of the embedded default.
    pub sqlite_path: PathBuf,
    /// One Redis for every port that names no URL of its own.
    pub redis: Option<String>,
    /// Per-port URLs.
    pub urls: PortUrls,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            sqlite_path: DEFAULT_SQLITE_PATH.into(),
            redis: None,
            urls: PortUrls::default(),
        }
    }
}

/// The environment variables [`Config::apply_env`] reads.
pub const ENV_VARS: [&str; 7] = [
    "SWITCHYARD_LISTEN",
    "SWITCHYARD_SQLITE_PATH",
    "SWITCHYARD_REDIS_URL",
    "SWITCHYARD_EVENT_STORE_URL",
    "SWITCHYARD_STREAM_BRIDGE_URL",
    "SWITCHYARD_CHECKPOINT_CACHE_URL",
    "SWITCHYARD_FLEET_URL",
];

impl Config {
    /// Reads a TOML file.
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::config(path.display().to_string(), format!("cannot read: {e}")))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses TOML text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        let config: Config = toml::from_str(text)
            .map_err(|e| Error::config(origin, format!("invalid TOML: {}", e.message())))?;
        config.validate()?;
        Ok(config)
    }

    /// Overlays the `SWITCHYARD_…` variables of [`ENV_VARS`] found by `lookup` (use
    /// `|k| std::env::var(k).ok()`).
    pub fn apply_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        if let Some(v) = get("SWITCHYARD_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = get("SWITCHYARD_SQLITE_PATH") {
            self.sqlite_path = v.into();
        }
        if let Some(v) = get("SWITCHYARD_REDIS_URL") {
            self.redis = Some(v);
        }
        let urls = &mut self.urls;
        for (var, slot) in [
            ("SWITCHYARD_EVENT_STORE_URL", &mut urls.event_store),
            ("SWITCHYARD_STREAM_BRIDGE_URL", &mut urls.stream_bridge),
            (
                "SWITCHYARD_CHECKPOINT_CACHE_URL",
                &mut urls.checkpoint_cache,
            ),
            ("SWITCHYARD_FLEET_URL", &mut urls.fleet),
        ] {
            if let Some(v) = get(var) {
                *slot = Some(v);
            }
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks every value, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.listen_addr()?;
        if let Some(redis) = &self.redis {
            match BackendUrl::parse("redis", redis)? {
                BackendUrl::Redis { .. } => {}
                other => {
                    return Err(Error::config(
                        "redis",
                        format!("must be a redis:// URL, got a {} URL", other.kind()),
                    ));
                }
            }
        }
        for port in Port::ALL {
            self.url_for(port)?;
        }
        Ok(())
    }

    /// The gateway address.
    pub fn listen_addr(&self) -> Result<SocketAddr> {
        self.listen.parse().map_err(|e| {
            Error::config(
                "listen",
                format!(
                    "{:?} is not HOST:PORT ({e}); e.g. 127.0.0.1:8080",
                    self.listen
                ),
            )
        })
    }

    /// The backend of `port` after fallbacks.
    pub fn url_for(&self, port: Port) -> Result<BackendUrl> {
        let explicit = match port {
            Port::EventStore => &self.urls.event_store,
            Port::StreamBridge => &self.urls.stream_bridge,
            Port::CheckpointCache => &self.urls.checkpoint_cache,
            Port::Fleet => &self.urls.fleet,
        };
        if let Some(url) = explicit {
            return BackendUrl::parse(port.setting(), url);
        }
        if let Some(redis) = &self.redis {
            return BackendUrl::parse("redis", redis);
        }
        Ok(match port {
            Port::EventStore | Port::Fleet => BackendUrl::Sqlite {
                path: self.sqlite_path.clone(),
            },
            Port::StreamBridge | Port::CheckpointCache => BackendUrl::Memory,
        })
    }
}

/// The four ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// `EventStore`.
    EventStore,
    /// `StreamBridge`.
    StreamBridge,
    /// `CheckpointCache`.
    CheckpointCache,
    /// `FleetBackend`.
    Fleet,
}

impl Port {
    /// Every port.
    pub const ALL: [Port; 4] = [
        Port::EventStore,
        Port::StreamBridge,
        Port::CheckpointCache,
        Port::Fleet,
    ];

    /// The setting that names its URL, for errors.
    pub fn setting(self) -> &'static str {
        match self {
            Port::EventStore => "urls.event_store (SWITCHYARD_EVENT_STORE_URL)",
            Port::StreamBridge => "urls.stream_bridge (SWITCHYARD_STREAM_BRIDGE_URL)",
            Port::CheckpointCache => "urls.checkpoint_cache (SWITCHYARD_CHECKPOINT_CACHE_URL)",
            Port::Fleet => "urls.fleet (SWITCHYARD_FLEET_URL)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_is_one_sqlite_file_plus_memory() {
        let c = Config::default();
        let db = BackendUrl::Sqlite {
            path: DEFAULT_SQLITE_PATH.into(),
        };
        assert_eq!(c.url_for(Port::EventStore).expect("url"), db);
        assert_eq!(c.url_for(Port::Fleet).expect("url"), db);
        assert_eq!(
            c.url_for(Port::StreamBridge).expect("url"),
            BackendUrl::Memory
        );
        assert_eq!(
            c.url_for(Port::CheckpointCache).expect("url"),
            BackendUrl::Memory
        );
    }

    #[test]
    fn redis_moves_every_port_unless_one_names_its_own() {
        let c = Config::from_toml_str(
            "redis = \"redis://h:1\"\n[urls]\nstream_bridge = \"memory://\"\n",
            "test.toml",
        )
        .expect("config");
        assert!(matches!(
            c.url_for(Port::EventStore),
            Ok(BackendUrl::Redis { .. })
        ));
        assert!(matches!(
            c.url_for(Port::Fleet),
            Ok(BackendUrl::Redis { .. })
        ));
        assert_eq!(
            c.url_for(Port::StreamBridge).expect("url"),
            BackendUrl::Memory
        );
    }

    #[test]
    fn env_overrides_file() {
        let c = Config::default()
            .apply_env(|k| match k {
                "SWITCHYARD_LISTEN" => Some("0.0.0.0:9000".into()),
                "SWITCHYARD_FLEET_URL" => Some("memory://".into()),
                _ => None,
            })
            .expect("config");
        assert_eq!(c.listen_addr().expect("addr").port(), 9000);
        assert_eq!(c.url_for(Port::Fleet).expect("url"), BackendUrl::Memory);
    }

    #[test]
    fn one_clear_error_per_bad_value() {
        let bad_scheme = Config::default()
            .apply_env(|k| (k == "SWITCHYARD_EVENT_STORE_URL").then(|| "mysql://x".to_string()));
        assert!(
            matches!(bad_scheme, Err(Error::Config { key, .. }) if key.contains("SWITCHYARD_EVENT_STORE_URL"))
        );
        let bad_listen = Config::from_toml_str("listen = \"nope\"", "f.toml");
        assert!(matches!(bad_listen, Err(Error::Config { key, .. }) if key == "listen"));
        let unknown = Config::from_toml_str("colour = \"blue\"", "f.toml");
        assert!(
            matches!(unknown, Err(Error::Config { key, reason }) if key == "f.toml" && reason.contains("colour"))
        );
        let redis_not_redis = Config::from_toml_str("redis = \"memory://\"", "f.toml");
        assert!(matches!(redis_not_redis, Err(Error::Config { key, .. }) if key == "redis"));
    }
}
