//! The fleet backend as the Python class `FleetBackend`: one method per port method, seconds as
//! `float`, bodies as `bytes`, JSON documents as `str`, fleet's integer priorities.
//!
//! `switchyard.fleet` adapts it to fleet-framework's `Backend` protocol (task ids instead of
//! receipts, a lock's token without its fence).

mod types;

use std::sync::Arc;

use pyo3::prelude::*;
use switchyard_core::fleet::{
    ConfigWrite, FleetBackend, IdempotencyKey, Priority, Receipt, RunAt, Submit, SubmitOutcome,
    WorkerState,
};

use crate::convert::{
    Bytes, Handle, awaitable, backend_of, bytes_list, count, json, json_object, optional_seconds,
    seconds, seconds_at_least_zero,
};
use crate::errors;
pub(crate) use types::{
    Json, PyDelivery, PyPoolItem, PySubscription, PyWorkerRecord, priority_int, stats_json,
};

/// Opens a fleet backend by URL (see `_native.pyi`); `prefix` is the Redis key prefix.
#[pyfunction]
#[pyo3(signature = (url, *, prefix = None))]
pub(crate) fn open_fleet_backend(
    py: Python<'_>,
    url: String,
    prefix: Option<String>,
) -> PyResult<Bound<'_, PyAny>> {
    awaitable(py, async move {
        let fleet = switchyard_kit::open_fleet_backend_prefixed(&url, prefix.as_deref()).await?;
        Ok(PyFleetBackend {
            fleet: Handle::new(fleet, "fleet backend"),
            backend: backend_of(&url),
        })
    })
}

/// A fleet backend (the Rust `FleetBackend` port, whose guarantees hold unchanged).
#[pyclass(module = "switchyard._native", name = "FleetBackend", frozen)]
#[derive(Debug)]
pub(crate) struct PyFleetBackend {
    fleet: Handle<dyn FleetBackend>,
    backend: &'static str,
}

impl PyFleetBackend {
    pub(crate) fn port(&self) -> PyResult<Arc<dyn FleetBackend>> {
        self.fleet.get()
    }
}

/// Runs `$body` (an async block using `$fleet`) on the port as an awaitable.
macro_rules! on_port {
    ($self:ident, $py:ident, |$fleet:ident| $body:expr) => {{
        let $fleet = $self.port()?;
        awaitable($py, async move { $body })
    }};
}

#[pymethods]
impl PyFleetBackend {
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    // --- kv ---

    #[pyo3(signature = (ns, key, value, ttl_seconds = None))]
    fn kv_set<'py>(
        &self,
        py: Python<'py>,
        ns: String,
        key: String,
        value: Vec<u8>,
        ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ttl = optional_seconds("ttl_seconds", ttl_seconds)?;
        on_port!(self, py, |fleet| fleet.kv_set(&ns, &key, &value, ttl).await)
    }

    #[pyo3(signature = (ns, key, value, ttl_seconds = None))]
    fn kv_set_nx<'py>(
        &self,
        py: Python<'py>,
        ns: String,
        key: String,
        value: Vec<u8>,
        ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ttl = optional_seconds("ttl_seconds", ttl_seconds)?;
        on_port!(self, py, |fleet| fleet
            .kv_set_nx(&ns, &key, &value, ttl)
            .await)
    }

    fn kv_get<'py>(&self, py: Python<'py>, ns: String, key: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(fleet
            .kv_get(&ns, &key)
            .await?
            .map(Bytes)))
    }

    fn kv_del<'py>(&self, py: Python<'py>, ns: String, key: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.kv_del(&ns, &key).await)
    }

    // --- pools ---

    #[pyo3(signature = (name, item_id, payload, tags, ttl_seconds = None))]
    fn pool_put<'py>(
        &self,
        py: Python<'py>,
        name: String,
        item_id: String,
        payload: Vec<u8>,
        tags: String,
        ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tags = json_object("tags", &tags)?;
        let ttl = optional_seconds("ttl_seconds", ttl_seconds)?;
        on_port!(self, py, |fleet| fleet
            .pool_put(&name, &item_id, &payload, &tags, ttl)
            .await)
    }

    fn pool_list<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(fleet
            .pool_list(&name)
            .await?
            .into_iter()
            .map(PyPoolItem::from)
            .collect::<Vec<_>>()))
    }

    fn pool_size<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.pool_size(&name).await)
    }

    fn pool_remove<'py>(
        &self,
        py: Python<'py>,
        name: String,
        item_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.pool_remove(&name, &item_id).await)
    }

    fn pool_release<'py>(
        &self,
        py: Python<'py>,
        name: String,
        item_id: String,
        token: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .pool_release(&name, &item_id, &token)
            .await)
    }

    #[pyo3(name = "pool_claim_any")]
    fn pool_claim_any<'py>(
        &self,
        py: Python<'py>,
        name: String,
        r#where: String,
        hold_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let filter = json_object("where", &r#where)?;
        let hold = seconds("hold_seconds", hold_seconds)?;
        on_port!(self, py, |fleet| Ok(fleet
            .pool_claim_any(&name, &filter, hold)
            .await?
            .map(|claim| (PyPoolItem::from(claim.item), claim.token))))
    }

    // --- locks ---

    fn lock_acquire<'py>(
        &self,
        py: Python<'py>,
        name: String,
        hold_seconds: f64,
        wait_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hold = seconds("hold_seconds", hold_seconds)?;
        let wait = seconds_at_least_zero("wait_seconds", wait_seconds)?;
        on_port!(self, py, |fleet| Ok(fleet
            .lock_acquire(&name, hold, wait)
            .await?
            .map(|grant| (grant.token, grant.fence))))
    }

    fn lock_release<'py>(
        &self,
        py: Python<'py>,
        name: String,
        token: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.lock_release(&name, &token).await)
    }

    fn lock_extend<'py>(
        &self,
        py: Python<'py>,
        name: String,
        token: String,
        hold_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hold = seconds("hold_seconds", hold_seconds)?;
        on_port!(self, py, |fleet| fleet
            .lock_extend(&name, &token, hold)
            .await)
    }

    // --- counters ---

    #[pyo3(signature = (name, by = 1))]
    fn counter_incr<'py>(
        &self,
        py: Python<'py>,
        name: String,
        by: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.counter_incr(&name, by).await)
    }

    fn counter_get<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.counter_get(&name).await)
    }

    fn counter_set<'py>(
        &self,
        py: Python<'py>,
        name: String,
        value: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.counter_set(&name, value).await)
    }

    fn counter_del<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.counter_del(&name).await)
    }

    // --- the job queue ---

    #[pyo3(signature = (name, body, priority = 0))]
    fn queue_push<'py>(
        &self,
        py: Python<'py>,
        name: String,
        body: Vec<u8>,
        priority: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let priority = Priority::from_int(priority);
        on_port!(self, py, |fleet| fleet
            .queue_push(&name, &body, priority)
            .await)
    }

    #[pyo3(signature = (
        name, body, *, priority = 0, delay_seconds = None, at = None, idem_ns = None,
        idem_key = None, idem_value = None, idem_ttl_seconds = None
    ))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of one submit
    fn queue_submit<'py>(
        &self,
        py: Python<'py>,
        name: String,
        body: Vec<u8>,
        priority: i64,
        delay_seconds: Option<f64>,
        at: Option<f64>,
        idem_ns: Option<String>,
        idem_key: Option<String>,
        idem_value: Option<Vec<u8>>,
        idem_ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let run_at = match (delay_seconds, at) {
            (Some(_), Some(_)) => {
                return Err(errors::invalid(
                    "at",
                    "give either delay_seconds or at, not both",
                ));
            }
            (Some(delay), None) => RunAt::After(seconds("delay_seconds", delay)?),
            (None, Some(at)) if at.is_finite() => RunAt::At(at),
            (None, Some(at)) => {
                return Err(errors::invalid(
                    "at",
                    format!("must be a finite epoch time in seconds (got {at})"),
                ));
            }
            (None, None) => RunAt::Now,
        };
        let idem_ttl = optional_seconds("idem_ttl_seconds", idem_ttl_seconds)?;
        let idem = match (idem_ns, idem_key) {
            (Some(ns), Some(key)) => Some((ns, key, idem_value.unwrap_or_default())),
            (None, None) => None,
            _ => {
                return Err(errors::invalid(
                    "idem_key",
                    "an idempotency key needs both idem_ns and idem_key",
                ));
            }
        };
        let priority = Priority::from_int(priority);
        on_port!(self, py, |fleet| {
            let mut submit = Submit::new().priority(priority).run_at(run_at);
            if let Some((ns, key, value)) = &idem {
                submit = submit.idem(IdempotencyKey {
                    ns,
                    key,
                    value,
                    ttl: idem_ttl,
                });
            }
            Ok(match fleet.queue_submit(&name, &body, &submit).await? {
                SubmitOutcome::Enqueued => None,
                SubmitOutcome::Duplicate(stored) => Some(Bytes(stored)),
            })
        })
    }

    fn queue_size<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.queue_size(&name).await)
    }

    fn queue_stats<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| {
            let stats = fleet.queue_stats(&name).await?;
            stats_json(stats)
        })
    }

    fn queue_peek<'py>(
        &self,
        py: Python<'py>,
        name: String,
        n: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        on_port!(self, py, |fleet| Ok(bytes_list(
            fleet.queue_peek(&name, n).await?
        )))
    }

    fn queue_reserve<'py>(
        &self,
        py: Python<'py>,
        name: String,
        timeout_seconds: f64,
        visibility_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = seconds_at_least_zero("timeout_seconds", timeout_seconds)?;
        let visibility = seconds("visibility_seconds", visibility_seconds)?;
        on_port!(self, py, |fleet| Ok(fleet
            .queue_reserve(&name, timeout, visibility)
            .await?
            .map(PyDelivery::from)))
    }

    #[pyo3(signature = (name, max, timeout_seconds, visibility_seconds))]
    fn queue_reserve_many<'py>(
        &self,
        py: Python<'py>,
        name: String,
        max: i64,
        timeout_seconds: f64,
        visibility_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let max = count("max", max)?;
        let timeout = seconds_at_least_zero("timeout_seconds", timeout_seconds)?;
        let visibility = seconds("visibility_seconds", visibility_seconds)?;
        on_port!(self, py, |fleet| Ok(fleet
            .queue_reserve_many(&name, max, timeout, visibility)
            .await?
            .into_iter()
            .map(PyDelivery::from)
            .collect::<Vec<_>>()))
    }

    fn queue_ack<'py>(
        &self,
        py: Python<'py>,
        name: String,
        receipt: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .queue_ack(&name, &Receipt::new(receipt))
            .await)
    }

    fn queue_ack_many<'py>(
        &self,
        py: Python<'py>,
        name: String,
        receipts: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let receipts: Vec<Receipt> = receipts.into_iter().map(Receipt::new).collect();
        on_port!(self, py, |fleet| fleet
            .queue_ack_many(&name, &receipts)
            .await)
    }

    #[pyo3(signature = (name, receipt, body, delay_seconds = 0.0))]
    fn queue_nack<'py>(
        &self,
        py: Python<'py>,
        name: String,
        receipt: String,
        body: Vec<u8>,
        delay_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let delay = seconds_at_least_zero("delay_seconds", delay_seconds)?;
        on_port!(self, py, |fleet| fleet
            .queue_nack(&name, &Receipt::new(receipt), &body, delay)
            .await)
    }

    fn queue_extend<'py>(
        &self,
        py: Python<'py>,
        name: String,
        receipt: String,
        visibility_seconds: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let visibility = seconds("visibility_seconds", visibility_seconds)?;
        on_port!(self, py, |fleet| fleet
            .queue_extend(&name, &Receipt::new(receipt), visibility)
            .await)
    }

    fn queue_fail<'py>(
        &self,
        py: Python<'py>,
        name: String,
        receipt: String,
        body: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .queue_fail(&name, &Receipt::new(receipt), &body)
            .await)
    }

    fn queue_sweep_expired<'py>(
        &self,
        py: Python<'py>,
        name: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.queue_sweep_expired(&name).await)
    }

    fn queue_promote_due<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.queue_promote_due(&name).await)
    }

    fn queue_dead<'py>(
        &self,
        py: Python<'py>,
        name: String,
        body: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.queue_dead(&name, &body).await)
    }

    fn queue_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.queue_names().await)
    }

    // --- dead letters ---

    fn dlq_peek<'py>(&self, py: Python<'py>, name: String, n: i64) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        on_port!(self, py, |fleet| Ok(bytes_list(
            fleet.dlq_peek(&name, n).await?
        )))
    }

    fn dlq_pop<'py>(&self, py: Python<'py>, name: String, n: i64) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        on_port!(self, py, |fleet| Ok(bytes_list(
            fleet.dlq_pop(&name, n).await?
        )))
    }

    fn dlq_length<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.dlq_length(&name).await)
    }

    fn dlq_clear<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.dlq_clear(&name).await)
    }

    #[pyo3(signature = (name, n, priority = 0))]
    fn dlq_requeue<'py>(
        &self,
        py: Python<'py>,
        name: String,
        n: i64,
        priority: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        let priority = Priority::from_int(priority);
        on_port!(self, py, |fleet| fleet
            .dlq_requeue(&name, n, priority)
            .await)
    }

    // --- streams ---

    #[pyo3(signature = (name, envelope, score, max_len, ttl_seconds = None))]
    fn stream_push<'py>(
        &self,
        py: Python<'py>,
        name: String,
        envelope: Vec<u8>,
        score: f64,
        max_len: u64,
        ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ttl = optional_seconds("ttl_seconds", ttl_seconds)?;
        on_port!(self, py, |fleet| fleet
            .stream_push(&name, &envelope, score, max_len, ttl)
            .await)
    }

    fn stream_pop<'py>(
        &self,
        py: Python<'py>,
        name: String,
        n: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        on_port!(self, py, |fleet| Ok(bytes_list(
            fleet.stream_pop(&name, n).await?
        )))
    }

    fn stream_peek<'py>(
        &self,
        py: Python<'py>,
        name: String,
        n: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = count("n", n)?;
        on_port!(self, py, |fleet| Ok(bytes_list(
            fleet.stream_peek(&name, n).await?
        )))
    }

    fn stream_length<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.stream_length(&name).await)
    }

    #[pyo3(signature = (name, max_len, ttl_seconds = None))]
    fn stream_trim<'py>(
        &self,
        py: Python<'py>,
        name: String,
        max_len: u64,
        ttl_seconds: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ttl = optional_seconds("ttl_seconds", ttl_seconds)?;
        on_port!(self, py, |fleet| fleet
            .stream_trim(&name, max_len, ttl)
            .await)
    }

    // --- events ---

    fn event_publish<'py>(
        &self,
        py: Python<'py>,
        topic: String,
        body: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet.event_publish(&topic, &body).await)
    }

    fn event_subscribe<'py>(&self, py: Python<'py>, topic: String) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(PySubscription::new(
            fleet.event_subscribe(&topic).await?
        )))
    }

    // --- the worker registry ---

    fn worker_register<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        hardware: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hardware = json("hardware", &hardware)?;
        on_port!(self, py, |fleet| fleet
            .worker_register(&automation_type, &worker_id, &hardware)
            .await)
    }

    fn worker_get_config<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| {
            let (config, generation) = fleet
                .worker_get_config(&automation_type, &worker_id)
                .await?;
            Ok((config.to_string(), generation))
        })
    }

    #[pyo3(signature = (automation_type, worker_id, config, expected_gen = None))]
    fn worker_set_config<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        config: String,
        expected_gen: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let config = json("config", &config)?;
        on_port!(self, py, |fleet| Ok(
            match fleet
                .worker_set_config(&automation_type, &worker_id, &config, expected_gen)
                .await?
            {
                ConfigWrite::Applied { generation } => ("applied", Some(generation)),
                ConfigWrite::GenMismatch { current } => ("gen_mismatch", Some(current)),
                ConfigWrite::NotRegistered => ("not_registered", None),
            }
        ))
    }

    #[pyo3(signature = (automation_type, worker_id, state, last_error, last_seen, applied_gen = None))]
    #[allow(clippy::too_many_arguments)] // the fields of one state report
    fn worker_set_state<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        state: String,
        last_error: Option<String>,
        last_seen: f64,
        applied_gen: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| {
            let report = WorkerState {
                state: &state,
                last_error: last_error.as_deref(),
                last_seen,
                applied_gen,
            };
            fleet
                .worker_set_state(&automation_type, &worker_id, report)
                .await
        })
    }

    fn worker_set_stats<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        stats: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let stats = json("stats", &stats)?;
        on_port!(self, py, |fleet| fleet
            .worker_set_stats(&automation_type, &worker_id, &stats)
            .await)
    }

    #[pyo3(signature = (automation_type, worker_id, ts, frame, max_entries = 240))]
    fn worker_stats_push<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        ts: f64,
        frame: String,
        max_entries: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let frame = json("frame", &frame)?;
        let max_entries = count("max_entries", max_entries)?;
        on_port!(self, py, |fleet| fleet
            .worker_stats_push(&automation_type, &worker_id, ts, &frame, max_entries)
            .await)
    }

    #[pyo3(signature = (automation_type, worker_id, since = 0.0, limit = 240))]
    fn worker_stats_history<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
        since: f64,
        limit: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = count("limit", limit)?;
        on_port!(self, py, |fleet| Ok(fleet
            .worker_stats_history(&automation_type, &worker_id, since, limit)
            .await?
            .iter()
            .map(serde_json::Value::to_string)
            .collect::<Vec<_>>()))
    }

    fn worker_get<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(fleet
            .worker_get(&automation_type, &worker_id)
            .await?
            .map(PyWorkerRecord::from)))
    }

    #[pyo3(signature = (automation_type = None))]
    fn worker_list<'py>(
        &self,
        py: Python<'py>,
        automation_type: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .worker_list(automation_type.as_deref())
            .await)
    }

    fn worker_remove<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        worker_id: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .worker_remove(&automation_type, &worker_id)
            .await)
    }

    // --- the catalog ---

    fn catalog_set<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
        doc: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| fleet
            .catalog_set(&automation_type, &doc)
            .await)
    }

    fn catalog_get<'py>(
        &self,
        py: Python<'py>,
        automation_type: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(fleet
            .catalog_get(&automation_type)
            .await?
            .map(Bytes)))
    }

    fn catalog_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        on_port!(self, py, |fleet| Ok(fleet
            .catalog_all()
            .await?
            .into_iter()
            .map(|(k, v)| (k, Bytes(v)))
            .collect::<std::collections::BTreeMap<_, _>>()))
    }

    /// Later calls raise `ClosedError`; calls in flight finish.
    fn close(&self) {
        self.fleet.close();
    }

    fn __repr__(&self) -> String {
        format!("<switchyard FleetBackend on {}>", self.backend)
    }
}
