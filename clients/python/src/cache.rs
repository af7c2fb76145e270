//! The checkpoint cache as the Python class `CheckpointCache`: entries are `(tag, payload)` pairs
//! read and written byte for byte, and no call ever raises for a backend failure (a failed read
//! is a miss), as the port promises.

use std::sync::Arc;

use pyo3::prelude::*;
use switchyard_core::CheckpointCache;
use switchyard_core::cache::TypedPayload;

use crate::convert::{Bytes, Handle, awaitable, backend_of};
use crate::errors;

/// Opens a checkpoint cache by URL (see `_native.pyi`).
#[pyfunction]
pub(crate) fn open_checkpoint_cache(py: Python<'_>, url: String) -> PyResult<Bound<'_, PyAny>> {
    awaitable(py, async move {
        let cache = switchyard_kit::open_checkpoint_cache(&url).await?;
        Ok(PyCheckpointCache {
            cache: Handle::new(cache, "checkpoint cache"),
            backend: backend_of(&url),
        })
    })
}

/// A checkpoint cache (the Rust `CheckpointCache` port, whose guarantees hold unchanged).
#[pyclass(module = "switchyard._native", name = "CheckpointCache", frozen)]
#[derive(Debug)]
pub(crate) struct PyCheckpointCache {
    cache: Handle<dyn CheckpointCache>,
    backend: &'static str,
}

impl PyCheckpointCache {
    fn port(&self) -> PyResult<Arc<dyn CheckpointCache>> {
        self.cache.get()
    }
}

#[pymethods]
impl PyCheckpointCache {
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// The hits among `keys`: `{key: (tag, payload)}`.
    fn get_many<'py>(&self, py: Python<'py>, keys: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.port()?;
        awaitable(py, async move {
            Ok(cache
                .get_many(&keys)
                .await
                .into_iter()
                .map(|(key, entry)| {
                    let (tag, payload) = entry.into_parts();
                    (key, (tag, Bytes(payload.to_vec())))
                })
                .collect::<std::collections::HashMap<_, _>>())
        })
    }

    /// Stores `(key, tag, payload)` entries in order.
    fn set_many<'py>(
        &self,
        py: Python<'py>,
        entries: Vec<(String, String, Vec<u8>)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.port()?;
        let entries = entries
            .into_iter()
            .map(|(key, tag, payload)| {
                TypedPayload::new(tag, payload)
                    .map(|entry| (key, entry))
                    .map_err(errors::to_py)
            })
            .collect::<PyResult<Vec<_>>>()?;
        awaitable(py, async move {
            cache.set_many(entries).await;
            Ok(())
        })
    }

    fn delete_thread<'py>(
        &self,
        py: Python<'py>,
        key_prefix: String,
        thread_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.port()?;
        awaitable(py, async move {
            cache.delete_thread(&key_prefix, &thread_id).await;
            Ok(())
        })
    }

    /// `{"hits", "misses", "evictions", "entries"}` of this instance.
    fn stats(&self) -> PyResult<std::collections::BTreeMap<&'static str, u64>> {
        Ok(self.port()?.stats().as_pairs().into_iter().collect())
    }

    /// Closes the cache; later reads are misses, as the port promises.
    fn aclose<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.port()?;
        awaitable(py, async move {
            cache.close().await;
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!("<switchyard CheckpointCache on {}>", self.backend)
    }
}
