//! The typed job queue and its worker loop, for Python: `Queue` pushes JSON payloads in the
//! seed's task envelope, and `Consumer` is the Rust consumer (prefetch, batched acks,
//! heartbeats, retries with backoff, dead letters, cancel, timeouts, graceful shutdown) running
//! a Python coroutine function as its handler. The loop is written once, in Rust; Python only
//! runs the handlers, on the event loop that started the consumer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;
use switchyard_core::fleet::{CancelOutcome, Priority, TaskInfo};
use switchyard_kit::fleet::typed::{
    Consumer, ConsumerConfig, ConsumerHandle, ConsumerStats, HandlerError, Permanent, PushOptions,
    Queue, Task, TaskOutput,
};
use tokio::sync::{oneshot, watch};

use crate::convert::{Bytes, awaitable, count, json, optional_seconds, seconds};
use crate::errors;
use crate::fleet::{Json, PyFleetBackend};

/// A typed queue over a fleet backend: payloads are JSON documents (text, from `json.dumps`).
#[pyclass(module = "switchyard._native", name = "Queue", frozen)]
#[derive(Debug)]
pub(crate) struct PyQueue {
    queue: Queue<Value>,
}

#[pymethods]
impl PyQueue {
    #[new]
    fn new(fleet: &PyFleetBackend, name: String) -> PyResult<Self> {
        switchyard_core::fleet::check_name("name", &name).map_err(errors::to_py)?;
        Ok(PyQueue {
            queue: Queue::new(fleet.port()?, name),
        })
    }

    #[getter]
    fn name(&self) -> &str {
        self.queue.name()
    }

    /// Pushes one payload (JSON text) in a task envelope; the task id.
    #[pyo3(signature = (payload, *, id = None, priority = 0, ttl_seconds = None, max_attempts = None, timeout_seconds = None))]
    #[allow(clippy::too_many_arguments)] // the keyword options of one push
    fn push<'py>(
        &self,
        py: Python<'py>,
        payload: String,
        id: Option<String>,
        priority: i64,
        ttl_seconds: Option<u64>,
        max_attempts: Option<u32>,
        timeout_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let payload = json("payload", &payload)?;
        let options = PushOptions {
            id,
            priority: Priority::from_int(priority),
            ttl_seconds,
            max_attempts,
            timeout: optional_seconds("timeout_seconds", timeout_seconds)?,
            retry: None,
        };
        let queue = self.queue.clone();
        awaitable(py, async move { queue.push_with(&payload, options).await })
    }

    /// The task's record (`state`, `attempt`, `result` as JSON text, …), or `None`.
    fn get<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let queue = self.queue.clone();
        awaitable(py, async move {
            Ok(queue.get(&id).await?.map(|info| Json(record(&info))))
        })
    }

    /// Cancels a task: `cancelled`, `cancel_requested` (it was running), `finished:<state>` or
    /// `unknown`.
    fn cancel<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let queue = self.queue.clone();
        awaitable(py, async move {
            Ok(match queue.cancel(&id).await? {
                CancelOutcome::Cancelled => "cancelled".to_string(),
                CancelOutcome::CancelRequested => "cancel_requested".to_string(),
                CancelOutcome::Finished(state) => format!("finished:{}", state.as_str()),
                other => other.as_str().to_string(),
            })
        })
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let queue = self.queue.clone();
        awaitable(py, async move {
            let stats = queue.stats().await?;
            crate::fleet::stats_json(stats)
        })
    }

    /// Up to `n` dead-lettered envelopes, as stored.
    fn dead_letters<'py>(&self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        let queue = self.queue.clone();
        awaitable(py, async move {
            Ok(queue
                .dlq_peek_raw(n)
                .await?
                .into_iter()
                .map(Bytes)
                .collect::<Vec<_>>())
        })
    }

    /// Runs `handler` (an `async def handler(task) -> result`) on this queue's tasks; must be
    /// called from a coroutine, whose event loop runs the handlers.
    #[pyo3(signature = (
        handler, *, concurrency = 1, visibility_seconds = 300.0, max_attempts = 3,
        timeout_seconds = None, shutdown_grace_seconds = 30.0, cancel_grace_seconds = 10.0
    ))]
    #[allow(clippy::too_many_arguments)] // the keyword options of one consumer
    fn consume(
        &self,
        py: Python<'_>,
        handler: Py<PyAny>,
        concurrency: usize,
        visibility_seconds: f64,
        max_attempts: u32,
        timeout_seconds: Option<f64>,
        shutdown_grace_seconds: f64,
        cancel_grace_seconds: f64,
    ) -> PyResult<PyConsumer> {
        if !handler.bind(py).is_callable() {
            return Err(errors::invalid(
                "handler",
                "must be an async function taking the task",
            ));
        }
        if concurrency == 0 {
            return Err(errors::invalid("concurrency", "must be 1 or more"));
        }
        let config = ConsumerConfig {
            concurrency,
            visibility: seconds("visibility_seconds", visibility_seconds)?,
            max_attempts: max_attempts.max(1),
            timeout: optional_seconds("timeout_seconds", timeout_seconds)?,
            shutdown_grace: seconds("shutdown_grace_seconds", shutdown_grace_seconds)?,
            cancel_grace: seconds("cancel_grace_seconds", cancel_grace_seconds)?,
            ..ConsumerConfig::default()
        };
        if config.visibility < Duration::from_secs(1) {
            return Err(errors::invalid(
                "visibility_seconds",
                "must be at least 1: the consumer extends held tasks at a third of it",
            ));
        }
        let locals = Arc::new(pyo3_async_runtimes::tokio::get_current_locals(py)?);
        let handler = Arc::new(handler);
        let queue = self.queue.clone();
        let _runtime = pyo3_async_runtimes::tokio::get_runtime().enter();
        let handle = Consumer::spawn(queue, config, move |task: Task<Value>| {
            run_handler(handler.clone(), locals.clone(), task)
        });
        Ok(PyConsumer::new(handle))
    }

    fn __repr__(&self) -> String {
        format!("<switchyard Queue {:?}>", self.queue.name())
    }
}

/// A task record as JSON: the port's fields, result and progress as text.
fn record(info: &TaskInfo) -> Value {
    let text = |bytes: &Option<Vec<u8>>| {
        bytes
            .as_ref()
            .map(|b| Value::String(String::from_utf8_lossy(b).into_owned()))
            .unwrap_or(Value::Null)
    };
    serde_json::json!({
        "id": info.id,
        "state": info.state.as_str(),
        "cancel_requested": info.cancel_requested,
        "attempt": info.attempt,
        "max_attempts": info.max_attempts,
        "priority": crate::fleet::priority_int(info.priority),
        "submitted_at": info.submitted_at,
        "started_at": info.started_at,
        "finished_at": info.finished_at,
        "last_error": info.last_error,
        "progress": text(&info.progress),
        "result": text(&info.result),
    })
}

/// What a Python handler returned: its result as JSON, or nothing to store.
#[derive(Debug)]
struct PyOutput(Option<Vec<u8>>);

impl TaskOutput for PyOutput {
    fn into_result(self) -> Result<Option<Vec<u8>>, HandlerError> {
        Ok(self.0)
    }
}

/// One task as the handler sees it.
#[pyclass(module = "switchyard._native", name = "Task", frozen)]
#[derive(Debug)]
pub(crate) struct PyTask {
    #[pyo3(get)]
    id: String,
    /// The payload as JSON text.
    #[pyo3(get)]
    payload: String,
    #[pyo3(get)]
    attempt: u32,
    /// Why the previous attempt failed, if one did.
    #[pyo3(get)]
    last_error: Option<String>,
}

/// Schedules the handler's coroutine on the consumer's event loop and waits for it; a cancel of
/// the task (or its timeout, or the shutdown) cancels the coroutine, as asyncio cancels.
async fn run_handler(
    handler: Arc<Py<PyAny>>,
    locals: Arc<TaskLocals>,
    task: Task<Value>,
) -> Result<PyOutput, HandlerError> {
    let (tx, rx) = oneshot::channel();
    let view = PyTask {
        id: task.id.clone(),
        payload: task.payload.to_string(),
        attempt: task.attempt,
        last_error: task.last_error.as_ref().map(|e| e.message.clone()),
    };
    // The GIL is taken on a blocking thread, never on a Tokio worker: a worker waiting for the
    // GIL while the event loop's thread holds it would stall every other task on that worker.
    let start = move || {
        Python::attach(|py| -> PyResult<Py<PyAny>> {
            let coroutine = handler.call1(py, (view,))?;
            let future = py.import("asyncio")?.call_method1(
                "run_coroutine_threadsafe",
                (coroutine, locals.event_loop(py)),
            )?;
            future.call_method1(
                "add_done_callback",
                (Done {
                    tx: Mutex::new(Some(tx)),
                },),
            )?;
            Ok(future.unbind())
        })
    };
    // The blocking task's own failure (a panic) and the handler's (a Python exception) read as
    // one error, written once.
    let scheduled = tokio::task::spawn_blocking(start)
        .await
        .map_err(|e| e.to_string())
        .and_then(|started| started.map_err(|e| e.to_string()))
        .map_err(|e| format!("the handler could not be started: {e}"))?;
    let mut rx = rx;
    let outcome = tokio::select! {
        outcome = &mut rx => outcome,
        _ = task.cancel.cancelled() => {
            let cancel = move || Python::attach(|py| {
                let _ = scheduled.call_method0(py, "cancel");
            });
            let _ = tokio::task::spawn_blocking(cancel).await;
            rx.await
        }
    };
    outcome.unwrap_or_else(|_| Err("the handler's event loop stopped".into()))
}

/// The done callback of a handler's future: sends its outcome to the consumer.
#[pyclass]
struct Done {
    tx: Mutex<Option<oneshot::Sender<Result<PyOutput, HandlerError>>>>,
}

#[pymethods]
impl Done {
    fn __call__(&self, py: Python<'_>, future: Bound<'_, PyAny>) {
        let outcome = outcome_of(py, &future);
        if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(outcome);
        }
    }
}

fn outcome_of(py: Python<'_>, future: &Bound<'_, PyAny>) -> Result<PyOutput, HandlerError> {
    if future
        .call_method0("cancelled")
        .and_then(|c| c.is_truthy())
        .unwrap_or(false)
    {
        return Err("the handler was cancelled".into());
    }
    match future.call_method0("result") {
        Ok(value) if value.is_none() => Ok(PyOutput(None)),
        Ok(value) => {
            let dumped = py
                .import("json")
                .and_then(|json| json.call_method1("dumps", (value,)))
                .and_then(|text| text.extract::<String>());
            match dumped {
                Ok(text) => Ok(PyOutput(Some(text.into_bytes()))),
                Err(e) => Err(Box::new(Permanent::new(format!(
                    "the handler's return value is not JSON: {e}"
                )))),
            }
        }
        Err(err) => {
            let permanent = py
                .import("switchyard.queue")
                .and_then(|m| m.getattr("Permanent"))
                .map(|class| err.is_instance(py, &class))
                .unwrap_or(false);
            let message = describe(py, &err);
            if permanent {
                Err(Box::new(Permanent::new(message)))
            } else {
                Err(message.into())
            }
        }
    }
}

/// `TypeName: message`, as a traceback's last line says it.
fn describe(py: Python<'_>, err: &PyErr) -> String {
    let name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_string());
    format!("{name}: {}", err.value(py))
}

/// A running consumer.
#[pyclass(module = "switchyard._native", name = "Consumer", frozen)]
#[derive(Debug)]
pub(crate) struct PyConsumer {
    // Shared with a `wait_idle` in progress; `shutdown` takes it back (it needs ownership).
    handle: Mutex<Option<Arc<ConsumerHandle>>>,
    // Ends a `wait_idle` in progress when `shutdown` starts, so it lets go of the handle.
    stopping: watch::Sender<bool>,
    // The counts at shutdown, for `stats()` afterwards.
    last: Arc<Mutex<Option<ConsumerStats>>>,
}

impl PyConsumer {
    fn new(handle: ConsumerHandle) -> Self {
        PyConsumer {
            handle: Mutex::new(Some(Arc::new(handle))),
            stopping: watch::channel(false).0,
            last: Arc::new(Mutex::new(None)),
        }
    }
}

fn stats_value(stats: &ConsumerStats) -> Json {
    Json(serde_json::json!({
        "acked": stats.acked,
        "retried": stats.retried,
        "dead_lettered": stats.dead_lettered,
        "expired": stats.expired,
        "malformed": stats.malformed,
        "released": stats.released,
        "lost": stats.lost,
        "errors": stats.errors,
        "cancelled": stats.cancelled,
        "timed_out": stats.timed_out,
    }))
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[pymethods]
impl PyConsumer {
    /// What the consumer did so far (`acked`, `retried`, `dead_lettered`, …); after
    /// `shutdown`, its final counts.
    fn stats(&self) -> Json {
        match locked(&self.handle).as_ref() {
            Some(handle) => stats_value(&handle.stats()),
            None => stats_value(&locked(&self.last).clone().unwrap_or_default()),
        }
    }

    /// Waits until the queue has nothing waiting, reserved or scheduled (or the consumer is
    /// shut down).
    fn wait_idle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let handle = locked(&self.handle).clone();
        let mut stopping = self.stopping.subscribe();
        awaitable(py, async move {
            let Some(handle) = handle else {
                return Ok(());
            };
            tokio::select! {
                idle = handle.wait_idle() => idle,
                _ = stopping.wait_for(|stopping| *stopping) => Ok(()),
            }
        })
    }

    /// Stops reserving, gives prefetched tasks back, lets running handlers finish within the
    /// grace period, and returns the final counts.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let taken = locked(&self.handle).take();
        self.stopping.send_replace(true);
        let last = self.last.clone();
        awaitable(py, async move {
            let Some(mut shared) = taken else {
                return Ok(stats_value(&locked(&last).clone().unwrap_or_default()));
            };
            // A `wait_idle` that saw `stopping` drops its clone within a poll.
            let handle = loop {
                match Arc::try_unwrap(shared) {
                    Ok(handle) => break handle,
                    Err(still_shared) => {
                        shared = still_shared;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            };
            let stats = handle.shutdown().await;
            *locked(&last) = Some(stats.clone());
            Ok(stats_value(&stats))
        })
    }
}
