//! The `StreamBridge` conformance suite: one case per guarantee of
//! [`switchyard_core::StreamBridge`]'s contract, in one module per area: delivery and retention,
//! cursors and gaps, lifecycle (cleanup, removal, bad input, close).
//!
//! ```ignore
//! async fn factory(setup: StreamBridgeSetup) -> switchyard_core::Result<StreamBridgeFixture> {
//!     let bridge = MyBridge::connect(/* own key prefix */, setup.retention).await?;
//!     Ok(StreamBridgeFixture::new(Arc::new(bridge)))
//! }
//! switchyard_conformance::stream_bridge_suite!(factory);
//! ```
//!
//! The factory builds a fresh bridge retaining `setup.retention` events per run, and fails as the
//! adapter does when that is 0. Where bridges may differ on purpose, the cases read the side the
//! bridge says it takes from [`StreamBridge::capabilities`] (see [`Capabilities`]). The factory
//! shape is the same for the four suites (ADR 0165).

use std::fmt;
use std::sync::Arc;

use futures::future::LocalBoxFuture;
use switchyard_core::{Result, StreamBridge};

mod common;
mod cursors;
mod delivery;
mod lifecycle;

pub use cursors::{
    events_after_end, evicted_cursor_yields_gap_before_any_data,
    first_delivery_outrun_yields_gap_without_cursor, gap_beats_end, live_gap_boundary,
    malformed_cursor_never_gaps, malformed_cursor_on_live_run, no_cursor_replays_retained_window,
    numeric_cursor_below_watermark_yields_gap, resumes_after_last_event_id,
    slow_subscriber_gets_gap,
};
pub use delivery::{
    end_only_run_yields_end, end_takes_no_retention_slot, event_ids_are_ordered,
    event_named_end_is_ordinary, idle_subscriber_gets_heartbeat,
    publish_subscribe_in_order_then_end, retention_keeps_newest_events,
    subscriber_waits_for_first_publish, zero_retention_is_refused,
};
pub use lifecycle::{
    bad_input_is_rejected, cleanup_under_subscriber_terminates_it, cleanup_waits_for_delay,
    closed_bridge_refuses_work, runs_are_independent, stream_exists_follows_publish_and_cleanup,
    subscribing_creates_no_stream,
};
pub use switchyard_core::stream::{
    AfterEnd, Capabilities, CursorWithoutSeq, LiveGap, MalformedCursor, Removal,
};

/// What the suite asks of the bridge a factory builds for one case.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamBridgeSetup {
    /// Events each run retains (the adapter's `queue_maxsize`); 0 in the case that checks the
    /// adapter refuses it.
    pub retention: usize,
}

/// What an adapter's factory returns for one case: a fresh bridge, and the side it takes where
/// bridges may differ on purpose, as the bridge itself says.
#[non_exhaustive]
pub struct StreamBridgeFixture {
    /// A fresh bridge (its own key prefix or instance).
    pub bridge: Arc<dyn StreamBridge>,
    /// The bridge's side of every documented difference, from [`StreamBridge::capabilities`].
    pub capabilities: Capabilities,
}

impl StreamBridgeFixture {
    /// A fixture of `bridge`; the cases hold it to the capabilities it reports.
    pub fn new(bridge: Arc<dyn StreamBridge>) -> Self {
        let capabilities = bridge.capabilities();
        StreamBridgeFixture {
            bridge,
            capabilities,
        }
    }
}

impl fmt::Debug for StreamBridgeFixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamBridgeFixture")
            .field("bridge", &self.bridge)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

/// The factory every case is given. Its future need not be `Send`: a case awaits it on the test's
/// own task (the SQLite fleet backend's `open`, for one, is not `Send` for every lifetime).
pub type Factory<'a> =
    &'a dyn Fn(StreamBridgeSetup) -> LocalBoxFuture<'static, Result<StreamBridgeFixture>>;

/// Stamps one `#[tokio::test]` per guarantee of the `StreamBridge` contract, named after the case.
///
/// `$factory` is an `async fn(StreamBridgeSetup) -> switchyard_core::Result<StreamBridgeFixture>`,
/// or a closure returning such a future; it is called once or more per case.
#[macro_export]
macro_rules! stream_bridge_suite {
    ($factory:expr) => {
        // The cases of `guarantees.toml`, in its order (ADR 0362).
        $crate::__stream_bridge_suite_cases!($factory);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::stream_bridge::$case(&|setup| ::std::boxed::Box::pin(($factory)(setup)))
                    .await;
            }
        )*
    };
}
