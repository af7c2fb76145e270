//! Which backends a command uses: `--config FILE`, `SWITCHYARD_…` variables, `--redis`, `--sqlite`,
//! and a command's own `--url`, in increasing precedence.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use switchyard::core::{Error, Result};
use switchyard::{BackendUrl, Config, Port};
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;

/// Global backend options.
#[derive(Debug, Clone, Args)]
pub struct BackendArgs {
    /// A TOML config file (see the `switchyard` crate's `Config`).
    #[arg(long, global = true, env = "SWITCHYARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// One Redis for every port: several gateways then serve one fleet.
    #[arg(long, global = true)]
    pub redis: Option<String>,
    /// The SQLite file of the embedded default.
    #[arg(long, global = true)]
    pub sqlite: Option<PathBuf>,
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
    if let Some(path) = &args.sqlite {
        config.sqlite_path = path.clone();
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
    match url {
        BackendUrl::Memory => Ok("memory://".into()),
        BackendUrl::Sqlite { path } => Ok(format!("sqlite://{}", path.display())),
        BackendUrl::Redis { url, .. } => Ok(url.clone()),
        other => Err(Error::config(
            "url",
            format!("unsupported backend {other:?}"),
        )),
    }
}

/// Opens the event store.
pub async fn event_store(config: &Config, url: Option<&str>) -> Result<Arc<dyn EventStore>> {
    switchyard::open_event_store(&url_for(config, Port::EventStore, url)?).await
}

/// Opens the fleet backend.
pub async fn fleet(config: &Config, url: Option<&str>) -> Result<Arc<dyn FleetBackend>> {
    switchyard::open_fleet_backend(&url_for(config, Port::Fleet, url)?).await
}

/// Opens the stream bridge keeping `retention` events per run.
pub async fn stream_bridge(
    config: &Config,
    url: Option<&str>,
    retention: usize,
) -> Result<Arc<dyn StreamBridge>> {
    let text = url_for(config, Port::StreamBridge, url)?;
    match BackendUrl::parse("stream_bridge", &text)? {
        BackendUrl::Memory => Ok(Arc::new(switchyard::core::MemoryStreamBridge::new(
            retention,
        )?)),
        BackendUrl::Redis {
            url,
            cluster: false,
        } => {
            let mut cfg = switchyard::stream_bridge_redis::RedisStreamBridgeConfig::new(url);
            cfg.queue_maxsize = retention;
            Ok(Arc::new(
                switchyard::stream_bridge_redis::RedisStreamBridge::connect(cfg).await?,
            ))
        }
        // Everything else gets the facade's own error message.
        _ => switchyard::open_stream_bridge(&text).await,
    }
}
