//! The `EventStore` suite: one case per guarantee of [`EventStore`], run on every adapter, in one
//! module per area: appends, conditional appends, `claim_start`, `claim_resume`, reads.
//!
//! ```ignore
//! async fn factory(setup: EventStoreSetup) -> switchyard_core::Result<EventStoreFixture> {
//!     let store = MyStore::open(/* fresh prefix or file */, setup.clock).await?;
//!     Ok(EventStoreFixture::new(Arc::new(store)).with_corruption(/* writes a bad record */))
//! }
//! switchyard_conformance::event_store_suite!(factory);
//! ```
//! The setup's clock is `Some` when a case pins time (stale edges, timestamps) and `None` when the
//! store should use its own clock. The factory shape is the same for the four suites (ADR 0165).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, LocalBoxFuture};
use switchyard_core::{Clock, EventStore, Result};

mod appends;
mod claim_resume;
mod claim_start;
mod common;
mod conditional;
mod limits;
mod line;
mod reads;

pub use appends::{
    batch_shares_one_store_timestamp, concurrent_appenders_one_run_dense,
    dense_seqs_from_zero_per_run, empty_batch_returns_nothing, envelope_comes_from_context,
    invalid_payload_writes_nothing, store_clock_stamps_ts,
};
pub use claim_resume::{claim_resume_concurrent_exactly_once, claim_resume_waiting_or_paused_only};
pub use claim_start::{
    claim_start_concurrent_one_winner, claim_start_names_holder_deterministically,
    claim_start_on_free_log_wins, claim_start_refused_by_fresh_open_run,
    claim_start_stale_edge_is_strict, claim_start_steps_over_stale_runs,
    claim_start_suspended_runs_hold_until_stale,
    claim_start_terminal_and_pending_runs_hold_nothing, claim_start_with_long_closed_history,
};
pub use conditional::append_if_open_only_while_open;
pub use limits::{claim_start_huge_stale_after, claim_start_refuses_existing_run_id};
pub use line::{
    claim_enqueue_starts_in_claim_order, claim_interrupt_and_rollback_end_open_runs,
    line_keeps_claim_order,
};
pub use reads::{
    corrupt_record_is_typed_and_contained, isolation_with_hostile_ids, list_runs_by_value,
    read_pages_by_offset_and_limit, read_refuses_negative_limit, read_run_from_seq,
    run_status_folds_and_unknown_is_pending,
};

/// What the suite asks of the store a factory builds for one case.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EventStoreSetup {
    /// `Some` when the case pins time: the store must stamp events with this clock. `None`: the
    /// store's own clock.
    pub clock: Option<Arc<dyn Clock>>,
}

/// What an adapter's factory returns for one case: a fresh store and how to corrupt it.
#[non_exhaustive]
pub struct EventStoreFixture {
    /// A fresh store (its own prefix, file or instance).
    pub store: Arc<dyn EventStore>,
    corruption: Corruption,
}

/// How guarantee `read.corrupt_contained` is shown on an adapter. Every fixture says one or the
/// other, so an adapter that forgets its corruption hook fails that case instead of passing it
/// without a check.
pub(crate) enum Corruption {
    /// Neither `with_corruption` nor `typed_storage_only` was called.
    Undeclared,
    /// Writes one undecodable record behind the store's back.
    Hook(CorruptFn),
    /// The storage holds typed values only (the memory store): nothing can be corrupt.
    TypedStorageOnly,
}

impl EventStoreFixture {
    /// A fixture of `store`; say how it shows guarantee `read.corrupt_contained` with
    /// [`with_corruption`] or [`typed_storage_only`].
    ///
    /// [`with_corruption`]: EventStoreFixture::with_corruption
    /// [`typed_storage_only`]: EventStoreFixture::typed_storage_only
    pub fn new(store: Arc<dyn EventStore>) -> Self {
        EventStoreFixture {
            store,
            corruption: Corruption::Undeclared,
        }
    }

    /// `hook` writes one undecodable record into the adapter's storage where the
    /// [`CorruptRecord`] says, bypassing validation.
    pub fn with_corruption<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(CorruptRecord) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.corruption = Corruption::Hook(Arc::new(move |record| hook(record).boxed()));
        self
    }

    /// The store keeps typed values only, so no record can be undecodable (the memory store).
    pub fn typed_storage_only(mut self) -> Self {
        self.corruption = Corruption::TypedStorageOnly;
        self
    }
}

impl fmt::Debug for EventStoreFixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let corruption = match self.corruption {
            Corruption::Undeclared => "undeclared",
            Corruption::Hook(_) => "hook",
            Corruption::TypedStorageOnly => "typed storage only",
        };
        f.debug_struct("EventStoreFixture")
            .field("store", &self.store)
            .field("corruption", &corruption)
            .finish()
    }
}

/// A corruption hook, as [`EventStoreFixture::with_corruption`] keeps it.
pub type CorruptFn = Arc<dyn Fn(CorruptRecord) -> BoxFuture<'static, ()> + Send + Sync>;

/// Where to put the corrupt record.
#[derive(Debug, Clone)]
pub struct CorruptRecord {
    /// The namespace key (`""` for none).
    pub namespace_key: String,
    /// The log.
    pub log_key: String,
    /// The run the record claims to belong to.
    pub run_id: String,
}

/// The factory every case is given. Its future need not be `Send`: a case awaits it on the test's
/// own task (the SQLite fleet backend's `open`, for one, is not `Send` for every lifetime).
pub type Factory<'a> =
    &'a dyn Fn(EventStoreSetup) -> LocalBoxFuture<'static, Result<EventStoreFixture>>;

/// Stamps out one `#[tokio::test]` per guarantee, named after the case.
///
/// `$factory` is an `async fn(EventStoreSetup) -> switchyard_core::Result<EventStoreFixture>`, or
/// a closure returning such a future; it is called once or more per case.
#[macro_export]
macro_rules! event_store_suite {
    ($factory:expr) => {
        // The cases of `guarantees.toml`, in its order (ADR 0362).
        $crate::__event_store_suite_cases!($factory);
    };
    (@cases $factory:expr; $($case:ident),+ $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                $crate::event_store::$case(&|setup| ::std::boxed::Box::pin(($factory)(setup)))
                    .await;
            }
        )+
    };
}
