//! Observing backend calls: one decorator over every port, so metrics and traces are wired once
//! instead of at each call site (ADR 0374).
//!
//! [`Observed`] wraps a port (`Arc<dyn EventStore>`, `Arc<dyn StreamBridge>`, `Arc<dyn
//! FleetBackend>`, `Arc<dyn CheckpointCache>`) and is that port itself: each call runs inside a
//! `backend_call` tracing span (port, adapter, call) and, once it has finished, is reported to an
//! [`Observer`] with its duration and outcome. The gateway's Prometheus metrics are one observer;
//! an application can pass its own. What a call does is unchanged: its arguments, its result and
//! its error reach the caller as they are.
//!
//! ```
//! # use std::sync::Arc;
//! # use std::time::Duration;
//! use switchyard_core::observe::{Call, Observed, Observer, Outcome};
//! use switchyard_core::store::EventStore;
//!
//! #[derive(Debug)]
//! struct Log;
//! impl Observer for Log {
//!     fn finished(&self, call: &Call<'_>, elapsed: Duration, outcome: Outcome) {
//!         println!("{} {} {:?} {:?}", call.port.as_str(), call.name, elapsed, outcome);
//!     }
//! }
//!
//! let store: Arc<dyn EventStore> = Arc::new(switchyard_core::MemoryEventStore::new());
//! let store: Arc<dyn EventStore> = Observed::new(store, "memory", Arc::new(Log)).into_arc();
//! # let _ = store;
//! ```

mod cache;
mod fleet;
mod store;
mod stream;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument as _;

/// The port a call went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PortKind {
    /// [`EventStore`](crate::store::EventStore).
    EventStore,
    /// [`StreamBridge`](crate::stream::StreamBridge).
    StreamBridge,
    /// [`CheckpointCache`](crate::cache::CheckpointCache).
    CheckpointCache,
    /// [`FleetBackend`](crate::fleet::FleetBackend).
    Fleet,
}

impl PortKind {
    /// The port's name in labels and spans: `event_store`, `stream_bridge`, `checkpoint_cache`,
    /// `fleet`.
    pub fn as_str(self) -> &'static str {
        match self {
            PortKind::EventStore => "event_store",
            PortKind::StreamBridge => "stream_bridge",
            PortKind::CheckpointCache => "checkpoint_cache",
            PortKind::Fleet => "fleet",
        }
    }
}

/// One backend call: through which port, to which adapter, which method.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The port the call went through.
    pub port: PortKind,
    /// The adapter's name as the wrapper was given it (`redis`, `sqlite`, …).
    pub adapter: &'a str,
    /// The port method (`append`, `queue_reserve`, …).
    pub name: &'static str,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// It returned a result (a lost claim or an empty reserve is a result too).
    Ok,
    /// It returned an error.
    Error,
}

/// Told of every finished backend call of the ports an [`Observed`] wraps. Called on the
/// caller's task right after the call returns, so it must be cheap and must not block.
pub trait Observer: Send + Sync + fmt::Debug {
    /// `call` took `elapsed` and ended with `outcome`.
    fn finished(&self, call: &Call<'_>, elapsed: Duration, outcome: Outcome);
}

/// A port with every call traced and reported to an [`Observer`]; it implements the port it
/// wraps.
pub struct Observed<P: ?Sized> {
    inner: Arc<P>,
    adapter: String,
    observer: Arc<dyn Observer>,
}

impl<P: ?Sized> fmt::Debug for Observed<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed")
            .field("adapter", &self.adapter)
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

impl<P: ?Sized> Observed<P> {
    /// Wraps `inner`, naming its adapter `adapter` in spans and reports.
    pub fn new(inner: Arc<P>, adapter: impl Into<String>, observer: Arc<dyn Observer>) -> Self {
        Observed {
            inner,
            adapter: adapter.into(),
            observer,
        }
    }

    /// The wrapped port.
    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// The wrapper in an `Arc`, as the ports are held (`Arc<dyn EventStore>` and the others).
    pub fn into_arc(self) -> Arc<Self> {
        Arc::new(self)
    }

    /// Runs `work` as the call `name` of `port`: in its span, timed, reported.
    async fn call<T, E, F>(&self, port: PortKind, name: &'static str, work: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let span = tracing::debug_span!(
            "backend_call",
            port = port.as_str(),
            adapter = %self.adapter,
            call = name
        );
        let started = Instant::now();
        let out = work.instrument(span).await;
        self.report(port, name, started.elapsed(), out.is_ok());
        out
    }

    /// Reports a call that has no `Result` (the cache's degrade-to-miss calls, a subscription
    /// being opened).
    fn report(&self, port: PortKind, name: &'static str, elapsed: Duration, ok: bool) {
        let call = Call {
            port,
            adapter: &self.adapter,
            name,
        };
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        self.observer.finished(&call, elapsed, outcome);
    }
}

#[cfg(test)]
mod tests;
