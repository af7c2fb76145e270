//! Conformance suite of [`FleetBackend`]: one case per numbered guarantee of the trait, in one
//! module per area of the port (key-value, pools, locks, counters, queue, dead letters, schedules,
//! streams, events, workers, catalog, and the cross-area rules on names).
//!
//! ```ignore
//! async fn factory(_: FleetSetup) -> switchyard_core::Result<FleetFixture> {
//!     Ok(FleetFixture::new(Arc::new(MyBackend::connect(/* own key prefix */).await?)))
//! }
//! switchyard_conformance::fleet_backend_suite!(factory);
//! ```
//!
//! Cases wait for real expiry (holds and visibilities of a few hundred milliseconds) but never
//! assert how long anything took. Every case uses its own random names, so a shared backend is
//! fine. The factory shape is the same for the four suites (ADR 0165).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::LocalBoxFuture;
use switchyard_core::Result;
use switchyard_core::fleet::FleetBackend;

mod catalog;
mod common;
mod counters;
mod dead_letters;
mod events;
mod kv;
mod locks;
mod names;
mod pools;
mod queue;
mod schedules;
mod streams;
mod workers;

pub use catalog::{catalog, queue_names};
pub use counters::counter;
pub use dead_letters::{dlq, dlq_requeue_chosen};
pub use events::events;
pub use kv::kv;
pub use locks::lock;
pub use names::hostile_names;
pub use pools::{pool_claim_exclusive, pool_claim_order, pool_expiry};
pub use queue::{
    queue_attempts, queue_bad_bodies, queue_batches, queue_delayed, queue_fail_atomic, queue_nack,
    queue_pause, queue_priority_fifo, queue_progress, queue_promote_due, queue_rate_limit,
    queue_receipts, queue_release, queue_reserve_atomic, queue_stats, queue_submit_once,
    queue_sweep,
};
pub use schedules::schedules;
pub use streams::stream;
pub use workers::{worker_registry, worker_stats};

/// The backend under test, shared by the tasks of a case.
pub type Backend = Arc<dyn FleetBackend>;

/// What the suite tells an adapter's factory about the case it builds a backend for. The fleet
/// suite needs nothing yet; the type exists so that every suite's factory has the same shape and a
/// later need (a clock, say) is a new field, not a new signature in every adapter.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct FleetSetup {}

/// What an adapter's factory returns for one case: the backend and what must live as long as it.
#[non_exhaustive]
pub struct FleetFixture {
    /// The backend under test (fresh, or shared with its own key prefix).
    pub backend: Backend,
    /// Values dropped only when the case is over (a temporary database file, say).
    keep: Vec<Box<dyn Any + Send + Sync>>,
}

impl FleetFixture {
    /// A fixture of `backend` alone.
    pub fn new(backend: Backend) -> Self {
        FleetFixture {
            backend,
            keep: Vec::new(),
        }
    }

    /// Keeps `value` alive until the case is over (dropped after the backend's last use by the
    /// case), e.g. the temporary directory of a SQLite file.
    pub fn keeping(mut self, value: impl Any + Send + Sync) -> Self {
        self.keep.push(Box::new(value));
        self
    }
}

impl fmt::Debug for FleetFixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetFixture")
            .field("backend", &self.backend)
            .field("kept", &self.keep.len())
            .finish()
    }
}

/// The factory as the macro hands it to [`run`]. Its future need not be `Send`: [`run`] awaits it
/// on the test's own task (the SQLite fleet backend's `open`, for one, is not `Send` for every
/// lifetime).
pub type Factory<'a> = &'a dyn Fn(FleetSetup) -> LocalBoxFuture<'static, Result<FleetFixture>>;

/// Builds one fixture and runs `case` on its backend; what the fixture keeps is dropped after the
/// case. The macro calls this; a hand-written test may too.
pub async fn run<F, Fut>(factory: Factory<'_>, case: F)
where
    F: FnOnce(Backend) -> Fut,
    Fut: Future<Output = ()>,
{
    let fixture = factory(FleetSetup::default())
        .await
        .unwrap_or_else(|e| panic!("the adapter's factory could not build a backend: {e}"));
    case(fixture.backend.clone()).await;
    drop(fixture);
}

/// Stamps one `#[tokio::test]` per guarantee of [`FleetBackend`], named after the guarantee.
///
/// `$factory` is an `async fn(FleetSetup) -> switchyard_core::Result<FleetFixture>`, or a closure
/// returning such a future; it is called once per case.
#[macro_export]
macro_rules! fleet_backend_suite {
    ($factory:expr) => {
        // The cases of `guarantees.toml`, in its order (ADR 0362).
        $crate::__fleet_backend_suite_cases!($factory);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::fleet::run(
                    &|setup| ::std::boxed::Box::pin(($factory)(setup)),
                    $crate::fleet::$case,
                )
                .await;
            }
        )*
    };
}
