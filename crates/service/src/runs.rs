//! Runs: start (claim), append, resume, read, list, and what reaches the stream bridge.

use std::sync::Arc;
use std::time::Duration;

use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;

/// How runs behave where the caller does not say.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// A claim takes over an open run whose latest event is older than this.
    pub stale_after: Duration,
    /// How long a finished run's stream stays replayable before it is released.
    pub stream_grace: Duration,
}

/// The run rules over an event store and a stream bridge (cheap to clone).
#[derive(Debug, Clone)]
pub struct Runs {
    store: Arc<dyn EventStore>,
    bridge: Arc<dyn StreamBridge>,
    settings: RunSettings,
}

impl Runs {
    /// The rules over `store` (the source of truth) and `bridge` (where stored events are
    /// published for live readers).
    pub fn new(
        store: Arc<dyn EventStore>,
        bridge: Arc<dyn StreamBridge>,
        settings: RunSettings,
    ) -> Self {
        Runs {
            store,
            bridge,
            settings,
        }
    }

    /// The event store the rules write to.
    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.store
    }

    /// The stream bridge stored events are published to.
    pub fn bridge(&self) -> &Arc<dyn StreamBridge> {
        &self.bridge
    }

    /// The settings in force.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }
}
