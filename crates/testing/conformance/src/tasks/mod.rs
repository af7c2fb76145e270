//! Conformance suite of [`Tasks`](switchyard_core::fleet::Tasks), the control of a task (ADR
//! 0380): one case per guarantee, on a [`FleetBackend`](switchyard_core::fleet::FleetBackend)
//! built by the same factory as `fleet_backend_suite!`.
//!
//! ```ignore
//! switchyard_conformance::fleet_backend_suite!(factory);
//! switchyard_conformance::fleet_task_suite!(factory);
//! ```
//!
//! It is a suite of its own until every adapter keeps task records; then it folds into
//! `fleet_backend_suite!` (ADR 0380).

mod cancel;
mod common;
mod log;
mod record;

pub use cancel::{task_cancel_bulk, task_cancel_race, task_cancel_running, task_cancel_waiting};
pub use log::{task_end_counts, task_events, task_retention};
pub use record::{task_lookup, task_results, task_unique_id};

/// Stamps one `#[tokio::test]` per guarantee of [`Tasks`](switchyard_core::fleet::Tasks), named
/// after the guarantee. `$factory` is the factory `fleet_backend_suite!` takes.
#[macro_export]
macro_rules! fleet_task_suite {
    ($factory:expr) => {
        // The cases of `guarantees.toml`, in its order (ADR 0362).
        $crate::__fleet_task_suite_cases!($factory);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::fleet::run(
                    &|setup| ::std::boxed::Box::pin(($factory)(setup)),
                    $crate::tasks::$case,
                )
                .await;
            }
        )*
    };
}
