//! The stream bridge as the Python class `StreamBridge`: publish a run's live events, follow them
//! from a `Last-Event-ID` cursor (what an SSE endpoint in Python serves), end and clean up.

use std::sync::Arc;

use futures::StreamExt;
use pyo3::prelude::*;
use switchyard_core::StreamBridge;
use switchyard_core::stream::{ItemStream, StreamItem};
use tokio::sync::Mutex;

use crate::convert::{Handle, awaitable, backend_of, json, seconds, seconds_at_least_zero};
use crate::errors;

/// Opens a stream bridge by URL (see `_native.pyi`); `prefix` is the Redis key prefix and
/// `retention` the number of events kept per run for replay.
#[pyfunction]
#[pyo3(signature = (url, *, prefix = None, retention = None))]
pub(crate) fn open_stream_bridge(
    py: Python<'_>,
    url: String,
    prefix: Option<String>,
    retention: Option<usize>,
) -> PyResult<Bound<'_, PyAny>> {
    awaitable(py, async move {
        let options = switchyard_kit::OpenOptions {
            prefix,
            retention,
            ..switchyard_kit::OpenOptions::default()
        };
        let bridge = switchyard_kit::open_stream_bridge_with(&url, &options).await?;
        Ok(PyStreamBridge {
            bridge: Handle::new(bridge, "stream bridge"),
            backend: backend_of(&url),
        })
    })
}

/// A stream bridge (the Rust `StreamBridge` port, whose guarantees hold unchanged).
#[pyclass(module = "switchyard._native", name = "StreamBridge", frozen)]
#[derive(Debug)]
pub(crate) struct PyStreamBridge {
    bridge: Handle<dyn StreamBridge>,
    backend: &'static str,
}

impl PyStreamBridge {
    fn port(&self) -> PyResult<Arc<dyn StreamBridge>> {
        self.bridge.get()
    }
}

#[pymethods]
impl PyStreamBridge {
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// Appends one event (`data` is JSON text) and returns its id, the SSE cursor.
    fn publish<'py>(
        &self,
        py: Python<'py>,
        run_id: String,
        event: String,
        data: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let bridge = self.port()?;
        let data = json("data", &data)?;
        awaitable(
            py,
            async move { bridge.publish(&run_id, &event, &data).await },
        )
    }

    fn publish_end<'py>(&self, py: Python<'py>, run_id: String) -> PyResult<Bound<'py, PyAny>> {
        let bridge = self.port()?;
        awaitable(py, async move { bridge.publish_end(&run_id).await })
    }

    /// Follows `run_id` after `last_event_id`: an async iterator of `StreamItem`s that ends
    /// after an `end` or a `gap` item.
    #[pyo3(signature = (run_id, last_event_id = None, heartbeat_seconds = 15.0))]
    fn subscribe(
        &self,
        run_id: String,
        last_event_id: Option<String>,
        heartbeat_seconds: f64,
    ) -> PyResult<PyStreamSubscription> {
        let heartbeat = seconds("heartbeat_seconds", heartbeat_seconds)?;
        if heartbeat.is_zero() {
            return Err(errors::invalid(
                "heartbeat_seconds",
                "must be more than 0: a subscriber hears from the bridge at least this often",
            ));
        }
        let stream = self
            .port()?
            .subscribe(&run_id, last_event_id.as_deref(), heartbeat);
        Ok(PyStreamSubscription {
            items: Arc::new(Mutex::new(Some(stream))),
        })
    }

    #[pyo3(signature = (run_id, delay_seconds = 0.0))]
    fn cleanup<'py>(
        &self,
        py: Python<'py>,
        run_id: String,
        delay_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let bridge = self.port()?;
        let delay = seconds_at_least_zero("delay_seconds", delay_seconds)?;
        awaitable(py, async move { bridge.cleanup(&run_id, delay).await })
    }

    fn stream_exists<'py>(&self, py: Python<'py>, run_id: String) -> PyResult<Bound<'py, PyAny>> {
        let bridge = self.port()?;
        awaitable(py, async move { bridge.stream_exists(&run_id).await })
    }

    /// Closes the bridge: subscriptions end, later calls raise `ClosedError`.
    fn aclose<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bridge = self.port()?;
        self.bridge.close();
        awaitable(py, async move { bridge.close().await })
    }

    fn __repr__(&self) -> String {
        format!("<switchyard StreamBridge on {}>", self.backend)
    }
}

/// One item of a subscription: `kind` is `event` (with `id`, `event`, `data`), `heartbeat`,
/// `end`, or `gap` (with `requested`, `earliest`, `latest`).
#[pyclass(module = "switchyard._native", name = "StreamItem", frozen)]
#[derive(Debug)]
pub(crate) struct PyStreamItem {
    #[pyo3(get)]
    kind: &'static str,
    #[pyo3(get)]
    id: Option<String>,
    #[pyo3(get)]
    event: Option<String>,
    /// The event's data as JSON text.
    #[pyo3(get)]
    data: Option<String>,
    #[pyo3(get)]
    requested: Option<String>,
    #[pyo3(get)]
    earliest: Option<String>,
    #[pyo3(get)]
    latest: Option<String>,
}

impl From<StreamItem> for PyStreamItem {
    fn from(item: StreamItem) -> Self {
        let mut out = PyStreamItem {
            kind: "heartbeat",
            id: None,
            event: None,
            data: None,
            requested: None,
            earliest: None,
            latest: None,
        };
        match item {
            StreamItem::Event(e) => {
                out.kind = "event";
                out.id = Some(e.id);
                out.event = Some(e.event);
                out.data = Some(e.data.to_string());
            }
            StreamItem::Heartbeat => {}
            StreamItem::End => out.kind = "end",
            StreamItem::Gap(gap) => {
                out.kind = "gap";
                out.requested = gap.requested;
                out.earliest = Some(gap.earliest);
                out.latest = Some(gap.latest);
            }
        }
        out
    }
}

#[pymethods]
impl PyStreamItem {
    fn __repr__(&self) -> String {
        match (self.kind, &self.id, &self.event) {
            ("event", Some(id), Some(event)) => format!("<StreamItem event {event} id={id}>"),
            (kind, _, _) => format!("<StreamItem {kind}>"),
        }
    }
}

/// A subscription to one run; `async for` it.
#[pyclass(module = "switchyard._native", name = "StreamSubscription", frozen)]
pub(crate) struct PyStreamSubscription {
    // `None` after the terminal item. An async mutex: `__anext__` holds it across the wait.
    items: Arc<Mutex<Option<ItemStream>>>,
}

impl std::fmt::Debug for PyStreamSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyStreamSubscription")
    }
}

#[pymethods]
impl PyStreamSubscription {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self.items.clone();
        crate::convert::awaitable_next(py, async move {
            let mut guard = items.lock().await;
            let next = match guard.as_mut() {
                Some(stream) => stream.next().await,
                None => None,
            };
            match next {
                Some(Ok(item)) => {
                    if item.is_terminal() {
                        guard.take();
                    }
                    Ok(Some(PyStreamItem::from(item)))
                }
                Some(Err(e)) => {
                    guard.take();
                    Err(e)
                }
                None => {
                    guard.take();
                    Ok(None)
                }
            }
        })
    }
}
