//! Opening the checkpoint cache with its settings: the serializer and the Redis adapter's
//! deadlines (`[checkpoint_cache]` in the configuration file).
//!
//! ```toml
//! [checkpoint_cache]
//! serializer = "msgpack"        # what deer-flow writes (default); "json" only without deer-flow
//! ttl_seconds = 86400           # Redis only; 0 = no expiry
//! call_timeout_ms = 250         # Redis only: longest a call waits before it is a miss
//! reconnect_interval_ms = 500   # Redis only: hits return at most this long after Redis does
//! ```
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> switchyard_kit::core::Result<()> {
//! use switchyard_kit::core::HistoryEntry;
//! use switchyard_kit::core::cache::make_history_key;
//! use switchyard_kit::{CacheSettings, SerializerChoice, open_history_cache};
//!
//! let settings = CacheSettings { serializer: SerializerChoice::Json, ..CacheSettings::default() };
//! let cache = open_history_cache("memory://", &settings).await?;
//! let key = make_history_key("p", "thread-1", "", "ckpt-1", "messages");
//! cache.set_many(vec![(key.clone(), HistoryEntry::from_json(vec![serde_json::json!(1)], None))]).await;
//! assert!(cache.get_many(&[key]).await.len() == 1);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use serde::Deserialize;
use switchyard_core::cache::{EntrySerializer, HistoryCache, JsonSerializer, MsgpackSerializer};
use switchyard_core::{Error, Result};

use crate::url::BackendUrl;

/// Entries a `memory://` checkpoint cache holds before evicting.
pub const DEFAULT_MEMORY_CACHE_ENTRIES: usize = 10_000;

/// The encoding of cache entries (ADR 0211).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SerializerChoice {
    /// Tag `msgpack`, LangGraph's `JsonPlusSerializer` format: what deer-flow writes and reads.
    #[default]
    Msgpack,
    /// Tag `json`: readable without msgpack, but deer-flow decodes it through LangChain's reviver,
    /// so use it only where no deer-flow worker shares the keys.
    Json,
}

impl SerializerChoice {
    /// The serializer.
    pub fn serializer(self) -> Arc<dyn EntrySerializer> {
        match self {
            SerializerChoice::Msgpack => Arc::new(MsgpackSerializer),
            SerializerChoice::Json => Arc::new(JsonSerializer),
        }
    }
}

/// The checkpoint cache's settings; every field has the default shown in the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSettings {
    /// How entries are encoded.
    pub serializer: SerializerChoice,
    /// Seconds a Redis entry lives; 0 = no expiry.
    pub ttl_seconds: u64,
    /// Longest a Redis call waits before it degrades to a miss, in milliseconds.
    pub call_timeout_ms: u64,
    /// Longest time between Redis reconnect attempts, in milliseconds (at least 150).
    pub reconnect_interval_ms: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            serializer: SerializerChoice::Msgpack,
            ttl_seconds: 86_400,
            call_timeout_ms: 250,
            reconnect_interval_ms: 500,
        }
    }
}

impl CacheSettings {
    /// Refuses a zero call timeout and a reconnect interval under 150 ms.
    pub fn validate(&self) -> Result<()> {
        if self.call_timeout_ms == 0 {
            return Err(Error::config(
                "checkpoint_cache.call_timeout_ms",
                "must be at least 1; a cache call must never hang",
            ));
        }
        if self.reconnect_interval_ms < 150 {
            return Err(Error::config(
                "checkpoint_cache.reconnect_interval_ms",
                "must be at least 150 (the reconnect jitter is 100 ms)",
            ));
        }
        Ok(())
    }
}

/// Opens a checkpoint cache (`memory://`, `redis://…`, `rediss://…`, `redis-cluster://…`) as a
/// [`HistoryCache`] with the settings' serializer. Never waits for Redis: an unreachable Redis
/// serves misses until it answers.
pub async fn open_history_cache(url: &str, settings: &CacheSettings) -> Result<HistoryCache> {
    history_cache(
        &BackendUrl::parse("checkpoint_cache", url)?,
        "checkpoint_cache",
        settings,
    )
    .await
}

pub(crate) async fn history_cache(
    url: &BackendUrl,
    key: &str,
    settings: &CacheSettings,
) -> Result<HistoryCache> {
    settings.validate()?;
    let port = crate::backend::of(url)?
        .checkpoint_cache(url, key, settings)
        .await?;
    Ok(HistoryCache::with_serializer(
        port,
        settings.serializer.serializer(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_to_what_deer_flow_writes_and_refuse_hanging_values() {
        let d = CacheSettings::default();
        assert_eq!(d.serializer, SerializerChoice::Msgpack);
        d.validate().expect("defaults are valid");
        let zero = CacheSettings {
            call_timeout_ms: 0,
            ..CacheSettings::default()
        };
        assert!(
            matches!(zero.validate(), Err(Error::Config { key, .. }) if key.contains("call_timeout"))
        );
        let fast = CacheSettings {
            reconnect_interval_ms: 100,
            ..CacheSettings::default()
        };
        assert!(fast.validate().is_err());
    }

    #[test]
    fn the_config_file_chooses_the_serializer() {
        let c = crate::Config::from_toml_str(
            "[checkpoint_cache]\nserializer = \"json\"\nttl_seconds = 0\n",
            "f.toml",
        )
        .expect("config");
        assert_eq!(c.checkpoint_cache.serializer, SerializerChoice::Json);
        assert_eq!(c.checkpoint_cache.ttl_seconds, 0);
        assert_eq!(
            crate::Config::default().checkpoint_cache.serializer,
            SerializerChoice::Msgpack
        );
        for bad in [
            "[checkpoint_cache]\nserializer = \"pickle\"\n",
            "[checkpoint_cache]\ncall_timeout_ms = 0\n",
            "[checkpoint_cache]\nserialiser = \"json\"\n",
        ] {
            assert!(
                crate::Config::from_toml_str(bad, "f.toml").is_err(),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn memory_cache_uses_the_chosen_serializer() {
        let json = CacheSettings {
            serializer: SerializerChoice::Json,
            ..CacheSettings::default()
        };
        let cache = open_history_cache("memory://", &json).await.expect("open");
        let entry = switchyard_core::HistoryEntry::from_json(vec![serde_json::json!(1)], None);
        cache.set_many(vec![("k".into(), entry.clone())]).await;
        let stored = cache.port().get_many(&["k".to_string()]).await;
        assert_eq!(stored["k"].tag(), "json");
        assert_eq!(cache.get_many(&["k".to_string()]).await["k"], entry);
    }
}
