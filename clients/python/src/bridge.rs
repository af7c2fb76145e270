//! Rust futures as asyncio futures, completed on the event loop's own thread (ADR 0389).
//!
//! A call creates an asyncio future on the running loop and spawns its Rust future on the
//! extension's Tokio runtime. When the Rust future finishes, its worker thread does not take the
//! GIL: it queues the outcome and writes one byte to a pipe the loop watches (`add_reader`), so
//! the loop's thread converts the outcome and resolves the future in the same wake-up that
//! notices it (one wake-up for every outcome queued meanwhile). Taking the GIL on the worker, as
//! a `call_soon_threadsafe` from there would, costs two more thread switches per call (the
//! worker waits for the loop to release the GIL, then the loop waits for it back): measured,
//! that is most of a call's cost on a small machine. A cancelled asyncio future aborts its Rust
//! future, so a cancelled reserve takes no task.

use std::collections::HashMap;
use std::future::Future;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::errors;

/// The environment variable that sets how many worker threads the extension's Tokio runtime
/// runs (ADR 0402).
const RUNTIME_THREADS: &str = "SWITCHYARD_RUNTIME_THREADS";

/// Sets up the extension's Tokio runtime before anything uses it: one worker thread unless
/// [`RUNTIME_THREADS`] asks for more (ADR 0402). With one, a call's task, the client's connection
/// task and the socket's readiness stay on one thread: the call crosses threads twice (the loop
/// hands it over, the pipe hands the outcome back) instead of hopping between workers on the
/// way. A process has one asyncio loop thread, whose own work per call exceeds the Rust side's,
/// so one worker keeps up with it.
pub(crate) fn init_runtime() -> PyResult<()> {
    let threads = match std::env::var_os(RUNTIME_THREADS) {
        None => 1,
        Some(value) => value
            .to_str()
            .and_then(|text| text.trim().parse::<usize>().ok())
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| runtime_threads_error(&value.to_string_lossy()))?,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads).enable_all();
    pyo3_async_runtimes::tokio::init(builder);
    Ok(())
}

fn runtime_threads_error(text: &str) -> PyErr {
    errors::to_py(switchyard_core::Error::config(
        RUNTIME_THREADS,
        format!(
            "must be a whole number of worker threads from 1 to 64, got {text:?}; unset it for \
             the default (1)"
        ),
    ))
}

/// How a finished Rust future becomes a Python value or exception, run on the loop's thread.
type Outcome = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Outcomes waiting for the loop, and the pipe that wakes it.
struct Inbox {
    done: Mutex<Vec<(u64, Outcome)>>,
    // A byte is in the pipe and the loop has not drained since: no need to write another.
    armed: AtomicBool,
    writer: PipeWriter,
}

impl Inbox {
    fn complete(&self, id: u64, outcome: Outcome) {
        locked(&self.done).push((id, outcome));
        if !self.armed.swap(true, Ordering::AcqRel) {
            // The pipe holds at most one byte per drain: it never fills.
            let _ = (&self.writer).write(&[1]);
        }
    }
}

/// One event loop's futures in flight; the loop calls it when the pipe is readable.
#[pyclass(module = "switchyard._native", frozen)]
struct Completions {
    inbox: Arc<Inbox>,
    reader: Mutex<PipeReader>,
    // Touched only on the loop's thread: the asyncio futures by call id.
    futures: Arc<Mutex<HashMap<u64, Py<PyAny>>>>,
    next: AtomicU64,
}

#[pymethods]
impl Completions {
    /// Drains the pipe and resolves every finished call's future.
    fn __call__(&self, py: Python<'_>) {
        let mut buf = [0u8; 64];
        let _ = locked(&self.reader).read(&mut buf);
        // Before taking the queue: an outcome queued after the take writes a new byte.
        self.inbox.armed.store(false, Ordering::Release);
        let done = std::mem::take(&mut *locked(&self.inbox.done));
        for (id, outcome) in done {
            let Some(future) = locked(&self.futures).remove(&id) else {
                continue; // cancelled meanwhile
            };
            let future = future.bind(py);
            if future
                .call_method0("done")
                .and_then(|d| d.is_truthy())
                .unwrap_or(true)
            {
                continue;
            }
            let _ = match outcome(py) {
                Ok(value) => future.call_method1("set_result", (value,)),
                Err(err) => future.call_method1("set_exception", (err.into_value(py),)),
            };
        }
    }
}

/// Aborts the Rust future of a cancelled call.
#[pyclass(module = "switchyard._native", frozen)]
struct OnDone {
    futures: Arc<Mutex<HashMap<u64, Py<PyAny>>>>,
    id: u64,
    abort: tokio::task::AbortHandle,
}

#[pymethods]
impl OnDone {
    fn __call__(&self, future: &Bound<'_, PyAny>) {
        if future
            .call_method0("cancelled")
            .and_then(|c| c.is_truthy())
            .unwrap_or(false)
        {
            self.abort.abort();
            locked(&self.futures).remove(&self.id);
        }
    }
}

/// The `Completions` of `event_loop`, made and registered with `add_reader` on first use.
fn completions_for<'py>(
    py: Python<'py>,
    event_loop: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, Completions>> {
    static BY_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let by_loop = BY_LOOP
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py
                .import("weakref")?
                .getattr("WeakKeyDictionary")?
                .call0()?
                .unbind())
        })?
        .bind(py);
    if let Ok(found) = by_loop
        .call_method1("get", (event_loop,))?
        .cast_into::<Completions>()
    {
        return Ok(found);
    }
    let (reader, writer) = std::io::pipe()?;
    let fd = reader.as_raw_fd();
    let completions = Bound::new(
        py,
        Completions {
            inbox: Arc::new(Inbox {
                done: Mutex::new(Vec::new()),
                armed: AtomicBool::new(false),
                writer,
            }),
            reader: Mutex::new(reader),
            futures: Arc::new(Mutex::new(HashMap::new())),
            next: AtomicU64::new(0),
        },
    )?;
    event_loop
        .call_method1("add_reader", (fd, completions.clone()))
        .map_err(|e| {
            errors::to_py(switchyard_core::Error::config(
                "event_loop",
                format!(
                    "switchyard needs an asyncio loop that can watch a pipe (add_reader: the \
                     default loop on Linux and macOS, or uvloop); this one refused: {e}"
                ),
            ))
        })?;
    by_loop.set_item(event_loop, completions.clone())?;
    Ok(completions)
}

/// Spawns `job` and returns the asyncio future its outcome resolves.
fn spawn<'py>(
    py: Python<'py>,
    job: impl Future<Output = Outcome> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = py
        .import("asyncio")?
        .call_method0("get_running_loop")
        .map_err(|_| {
            errors::invalid(
                "call",
                "needs a running asyncio event loop: await it inside a coroutine",
            )
        })?;
    let completions = completions_for(py, &event_loop)?;
    let shared = completions.get();
    let future = event_loop.call_method0("create_future")?;
    let id = shared.next.fetch_add(1, Ordering::Relaxed);
    locked(&shared.futures).insert(id, future.clone().unbind());
    let inbox = shared.inbox.clone();
    let task = pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
        let outcome = job.await;
        inbox.complete(id, outcome);
    });
    future.call_method1(
        "add_done_callback",
        (OnDone {
            futures: shared.futures.clone(),
            id,
            abort: task.abort_handle(),
        },),
    )?;
    Ok(future)
}

/// `fut` as an asyncio awaitable; its error becomes the matching `switchyard.errors` class.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = switchyard_core::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    spawn(py, async move {
        let result = fut.await;
        Box::new(move |py: Python<'_>| match result {
            Ok(value) => value.into_py_any(py),
            Err(err) => Err(errors::from_error(py, &err)),
        }) as Outcome
    })
}

/// [`awaitable`] for the next item of an async iterator: `None` ends it (`StopAsyncIteration`).
/// Errors become Python exceptions on the loop's thread, as in [`awaitable`]: a worker that made
/// one would wait for the GIL, and stall every call it runs meanwhile (ADR 0402).
pub(crate) fn awaitable_next<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = switchyard_core::Result<Option<T>>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    spawn(py, async move {
        let result = fut.await;
        Box::new(move |py: Python<'_>| match result {
            Ok(Some(value)) => value.into_py_any(py),
            Ok(None) => Err(pyo3::exceptions::PyStopAsyncIteration::new_err(())),
            Err(err) => Err(errors::from_error(py, &err)),
        }) as Outcome
    })
}
