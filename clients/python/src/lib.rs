//! `switchyard._native`: the Rust half of the `switchyard-py` Python package (ADR 0389).
//!
//! Each port is one Python class over the `Arc<dyn Port>` the facade opens by URL, so Python gets
//! the same adapters, and the same guarantees, as Rust callers. Every I/O method returns an
//! asyncio awaitable whose future runs on the extension's Tokio runtime without the GIL; values
//! cross as `str` (events as their stored JSON, JSON documents as text) and `bytes`. Errors become
//! the classes of `switchyard.errors` (`errors.rs`). The Python layers over this module
//! (`switchyard.agentdeck`, `switchyard.fleet`, `switchyard.store`) give the seeds' signatures and
//! friendlier types.

use pyo3::prelude::*;

mod bridge;
mod cache;
mod convert;
mod errors;
mod fleet;
mod queue;
mod store;
mod stream;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    bridge::init_runtime()?;
    m.add_function(wrap_pyfunction!(store::open_event_store, m)?)?;
    m.add_class::<store::PyEventStore>()?;
    m.add_function(wrap_pyfunction!(fleet::open_fleet_backend, m)?)?;
    m.add_class::<fleet::PyFleetBackend>()?;
    m.add_class::<fleet::PyDelivery>()?;
    m.add_class::<fleet::PyPoolItem>()?;
    m.add_class::<fleet::PyWorkerRecord>()?;
    m.add_class::<fleet::PySubscription>()?;
    m.add_class::<queue::PyQueue>()?;
    m.add_class::<queue::PyTask>()?;
    m.add_class::<queue::PyConsumer>()?;
    m.add_function(wrap_pyfunction!(stream::open_stream_bridge, m)?)?;
    m.add_class::<stream::PyStreamBridge>()?;
    m.add_class::<stream::PyStreamItem>()?;
    m.add_class::<stream::PyStreamSubscription>()?;
    m.add_function(wrap_pyfunction!(cache::open_checkpoint_cache, m)?)?;
    m.add_class::<cache::PyCheckpointCache>()?;
    Ok(())
}
