//! switchyard's errors as Python exceptions.
//!
//! The classes live in `switchyard/errors.py`, not here: Python code catches them by the built-in
//! class they also derive from (`ValueError` for bad input, `ConnectionError` for an unreachable
//! backend), and multiple inheritance is plain in Python. The module init puts them on
//! `switchyard._native` too.

use pyo3::prelude::*;
use switchyard_core::Error;

const CLASSES: [&str; 10] = [
    "SwitchyardError",
    "InvalidInputError",
    "ConfigError",
    "UnavailableError",
    "ContendedError",
    "CorruptError",
    "RejectedError",
    "AlreadyExistsError",
    "TaskCancelledError",
    "ClosedError",
];

/// Adds the classes of `switchyard.errors` to the extension module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let errors = m.py().import("switchyard.errors")?;
    for name in CLASSES {
        m.add(name, errors.getattr(name)?)?;
    }
    Ok(())
}

/// The Python exception for `err`: its class says what the caller can do, its message what to do
/// next. It takes the GIL itself, for code without a `Python` token at hand; a future on the
/// Tokio worker never calls it (a worker waiting for the GIL stalls every call it runs, ADR
/// 0402): futures return the core error and the bridge converts it on the loop's thread.
pub(crate) fn to_py(err: Error) -> PyErr {
    Python::attach(|py| from_error(py, &err))
}

/// [`to_py`] on a thread that holds the GIL.
pub(crate) fn from_error(py: Python<'_>, err: &Error) -> PyErr {
    build(py, err).unwrap_or_else(|failed| failed)
}

/// An [`Error::InvalidInput`] raised before any I/O.
pub(crate) fn invalid(field: &str, reason: impl std::fmt::Display) -> PyErr {
    to_py(Error::invalid(field, reason))
}

fn build(py: Python<'_>, err: &Error) -> PyResult<PyErr> {
    let errors = py.import("switchyard.errors")?;
    let message = err.to_string();
    let instance = match err {
        Error::InvalidInput { field, .. } => errors
            .getattr("InvalidInputError")?
            .call1((message, field.as_str()))?,
        Error::Config { key, .. } => errors
            .getattr("ConfigError")?
            .call1((message, key.as_str()))?,
        Error::Unavailable { .. } => errors.getattr("UnavailableError")?.call1((format!(
            "{message}; check that the server is running and reachable, then retry (a call that \
             failed this way may or may not have been applied)"
        ),))?,
        Error::Contended { .. } => errors
            .getattr("ContendedError")?
            .call1((format!("{message}; nothing was written, retry"),))?,
        Error::Corrupt { .. } => errors.getattr("CorruptError")?.call1((message,))?,
        Error::Rejected { .. } => errors.getattr("RejectedError")?.call1((message,))?,
        Error::AlreadyExists { .. } => errors.getattr("AlreadyExistsError")?.call1((message,))?,
        Error::Cancelled { .. } => errors.getattr("TaskCancelledError")?.call1((message,))?,
        Error::Closed { .. } => errors
            .getattr("ClosedError")?
            .call1((format!("{message}; open a new one"),))?,
        _ => errors.getattr("SwitchyardError")?.call1((message,))?,
    };
    Ok(PyErr::from_value(instance))
}
