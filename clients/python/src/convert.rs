//! What every class of the extension shares: awaitables, bytes, seconds and closable handles.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use switchyard_core::Error;

use crate::errors;

pub(crate) use crate::bridge::{awaitable, awaitable_next};

/// Bytes that reach Python as `bytes` (a `Vec<u8>` would become a list of ints).
#[derive(Debug)]
pub(crate) struct Bytes(pub(crate) Vec<u8>);

impl<'py> IntoPyObject<'py> for Bytes {
    type Target = PyBytes;
    type Output = Bound<'py, PyBytes>;
    type Error = std::convert::Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyBytes::new(py, &self.0))
    }
}

/// Many bodies as a list of `bytes`.
pub(crate) fn bytes_list(bodies: Vec<Vec<u8>>) -> Vec<Bytes> {
    bodies.into_iter().map(Bytes).collect()
}

/// Seconds from Python as a [`Duration`]: 0 or more; infinity, or more than a `Duration` holds,
/// is [`Duration::MAX`] (the ports accept it and read it as "never"). NaN and negative values
/// are refused naming `field`.
pub(crate) fn seconds(field: &str, value: f64) -> PyResult<Duration> {
    if value.is_nan() || value < 0.0 {
        return Err(errors::invalid(
            field,
            format!("must be a number of seconds, 0 or more (got {value})"),
        ));
    }
    Ok(Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX))
}

/// [`seconds`] where the seeds read a negative value as 0 (`max(0, timeout)`): waits and
/// staleness windows.
pub(crate) fn seconds_at_least_zero(field: &str, value: f64) -> PyResult<Duration> {
    seconds(field, if value < 0.0 { 0.0 } else { value })
}

/// An optional duration (a TTL): `None` stays `None`.
pub(crate) fn optional_seconds(field: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    value.map(|v| seconds(field, v)).transpose()
}

/// A count from Python (`n`, `limit`, `max`): 0 or more.
pub(crate) fn count(field: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value)
        .map_err(|_| errors::invalid(field, format!("must be 0 or more (got {value})")))
}

/// A JSON document passed as text.
pub(crate) fn json(field: &str, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| errors::invalid(field, format!("is not JSON: {e} (pass json.dumps(value))")))
}

/// A JSON object passed as text (tags, filters).
pub(crate) fn json_object(
    field: &str,
    text: &str,
) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    match json(field, text)? {
        serde_json::Value::Object(map) => Ok(map),
        other => Err(errors::invalid(
            field,
            format!("must be a JSON object, not {}", kind_of(&other)),
        )),
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// An opened port that `close()` lets go of: later calls raise `ClosedError`, calls already
/// running keep their own reference and finish.
#[derive(Debug)]
pub(crate) struct Handle<T: ?Sized> {
    port: Mutex<Option<Arc<T>>>,
    what: &'static str,
}

impl<T: ?Sized> Handle<T> {
    pub(crate) fn new(port: Arc<T>, what: &'static str) -> Self {
        Handle {
            port: Mutex::new(Some(port)),
            what,
        }
    }

    /// The port, or `ClosedError`.
    pub(crate) fn get(&self) -> PyResult<Arc<T>> {
        self.port
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(|| errors::to_py(Error::Closed { what: self.what }))
    }

    pub(crate) fn close(&self) {
        self.port
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
    }
}

/// The backend a URL names, for the classes' `backend` attribute.
pub(crate) fn backend_of(url: &str) -> &'static str {
    let scheme = url
        .trim()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match scheme.as_str() {
        "memory" => "memory",
        "sqlite" => "sqlite",
        "redis" | "rediss" => "redis",
        "redis-cluster" => "redis-cluster",
        "postgres" | "postgresql" => "postgres",
        _ => "unknown",
    }
}
