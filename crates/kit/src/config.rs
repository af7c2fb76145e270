//! Configuration: which backend each port uses, from a TOML file and `SWITCHYARD_…` variables.
//!
//! Resolution per port: its own URL, else the shared `redis` URL, else the shared `postgres` URL
//! (every port but the checkpoint cache, which then stays in memory: ADR 0225), else the embedded
//! default (one SQLite file for the event store and the fleet, memory for the bridge and the
//! cache).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! sqlite_path = "switchyard.db"
//! # redis = "redis://127.0.0.1:6379"       # moves every port to Redis
//! # postgres = "postgres://app@db/app"     # or to PostgreSQL (the cache stays in memory)
//! watch_queues = ["jobs"]                  # /metrics reports these queues from the start
//! auth_file = "tokens.toml"                # bearer tokens of the gateway (SWITCHYARD_AUTH_FILE)
//! cors_origins = ["https://app.example"]   # browser origins allowed to call the gateway
//! lenient_event_kinds = false              # true: store unknown payload kinds as raw_payload
//! [limits]                                  # see `switchyard_kit::limits`
//! max_body_bytes = 2097152
//! [webhooks]                                # see `WebhookConfig`; private targets refused
//! allowed_cidrs = ["10.1.0.0/16"]           # allowed although not public
//! max_attempts = 8
//! [urls]
//! event_store = "sqlite://switchyard.db"
//! stream_bridge = "memory://"
//! [prefixes]                                # Redis key prefixes (defaults: the seeds')
//! event_store = "agentdeck:events"
//! stream_bridge = "deerflow:stream_bridge"
//! fleet = ""
//! [queues]                                  # the gateway's queues (see `QueueSettings`)
//! max_result_bytes = 1048576                # largest task result an ack stores; 1 KiB ..= 64 MiB
//! [checkpoint_cache]                        # see `switchyard_kit::cache`
//! serializer = "msgpack"
//! [options.event_store]                     # see `switchyard_kit::options`
//! command_timeout_ms = 5000
//! ```
//!
//! ```
//! use switchyard_kit::{Config, Port};
//!
//! let config = Config::from_toml_str(
//!     "redis = \"redis://127.0.0.1:6379\"\n[options.fleet]\npool_size = 4",
//!     "inline",
//! )?;
//! assert_eq!(config.options.fleet.pool_size, Some(4));
//! assert_eq!(config.url_for(Port::EventStore)?.kind(), "redis");
//! # Ok::<(), switchyard_kit::core::Error>(())
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchyard_core::{Error, Result};

use crate::cache::CacheSettings;
use crate::limits::Limits;
use crate::options::{OpenOptions, PortOptions};
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

/// Redis key prefixes per port; `None` keeps the adapter's default, the seed's layout. Only Redis
/// adapters read them (SQLite and memory have no key space). The checkpoint cache has none: its
/// callers pass a key prefix on every call, as deer-flow's API does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prefixes {
    /// Event store keys; default `agentdeck:events` (`SWITCHYARD_EVENT_STORE_PREFIX`).
    pub event_store: Option<String>,
    /// Stream bridge keys; default `deerflow:stream_bridge` (`SWITCHYARD_STREAM_BRIDGE_PREFIX`).
    pub stream_bridge: Option<String>,
    /// Prepended to every fleet key and channel; default empty, the seed's bare `fleet:*` keys
    /// (`SWITCHYARD_FLEET_PREFIX`).
    pub fleet: Option<String>,
}

impl Prefixes {
    /// The prefix configured for `port`, if any.
    pub fn for_port(&self, port: Port) -> Option<&str> {
        match port {
            Port::EventStore => self.event_store.as_deref(),
            Port::StreamBridge => self.stream_bridge.as_deref(),
            Port::Fleet => self.fleet.as_deref(),
            Port::CheckpointCache => None,
        }
    }
}

/// The smallest `queues.max_result_bytes`: below it a worker could not store even a short
/// JSON answer (ADR 0384).
pub const MIN_RESULT_BYTES: usize = 1024;
/// The largest `queues.max_result_bytes`: every backend keeps a result in one value or row,
/// and the ack's body (the result plus 64 KiB) is read whole into memory (ADR 0384).
pub const MAX_RESULT_BYTES: usize = 64 * 1024 * 1024;

/// Settings of the fleet's queues (`[queues]` in the file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueSettings {
    /// The largest result an ack stores for a task, in bytes of its compact JSON
    /// (`queues.max_result_bytes`, ADR 0380 and 0384); `None` keeps the fleet adapter's default,
    /// 1 MiB. Between [`MIN_RESULT_BYTES`] and [`MAX_RESULT_BYTES`]. A larger result is refused
    /// with 413 `result_too_large` naming this limit. The memory fleet cannot change it.
    pub max_result_bytes: Option<usize>,
}

impl QueueSettings {
    /// Refuses a `max_result_bytes` out of bounds, naming the key.
    pub fn validate(&self) -> Result<()> {
        match self.max_result_bytes {
            Some(n) if !(MIN_RESULT_BYTES..=MAX_RESULT_BYTES).contains(&n) => Err(Error::config(
                "queues.max_result_bytes",
                format!(
                    "must be between {MIN_RESULT_BYTES} (1 KiB) and {MAX_RESULT_BYTES} (64 MiB) \
                     bytes, got {n}; leave it out for the default, 1048576 (1 MiB)"
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// How the gateway delivers webhooks (`[webhooks]` in the file, ADR 0395). Every key left out
/// keeps the gateway's default, given with each key; the gateway checks the ranges and names a
/// bad key (`webhooks.max_attempts`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookConfig {
    /// Deliver to any address, loopback and private ones included (default false). Only when
    /// everyone who may create a subscription may also reach the gateway's own network.
    pub allow_private: bool,
    /// Address ranges allowed although not public, e.g. `["10.1.0.0/16", "127.0.0.1"]`
    /// (default none).
    pub allowed_cidrs: Vec<String>,
    /// Attempts of one delivery before it is dead-lettered (default 8, at most 100).
    pub max_attempts: Option<u32>,
    /// The first retry's delay in milliseconds, doubling after each (default 5000).
    pub backoff_ms: Option<u64>,
    /// The longest retry delay in milliseconds (default 3600000, one hour).
    pub backoff_cap_ms: Option<u64>,
    /// How long connecting to a receiver may take, in milliseconds (default 5000).
    pub connect_timeout_ms: Option<u64>,
    /// How long one attempt may take in all, in milliseconds (default 15000).
    pub timeout_ms: Option<u64>,
    /// The most subscriptions the gateway keeps (default 100).
    pub max_subscriptions: Option<usize>,
    /// Attempts kept in each subscription's delivery log, newest kept (default 100).
    pub log_size: Option<u64>,
    /// Deliveries made at once by each gateway (default 4).
    pub concurrency: Option<usize>,
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
    /// One PostgreSQL for every port that names no URL of its own, except the checkpoint cache
    /// (memory). Refused together with `redis`.
    pub postgres: Option<String>,
    /// Per-port URLs.
    pub urls: PortUrls,
    /// Per-port Redis key prefixes.
    pub prefixes: Prefixes,
    /// Queues the gateway's `/metrics` reports even before it submits to them.
    pub watch_queues: Vec<String>,
    /// The gateway's token file (`serve --auth`); `None` leaves the gateway open (loopback only).
    pub auth_file: Option<PathBuf>,
    /// Browser origins (`https://app.example`) allowed cross-origin calls; none by default.
    pub cors_origins: Vec<String>,
    /// The gateway stores appended payloads of kinds the event model does not know as
    /// `raw_payload` instead of refusing them (`serve --lenient-event-kinds`; default off).
    pub lenient_event_kinds: bool,
    /// The gateway's limits and timeouts.
    pub limits: Limits,
    /// Settings of the fleet's queues (`[queues]`).
    pub queues: QueueSettings,
    /// How the gateway delivers webhooks (`[webhooks]`).
    pub webhooks: WebhookConfig,
    /// The checkpoint cache's serializer and Redis deadlines.
    pub checkpoint_cache: CacheSettings,
    /// The gateway operator commands talk to (`--server`, SWITCHYARD_SERVER), e.g.
    /// `https://gw.example:8443`; `None`: they open the backends themselves.
    pub server: Option<String>,
    /// Per-port adapter options (timeouts, pool sizes, retention, prefixes; ADR 0254).
    pub options: PortOptions,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            sqlite_path: DEFAULT_SQLITE_PATH.into(),
            redis: None,
            postgres: None,
            urls: PortUrls::default(),
            prefixes: Prefixes::default(),
            watch_queues: Vec::new(),
            auth_file: None,
            cors_origins: Vec::new(),
            lenient_event_kinds: false,
            limits: Limits::default(),
            queues: QueueSettings::default(),
            webhooks: WebhookConfig::default(),
            checkpoint_cache: CacheSettings::default(),
            server: None,
            options: PortOptions::default(),
        }
    }
}

/// The environment variables [`Config::apply_env`] reads.
pub const ENV_VARS: [&str; 13] = [
    "SWITCHYARD_LISTEN",
    "SWITCHYARD_SQLITE_PATH",
    "SWITCHYARD_REDIS_URL",
    "SWITCHYARD_POSTGRES_URL",
    "SWITCHYARD_EVENT_STORE_URL",
    "SWITCHYARD_STREAM_BRIDGE_URL",
    "SWITCHYARD_CHECKPOINT_CACHE_URL",
    "SWITCHYARD_FLEET_URL",
    "SWITCHYARD_EVENT_STORE_PREFIX",
    "SWITCHYARD_STREAM_BRIDGE_PREFIX",
    "SWITCHYARD_FLEET_PREFIX",
    "SWITCHYARD_WATCH_QUEUES",
    "SWITCHYARD_AUTH_FILE",
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
        if let Some(v) = get("SWITCHYARD_POSTGRES_URL") {
            self.postgres = Some(v);
        }
        if let Some(v) = get("SWITCHYARD_AUTH_FILE") {
            self.auth_file = Some(v.into());
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
        let prefixes = &mut self.prefixes;
        for (var, slot) in [
            ("SWITCHYARD_EVENT_STORE_PREFIX", &mut prefixes.event_store),
            (
                "SWITCHYARD_STREAM_BRIDGE_PREFIX",
                &mut prefixes.stream_bridge,
            ),
            ("SWITCHYARD_FLEET_PREFIX", &mut prefixes.fleet),
        ] {
            if let Some(v) = get(var) {
                *slot = Some(v);
            }
        }
        if let Some(v) = get("SWITCHYARD_WATCH_QUEUES") {
            // Comma-separated; added to the file's list.
            self.watch_queues.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|q| !q.is_empty())
                    .map(String::from),
            );
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks every value, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.listen_addr()?;
        if let Some(redis) = &self.redis {
            match BackendUrl::parse("redis", redis)? {
                url if url.kind() == "redis" => {}
                other => {
                    return Err(Error::config(
                        "redis",
                        format!("must be a redis:// URL, got a {} URL", other.kind()),
                    ));
                }
            }
        }
        if let Some(postgres) = &self.postgres {
            match BackendUrl::parse("postgres", postgres)? {
                url if url.kind() == "postgres" => {}
                other => {
                    return Err(Error::config(
                        "postgres",
                        format!("must be a postgres:// URL, got a {} URL", other.kind()),
                    ));
                }
            }
            if self.redis.is_some() {
                return Err(Error::config(
                    "postgres",
                    "`redis` and `postgres` both name a backend for every port: keep one, and \
                     give a port another backend with its own URL under [urls]",
                ));
            }
        }
        for port in Port::ALL {
            self.url_for(port)?;
        }
        if self.watch_queues.iter().any(String::is_empty) {
            return Err(Error::config(
                "watch_queues (SWITCHYARD_WATCH_QUEUES)",
                "queue names must not be empty",
            ));
        }
        if let Some(bad) = self
            .cors_origins
            .iter()
            .find(|o| !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/'))
        {
            return Err(Error::config(
                "cors_origins",
                format!(
                    "{bad:?} is not an origin; write scheme://host[:port], e.g. https://app.example"
                ),
            ));
        }
        self.checkpoint_cache.validate()?;
        self.queues.validate()?;
        self.limits.validate()
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

    /// The adapter options the configuration gives `port`: its `[options.<port>]` table, with
    /// `[prefixes]` as the key prefix when the table sets none; the fleet's also carry
    /// `queues.max_result_bytes` (ADR 0384). The cache's settings are `[checkpoint_cache]`, so
    /// its options are only the prefix. What `Switchyard::open` and `switchyard serve` open.
    pub fn open_options(&self, port: Port) -> OpenOptions {
        let table = match port {
            Port::EventStore => self.options.event_store.clone(),
            Port::StreamBridge => self.options.stream_bridge.clone(),
            Port::Fleet => OpenOptions {
                max_result_bytes: self.queues.max_result_bytes,
                ..self.options.fleet.clone()
            },
            Port::CheckpointCache => OpenOptions::default(),
        };
        table.or(&OpenOptions {
            prefix: self.prefixes.for_port(port).map(str::to_string),
            ..OpenOptions::default()
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
        if let Some(postgres) = &self.postgres
            && port != Port::CheckpointCache
        {
            return BackendUrl::parse("postgres", postgres);
        }
        Ok(match port {
            Port::EventStore | Port::Fleet => BackendUrl::sqlite(self.sqlite_path.clone()),
            Port::StreamBridge | Port::CheckpointCache => BackendUrl::memory(),
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
    fn max_result_bytes_is_read_and_bounded_naming_the_key() {
        let c = Config::from_toml_str("[queues]\nmax_result_bytes = 2048", "t").expect("config");
        assert_eq!(c.queues.max_result_bytes, Some(2048));
        assert_eq!(Config::default().queues.max_result_bytes, None);
        for n in [0, 1023, 64 * 1024 * 1024 + 1] {
            let text = format!("[queues]\nmax_result_bytes = {n}");
            match Config::from_toml_str(&text, "t") {
                Err(Error::Config { key, .. }) => assert_eq!(key, "queues.max_result_bytes"),
                other => panic!("{n}: {other:?}"),
            }
        }
        for n in [1024, 64 * 1024 * 1024] {
            let text = format!("[queues]\nmax_result_bytes = {n}");
            assert!(Config::from_toml_str(&text, "t").is_ok(), "{n}");
        }
    }

    #[test]
    fn embedded_default_is_one_sqlite_file_plus_memory() {
        let c = Config::default();
        let db = BackendUrl::sqlite(DEFAULT_SQLITE_PATH);
        assert_eq!(c.url_for(Port::EventStore).expect("url"), db);
        assert_eq!(c.url_for(Port::Fleet).expect("url"), db);
        assert_eq!(
            c.url_for(Port::StreamBridge).expect("url"),
            BackendUrl::memory()
        );
        assert_eq!(
            c.url_for(Port::CheckpointCache).expect("url"),
            BackendUrl::memory()
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
            Ok(u) if u.kind() == "redis"
        ));
        assert!(matches!(
            c.url_for(Port::Fleet),
            Ok(u) if u.kind() == "redis"
        ));
        assert_eq!(
            c.url_for(Port::StreamBridge).expect("url"),
            BackendUrl::memory()
        );
    }

    #[test]
    fn postgres_moves_every_port_but_the_cache() {
        let c = Config::default()
            .apply_env(|k| {
                (k == "SWITCHYARD_POSTGRES_URL").then(|| "postgresql://db/app".to_string())
            })
            .expect("config");
        for port in [Port::EventStore, Port::StreamBridge, Port::Fleet] {
            assert!(
                matches!(c.url_for(port), Ok(u) if u.kind() == "postgres"),
                "{port:?}"
            );
        }
        assert_eq!(
            c.url_for(Port::CheckpointCache).expect("url"),
            BackendUrl::memory()
        );
        let both = Config::from_toml_str(
            "redis = \"redis://h:1\"\npostgres = \"postgres://db/app\"\n",
            "f.toml",
        );
        assert!(matches!(both, Err(Error::Config { key, .. }) if key == "postgres"));
        let not_pg = Config::from_toml_str("postgres = \"redis://h:1\"", "f.toml");
        assert!(matches!(not_pg, Err(Error::Config { key, .. }) if key == "postgres"));
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
        assert_eq!(c.url_for(Port::Fleet).expect("url"), BackendUrl::memory());
    }

    #[test]
    fn prefixes_and_watched_queues_from_file_and_env() {
        let c = Config::from_toml_str(
            "watch_queues = [\"jobs\"]\n[prefixes]\nevent_store = \"a:events\"\nfleet = \"f:\"\n",
            "test.toml",
        )
        .expect("config")
        .apply_env(|k| match k {
            "SWITCHYARD_STREAM_BRIDGE_PREFIX" => Some("b:stream".into()),
            "SWITCHYARD_WATCH_QUEUES" => Some("mail, , crawl".into()),
            _ => None,
        })
        .expect("env");
        assert_eq!(c.prefixes.for_port(Port::EventStore), Some("a:events"));
        assert_eq!(c.prefixes.for_port(Port::StreamBridge), Some("b:stream"));
        assert_eq!(c.prefixes.for_port(Port::Fleet), Some("f:"));
        assert_eq!(c.prefixes.for_port(Port::CheckpointCache), None);
        assert_eq!(c.watch_queues, ["jobs", "mail", "crawl"]);
        let empty = Config::from_toml_str("watch_queues = [\"\"]", "f.toml");
        assert!(matches!(empty, Err(Error::Config { key, .. }) if key.starts_with("watch_queues")));
        let unknown = Config::from_toml_str("[prefixes]\ncache = \"x\"", "f.toml");
        assert!(matches!(unknown, Err(Error::Config { reason, .. }) if reason.contains("cache")));
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

    #[test]
    fn lenient_event_kinds_is_off_unless_the_file_turns_it_on() {
        assert!(!Config::default().lenient_event_kinds);
        let on = Config::from_toml_str("lenient_event_kinds = true", "f.toml").expect("config");
        assert!(on.lenient_event_kinds);
        let typo = Config::from_toml_str("lenient_event_kinds = \"yes\"", "f.toml");
        assert!(matches!(typo, Err(Error::Config { key, .. }) if key == "f.toml"));
    }

    #[test]
    fn webhooks_refuse_private_targets_unless_the_file_allows_them() {
        let default = Config::default().webhooks;
        assert!(!default.allow_private && default.allowed_cidrs.is_empty());
        let set = Config::from_toml_str(
            "[webhooks]\nallowed_cidrs = [\"10.1.0.0/16\"]\nmax_attempts = 3\ntimeout_ms = 2000\n",
            "f.toml",
        )
        .expect("config");
        assert_eq!(set.webhooks.allowed_cidrs, vec!["10.1.0.0/16".to_string()]);
        assert_eq!(set.webhooks.max_attempts, Some(3));
        assert_eq!(set.webhooks.backoff_ms, None);
        let typo = Config::from_toml_str("[webhooks]\nmax_attempt = 3\n", "f.toml");
        assert!(
            matches!(typo, Err(Error::Config { reason, .. }) if reason.contains("max_attempt"))
        );
    }

    #[test]
    fn gateway_security_settings() {
        let c = Config::from_toml_str(
            "auth_file = \"t.toml\"\ncors_origins = [\"https://app.example\"]\n[limits]\nmax_streams = 3\n",
            "f.toml",
        )
        .expect("config");
        assert_eq!(c.auth_file, Some(PathBuf::from("t.toml")));
        assert_eq!(c.limits.max_streams, 3);
        assert_eq!(c.limits.request_secs, Limits::default().request_secs);
        let env = Config::default()
            .apply_env(|k| (k == "SWITCHYARD_AUTH_FILE").then(|| "e.toml".to_string()))
            .expect("env");
        assert_eq!(env.auth_file, Some(PathBuf::from("e.toml")));
        for bad in [
            "cors_origins = [\"app.example\"]",
            "cors_origins = [\"https://a/\"]",
        ] {
            let e = Config::from_toml_str(bad, "f.toml");
            assert!(
                matches!(e, Err(Error::Config { key, .. }) if key == "cors_origins"),
                "{bad}"
            );
        }
        let zero = Config::from_toml_str("[limits]\nmax_connections = 0\n", "f.toml");
        assert!(matches!(zero, Err(Error::Config { key, .. }) if key == "limits.max_connections"));
        let typo = Config::from_toml_str("[limits]\nmax_conections = 5\n", "f.toml");
        assert!(typo.is_err());
    }
}
