//! The values the fleet backend hands to Python: deliveries, pool items, worker records,
//! subscriptions, and JSON documents as Python objects.

use std::sync::Arc;

use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use switchyard_core::fleet::{Delivery, EventStream, PoolItem, Priority, WorkerRecord};
use tokio::sync::Mutex;
use tokio::sync::watch;

/// fleet's integer priority of a tier (`1`, `0`, `-1`).
pub(crate) fn priority_int(priority: Priority) -> i64 {
    match priority {
        Priority::High => 1,
        Priority::Normal => 0,
        Priority::Low => -1,
    }
}

/// One reservation of a task.
#[pyclass(module = "switchyard._native", name = "Delivery", frozen)]
#[derive(Debug)]
pub(crate) struct PyDelivery {
    #[pyo3(get)]
    receipt: String,
    body: Vec<u8>,
    #[pyo3(get)]
    task_id: Option<String>,
    #[pyo3(get)]
    attempt: u32,
    #[pyo3(get)]
    priority: i64,
    #[pyo3(get)]
    visible_until: f64,
}

impl From<Delivery> for PyDelivery {
    fn from(d: Delivery) -> Self {
        PyDelivery {
            receipt: d.receipt.as_str().to_string(),
            body: d.body,
            task_id: d.task_id,
            attempt: d.attempt,
            priority: priority_int(d.priority),
            visible_until: d.visible_until,
        }
    }
}

#[pymethods]
impl PyDelivery {
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.body)
    }

    fn __repr__(&self) -> String {
        format!(
            "<Delivery task_id={} attempt={}>",
            self.task_id.as_deref().unwrap_or("None"),
            self.attempt
        )
    }
}

/// One item of a pool.
#[pyclass(module = "switchyard._native", name = "PoolItem", frozen)]
#[derive(Debug)]
pub(crate) struct PyPoolItem {
    #[pyo3(get)]
    id: String,
    payload: Vec<u8>,
    /// The tags as a JSON object.
    #[pyo3(get)]
    tags: String,
    #[pyo3(get)]
    expires_at: Option<f64>,
    #[pyo3(get)]
    in_use_until: Option<f64>,
}

impl From<PoolItem> for PyPoolItem {
    fn from(item: PoolItem) -> Self {
        PyPoolItem {
            id: item.id,
            payload: item.payload,
            tags: serde_json::Value::Object(item.tags).to_string(),
            expires_at: item.expires_at,
            in_use_until: item.in_use_until,
        }
    }
}

#[pymethods]
impl PyPoolItem {
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.payload)
    }

    fn __repr__(&self) -> String {
        format!("<PoolItem id={:?}>", self.id)
    }
}

/// A registered worker.
#[pyclass(module = "switchyard._native", name = "WorkerRecord", frozen)]
#[derive(Debug)]
pub(crate) struct PyWorkerRecord {
    /// JSON.
    #[pyo3(get)]
    hardware: String,
    /// JSON.
    #[pyo3(get)]
    config: String,
    #[pyo3(get)]
    config_gen: u64,
    #[pyo3(get)]
    state: String,
    #[pyo3(get)]
    last_seen: f64,
    #[pyo3(get)]
    last_error: Option<String>,
    #[pyo3(get)]
    applied_gen: Option<u64>,
    /// JSON: the last stats document (`{}` before any).
    #[pyo3(get)]
    stats: String,
}

impl From<WorkerRecord> for PyWorkerRecord {
    fn from(w: WorkerRecord) -> Self {
        PyWorkerRecord {
            hardware: w.hardware.to_string(),
            config: w.config.to_string(),
            config_gen: w.config_gen,
            state: w.state,
            last_seen: w.last_seen,
            last_error: w.last_error,
            applied_gen: w.applied_gen,
            stats: w.stats.to_string(),
        }
    }
}

#[pymethods]
impl PyWorkerRecord {
    fn __repr__(&self) -> String {
        format!("<WorkerRecord state={:?}>", self.state)
    }
}

/// Messages of one topic, published after the subscription was made.
#[pyclass(module = "switchyard._native", name = "Subscription", frozen)]
pub(crate) struct PySubscription {
    // An async mutex: `__anext__` holds it across the wait for a message. `None` once closed.
    stream: Arc<Mutex<Option<EventStream>>>,
    // Wakes a waiting `__anext__` when `close` is called.
    closed: watch::Sender<bool>,
}

impl std::fmt::Debug for PySubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PySubscription")
    }
}

impl PySubscription {
    pub(crate) fn new(stream: EventStream) -> Self {
        PySubscription {
            stream: Arc::new(Mutex::new(Some(stream))),
            closed: watch::channel(false).0,
        }
    }
}

#[pymethods]
impl PySubscription {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stream = self.stream.clone();
        let mut closed = self.closed.subscribe();
        crate::convert::awaitable_next(py, async move {
            let mut guard = stream.lock().await;
            let next = match guard.as_mut() {
                Some(stream) => tokio::select! {
                    message = stream.next() => message,
                    _ = closed.wait_for(|closed| *closed) => None,
                },
                None => None,
            };
            if next.is_none() {
                // Dropping the stream ends the backend's subscription.
                guard.take();
            }
            Ok(next.map(crate::convert::Bytes))
        })
    }

    /// Ends the subscription: a waiting `__anext__` and every later one raise
    /// `StopAsyncIteration`.
    fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// A queue's counts as Python sees them: the port's fields and their sum `waiting`.
pub(crate) fn stats_json(
    stats: switchyard_core::fleet::QueueStats,
) -> switchyard_core::Result<Json> {
    let mut value = serde_json::to_value(stats)
        .map_err(|e| switchyard_core::Error::corrupt("queue_stats", e))?;
    if let Some(map) = value.as_object_mut() {
        map.insert("waiting".into(), stats.waiting().into());
    }
    Ok(Json(value))
}

/// A JSON value that reaches Python as `dict`, `list`, `str`, `int`, `float`, `bool` or `None`.
#[derive(Debug)]
pub(crate) struct Json(pub(crate) serde_json::Value);

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        to_python(py, &self.0)
    }
}

fn to_python<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_python(py, v)?)?;
            }
            dict.into_any()
        }
    })
}
