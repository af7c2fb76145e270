//! Which backends a command uses: `--config FILE`, `SWITCHYARD_…` variables, `--redis`,
//! `--postgres`, `--sqlite`, and a command's own `--url`, in increasing precedence.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_kit::core::Result;
use switchyard_kit::{BackendUrl, Config, OpenOptions, Port};

/// Global backend options.
#[derive(Debug, Clone, Args)]
pub struct BackendArgs {
    /// A TOML config file (see the `switchyard` crate's `Config`).
    #[arg(long, global = true, env = "SWITCHYARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// One Redis for every port: several gateways then serve one fleet.
    #[arg(long, global = true)]
    pub redis: Option<String>,
    /// One PostgreSQL for every port but the checkpoint cache (memory): several gateways then
    /// serve one deployment (`postgres://USER:PASSWORD@HOST:5432/DB`, `?schema=NAME`;
    /// SWITCHYARD_POSTGRES_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub postgres: Option<String>,
    /// The SQLite file of the embedded default: a path, or a `sqlite:` URL as the facade's
    /// openers take it (`sqlite:///abs/x.db`, `sqlite://rel.db`, `sqlite:rel.db`).
    #[arg(long, global = true, value_name = "PATH|URL", value_parser = sqlite_arg)]
    pub sqlite: Option<PathBuf>,
    /// Redis key prefix of the event store (default `agentdeck:events`; config
    /// `prefixes.event_store`, SWITCHYARD_EVENT_STORE_PREFIX).
    #[arg(long, global = true, value_name = "PREFIX")]
    pub event_store_prefix: Option<String>,
    /// Redis key prefix of the stream bridge (default `deerflow:stream_bridge`; config
    /// `prefixes.stream_bridge`, SWITCHYARD_STREAM_BRIDGE_PREFIX).
    #[arg(long, global = true, value_name = "PREFIX")]
    pub stream_bridge_prefix: Option<String>,
    /// Redis key prefix of the fleet, before every `fleet:*` key and channel (default none, the
    /// seed's keys; config `prefixes.fleet`, SWITCHYARD_FLEET_PREFIX).
    #[arg(long, global = true, value_name = "PREFIX")]
    pub fleet_prefix: Option<String>,
}

/// `--sqlite`: a `sqlite:` URL is read by the facade's own URL parser (so every form its openers
/// accept means the same file here); anything else is a path. A file whose name really starts
/// with `sqlite:` is given as `./sqlite:…`.
fn sqlite_arg(value: &str) -> std::result::Result<PathBuf, String> {
    let is_url = value
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"));
    if !is_url {
        return Ok(PathBuf::from(value));
    }
    match BackendUrl::parse("--sqlite", value) {
        Ok(url) => match url.path() {
            Some(path) => Ok(path.to_path_buf()),
            None => Err(format!("{value:?} is not a SQLite file URL")),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// File, then environment, then command-line flags.
pub fn load_config(args: &BackendArgs) -> Result<Config> {
    let config = match &args.config {
        Some(path) => Config::from_toml_file(path)?,
        None => Config::default(),
    };
    let mut config = config.apply_env(|name| std::env::var(name).ok())?;
    if let Some(redis) = &args.redis {
        config.redis = Some(redis.clone());
    }
    if let Some(postgres) = &args.postgres {
        config.postgres = Some(postgres.clone());
    }
    if let Some(path) = &args.sqlite {
        config.sqlite_path = path.clone();
    }
    for (flag, slot) in [
        (&args.event_store_prefix, &mut config.prefixes.event_store),
        (
            &args.stream_bridge_prefix,
            &mut config.prefixes.stream_bridge,
        ),
        (&args.fleet_prefix, &mut config.prefixes.fleet),
    ] {
        if let Some(p) = flag {
            *slot = Some(p.clone());
        }
    }
    config.validate()?;
    Ok(config)
}

/// The URL `port` resolves to: the command's `--url`, else the configuration's.
pub fn url_for(config: &Config, port: Port, url: Option<&str>) -> Result<String> {
    match url {
        Some(url) => {
            BackendUrl::parse("--url", url)?;
            Ok(url.to_string())
        }
        None => url_string(&config.url_for(port)?),
    }
}

/// A parsed URL back as text, for the facade's openers.
pub fn url_string(url: &BackendUrl) -> Result<String> {
    Ok(url.url().to_string())
}

/// Opens the event store, with the configured key prefix and `[options.event_store]`.
pub async fn event_store(config: &Config, url: Option<&str>) -> Result<Arc<dyn EventStore>> {
    switchyard_kit::open_event_store_with(
        &url_for(config, Port::EventStore, url)?,
        &config.open_options(Port::EventStore),
    )
    .await
}

/// Opens the fleet backend, with the configured key prefix, `[options.fleet]` and
/// `queues.max_result_bytes` (ADR 0384).
pub async fn fleet(config: &Config, url: Option<&str>) -> Result<Arc<dyn FleetBackend>> {
    switchyard_kit::open_fleet_backend_with(
        &url_for(config, Port::Fleet, url)?,
        &config.open_options(Port::Fleet),
    )
    .await
}

/// Opens the stream bridge keeping `retention` events per run, with the configured key prefix
/// and `[options.stream_bridge]`.
pub async fn stream_bridge(
    config: &Config,
    url: Option<&str>,
    retention: usize,
) -> Result<Arc<dyn StreamBridge>> {
    let options = OpenOptions {
        retention: Some(retention),
        ..config.open_options(Port::StreamBridge)
    };
    switchyard_kit::open_stream_bridge_with(&url_for(config, Port::StreamBridge, url)?, &options)
        .await
}

/// The gateway's stream bridge: as [`stream_bridge`], except that the memory bridge gets the
/// byte bounds `limits` and is also returned, for its metrics (ADR 0192).
pub async fn serve_stream_bridge(
    config: &Config,
    retention: usize,
    limits: switchyard_core::stream::MemoryLimits,
) -> Result<(
    Arc<dyn StreamBridge>,
    Option<switchyard_core::stream::MemoryStreamBridge>,
)> {
    if config.url_for(Port::StreamBridge)?.is_memory() {
        let bridge = switchyard_core::stream::MemoryStreamBridge::with_limits(
            retention,
            limits,
            Arc::new(switchyard_core::SystemClock),
        )?;
        return Ok((Arc::new(bridge.clone()), Some(bridge)));
    }
    Ok((stream_bridge(config, None, retention).await?, None))
}
