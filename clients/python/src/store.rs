//! The event store as the Python class `EventStore`.
//!
//! Python addresses a run by `(namespace, session_id, run_id)` and hands payloads over as JSON
//! objects; the store stamps them and the events come back as their stored JSON, which is byte
//! for byte what agentdeck 3.1.0 writes, so `switchyard.agentdeck` reads them with agentdeck's
//! own `Event.model_validate_json`.

use std::sync::Arc;

use pyo3::prelude::*;
use switchyard_core::event::{RunResumed, RunStarted};
use switchyard_core::store::{Claimed, Multitask, Turn};
use switchyard_core::{Appended, Event, EventStore, Payload, RunContext, RunStatus};

use crate::convert::{Handle, awaitable, backend_of, seconds_at_least_zero};
use crate::errors;

/// Opens an event store by URL (see `_native.pyi`); `prefix` is the Redis key prefix.
#[pyfunction]
#[pyo3(signature = (url, *, prefix = None))]
pub(crate) fn open_event_store(
    py: Python<'_>,
    url: String,
    prefix: Option<String>,
) -> PyResult<Bound<'_, PyAny>> {
    awaitable(py, async move {
        let store = switchyard_kit::open_event_store_prefixed(&url, prefix.as_deref()).await?;
        Ok(PyEventStore {
            store: Handle::new(store, "event store"),
            backend: backend_of(&url),
        })
    })
}

/// An event store (the Rust `EventStore` port, whose guarantees hold unchanged).
#[pyclass(module = "switchyard._native", name = "EventStore", frozen)]
#[derive(Debug)]
pub(crate) struct PyEventStore {
    store: Handle<dyn EventStore>,
    backend: &'static str,
}

/// The run a call addresses.
fn context(
    namespace: Option<String>,
    session_id: Option<String>,
    run_id: String,
) -> PyResult<RunContext> {
    let mut ctx = RunContext::new(run_id);
    if let Some(session) = session_id {
        ctx = ctx.with_session(session);
    }
    match namespace {
        Some(namespace) => ctx.with_namespace(namespace).map_err(errors::to_py),
        None => Ok(ctx),
    }
}

/// A claim's opening payload, which must be `run.started`.
fn opening_of(text: &str) -> PyResult<RunStarted> {
    match payload("opening", text)? {
        Payload::RunStarted(opening) => Ok(opening),
        _ => Err(errors::invalid(
            "opening.kind",
            "must be \"run.started\": a claim opens a run",
        )),
    }
}

/// One payload: a JSON object with a `kind`, as agentdeck's `payload.model_dump_json()` gives it.
fn payload(field: &str, text: &str) -> PyResult<Payload> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        errors::invalid(
            field,
            format!("is not JSON: {e} (pass the payload's JSON object)"),
        )
    })?;
    Payload::from_value(&value).map_err(errors::to_py)
}

fn payloads(texts: Vec<String>) -> PyResult<Vec<Payload>> {
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| payload(&format!("payloads[{i}]"), text))
        .collect()
}

fn to_json(events: Vec<Event>) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

impl PyEventStore {
    fn port(&self) -> PyResult<Arc<dyn EventStore>> {
        self.store.get()
    }
}

#[pymethods]
impl PyEventStore {
    /// `memory`, `sqlite`, `redis`, `redis-cluster` or `postgres`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    fn append<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        payloads_json: Vec<String>,
        origin: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        let payloads = payloads(payloads_json)?;
        awaitable(py, async move {
            Ok(to_json(store.append(&ctx, payloads, &origin).await?))
        })
    }

    fn append_if_open<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        payloads_json: Vec<String>,
        origin: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        let payloads = payloads(payloads_json)?;
        awaitable(py, async move {
            Ok(match store.append_if_open(&ctx, payloads, &origin).await? {
                Appended::Stored { events, status } => (Some(to_json(events)), status.as_str()),
                Appended::NotOpen(status) => (None, status.as_str()),
            })
        })
    }

    #[pyo3(signature = (namespace, session_id, run_id, offset = 0, limit = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        offset: i64,
        limit: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        awaitable(py, async move {
            Ok(to_json(store.read(&ctx, offset, limit).await?))
        })
    }

    #[pyo3(signature = (namespace, session_id, run_id, from_seq = 0))]
    fn read_run<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        from_seq: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        // agentdeck compares `seq >= from_seq`: a negative start reads the whole run.
        let from_seq = u64::try_from(from_seq).unwrap_or(0);
        awaitable(py, async move {
            Ok(to_json(store.read_run(&ctx, from_seq).await?))
        })
    }

    #[allow(clippy::too_many_arguments)] // the seed's claim, plus the run's three ids
    fn claim_start<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        opening: String,
        origin: String,
        stale_after_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        let opening = opening_of(&opening)?;
        // agentdeck accepts any timedelta; a negative window makes every open run stale, as 0 does.
        let stale_after = seconds_at_least_zero("stale_after", stale_after_seconds)?;
        awaitable(py, async move {
            let (claim, event) = store
                .claim_start(&ctx, opening, &origin, stale_after)
                .await?;
            Ok((
                claim.held_by,
                to_json(claim.overridden),
                event.as_ref().map(Event::to_json),
            ))
        })
    }

    fn claim_resume<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        resumed: String,
        origin: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        let resumed: RunResumed = match payload("resumed", &resumed)? {
            Payload::RunResumed(resumed) => resumed,
            _ => {
                return Err(errors::invalid(
                    "resumed.kind",
                    "must be \"run.resumed\": a resume claim appends the run's resume",
                ));
            }
        };
        awaitable(py, async move {
            let event = store.claim_resume(&ctx, resumed, &origin).await?;
            Ok(event.as_ref().map(Event::to_json))
        })
    }

    #[pyo3(signature = (namespace, status = None))]
    fn list_runs<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        status: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        // `list_runs` looks only at the namespace of its context.
        let ctx = context(namespace, None, String::new())?;
        let status = status
            .map(|s| s.parse::<RunStatus>())
            .transpose()
            .map_err(errors::to_py)?;
        awaitable(py, async move {
            let runs = store.list_runs(&ctx, status).await?;
            Ok(runs
                .into_iter()
                .map(|run| (run.log_key, run.run_id, run.status.as_str()))
                .collect::<Vec<_>>())
        })
    }

    fn run_status<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        awaitable(
            py,
            async move { Ok(store.run_status(&ctx).await?.as_str()) },
        )
    }

    /// A claim with a multitask strategy (ADR 0394): `(outcome, held_by, position, event,
    /// overridden, ended)` where `outcome` is `started`, `held` or `queued`.
    #[allow(clippy::too_many_arguments)] // claim_start's, plus the strategy
    fn claim<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
        opening: String,
        origin: String,
        stale_after_seconds: f64,
        strategy: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        let opening = opening_of(&opening)?;
        let stale_after = seconds_at_least_zero("stale_after", stale_after_seconds)?;
        let strategy: Multitask = strategy.parse().map_err(errors::to_py)?;
        awaitable(py, async move {
            let claimed = store
                .claim(&ctx, opening, &origin, stale_after, strategy)
                .await?;
            Ok(match claimed {
                Claimed::Started {
                    event,
                    overridden,
                    ended,
                } => (
                    "started",
                    None,
                    None,
                    Some(event.to_json()),
                    to_json(overridden),
                    to_json(ended),
                ),
                Claimed::Held { held_by } => ("held", Some(held_by), None, None, vec![], vec![]),
                Claimed::Queued { position, .. } => {
                    ("queued", None, Some(position), None, vec![], vec![])
                }
            })
        })
    }

    /// Where an enqueued run stands after a hand-off: `(state, position, event)` with `state`
    /// `waiting`, `started` or `not_waiting`.
    fn turn<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: Option<String>,
        run_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, session_id, run_id)?;
        awaitable(py, async move {
            let (turn, _) = store.turn(&ctx).await?;
            Ok(match turn {
                Turn::Waiting { position } => ("waiting", Some(position), None),
                Turn::Started { event } => ("started", None, Some(event.to_json())),
                Turn::NotWaiting => ("not_waiting", None, None),
            })
        })
    }

    /// Starts the session's next waiting run if the session is free; its `run.started`, or
    /// `None`.
    fn hand_off<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, Some(session_id), String::new())?;
        awaitable(py, async move {
            Ok(store.hand_off(&ctx).await?.map(|h| h.event.to_json()))
        })
    }

    /// Takes a waiting run out of its session's line; whether it was there.
    fn leave_line<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<String>,
        session_id: String,
        run_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.port()?;
        let ctx = context(namespace, Some(session_id), run_id.clone())?;
        awaitable(py, async move { store.line_remove(&ctx, &run_id).await })
    }

    /// Later calls raise `ClosedError`; calls in flight finish.
    fn close(&self) {
        self.store.close();
    }

    fn __repr__(&self) -> String {
        format!("<switchyard EventStore on {}>", self.backend)
    }
}
