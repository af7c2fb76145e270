//! The worker registry for remote workers (ADR 0352): a worker registers, heartbeats with the
//! tasks it holds, and deregisters, so listings show it beside the library's and the seed's
//! workers.
//!
//! The records are the fleet registry's (`worker_register`, `worker_set_state`,
//! `worker_set_stats`), so the registry's rule for idle workers applies to remote workers too:
//! the queue maintainer evicts a worker whose last heartbeat is older than the idle TTL, and a
//! heartbeat after that is refused `not_registered` (register again).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchyard_core::fleet::{FleetBackend, WorkerState};
use utoipa::ToSchema;

use super::{Queues, check_body_id, unix_now};
use crate::{Error, Result};

/// The most task ids one heartbeat may report.
pub const MAX_HELD_TASKS: usize = 1000;
/// The largest hardware or stats document a worker may store (compact JSON).
const MAX_DOC_BYTES: usize = 64 * 1024;
/// The longest state name or error a worker may report.
const MAX_STATE_BYTES: usize = 64;
const MAX_ERROR_BYTES: usize = 4096;
/// The key of the stats document under which a heartbeat keeps the tasks the worker holds.
const HELD_KEY: &str = "held_tasks";

/// A registration (`PUT /v1/workers/{automation_type}/{worker_id}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    /// What the worker runs on (any JSON object, at most 64 KiB).
    pub hardware: Option<Map<String, Value>>,
}

/// A heartbeat (`POST …/heartbeat`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The worker's state (default `RUNNING`; at most 64 bytes).
    pub state: Option<String>,
    /// The worker's last error, or null to clear it (at most 4096 bytes).
    pub last_error: Option<String>,
    /// The ids of the tasks the worker holds now (at most 1000).
    #[schema(max_items = 1000)]
    pub tasks: Option<Vec<String>>,
    /// The config generation the worker has applied.
    pub applied_gen: Option<u64>,
    /// A stats document (any JSON object, at most 64 KiB); the held tasks are kept in it as
    /// `held_tasks`.
    pub stats: Option<Map<String, Value>>,
}

/// A registered worker, as a heartbeat or a registration answers it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerAnswer {
    pub automation_type: String,
    pub worker_id: String,
    /// The desired config (apply it when `config_gen` is newer than what you applied).
    #[schema(value_type = Object)]
    pub config: Value,
    pub config_gen: u64,
    /// Heartbeat at least this often (seconds) to stay registered.
    pub heartbeat_seconds: u64,
    /// A worker silent for longer than this is evicted (seconds; null: never).
    pub idle_ttl_seconds: Option<u64>,
}

/// What a deregistration did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Deregistered {
    /// False when the worker was not registered.
    pub removed: bool,
}

/// A registered worker as listed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerRecord {
    pub automation_type: String,
    pub worker_id: String,
    /// `IDLE` until a state is reported, then the last one (`RUNNING`, …).
    pub state: String,
    /// Unix seconds of the last state report or heartbeat.
    pub last_seen: f64,
    /// The last reported error, or null.
    pub last_error: Option<String>,
    /// The desired config's generation.
    pub config_gen: u64,
    /// The config generation the worker says it has applied, or null.
    pub applied_gen: Option<u64>,
    /// The desired config.
    #[schema(value_type = Object)]
    pub config: Value,
    /// As given at registration.
    #[schema(value_type = Object)]
    pub hardware: Value,
    /// The last stats document (`held_tasks`: the tasks it holds).
    #[schema(value_type = Object)]
    pub stats: Value,
}

/// Registered workers (`GET /v1/workers`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct WorkerList {
    pub workers: Vec<WorkerRecord>,
}

/// A JSON object of at most 64 KiB (compact), or a 422 naming `field`.
fn document(field: &str, value: Option<Map<String, Value>>) -> Result<Option<Map<String, Value>>> {
    let size = value
        .as_ref()
        .and_then(|map| serde_json::to_vec(map).ok())
        .map_or(0, |v| v.len());
    if size > MAX_DOC_BYTES {
        return Err(Error::invalid(
            field,
            format!("`{field}` is larger than 64 KiB"),
        ));
    }
    Ok(value)
}

fn bounded(field: &str, value: Option<String>, max: usize) -> Result<Option<String>> {
    match value {
        Some(v) if v.len() > max => Err(Error::invalid(
            field,
            format!("`{field}` is longer than {max} bytes"),
        )),
        Some(v) if v.chars().any(char::is_control) => Err(Error::invalid(
            field,
            format!("`{field}` must not contain control characters"),
        )),
        other => Ok(other),
    }
}

/// Seconds between heartbeats that keep a worker well inside the idle TTL.
fn heartbeat_seconds(idle_ttl: Option<Duration>) -> u64 {
    idle_ttl.map_or(15, |ttl| (ttl.as_secs() / 4).clamp(1, 15))
}

/// The refusal of a heartbeat from a worker the registry does not hold.
fn not_registered() -> Error {
    Error::not_found(
        "not_registered",
        "the worker is not registered (it was deregistered, or evicted after its heartbeats \
         stopped for longer than the idle TTL): register it again with PUT",
    )
}

/// Every registered worker (of one automation type).
pub async fn worker_records(
    fleet: &dyn FleetBackend,
    automation_type: Option<&str>,
) -> Result<Vec<WorkerRecord>> {
    let mut out = Vec::new();
    for (at, wid) in fleet.worker_list(automation_type).await? {
        // A worker evicted between the listing and its read is no longer there.
        let Some(r) = fleet.worker_get(&at, &wid).await? else {
            continue;
        };
        out.push(WorkerRecord {
            automation_type: at,
            worker_id: wid,
            state: r.state,
            last_seen: r.last_seen,
            last_error: r.last_error,
            config_gen: r.config_gen,
            applied_gen: r.applied_gen,
            config: r.config,
            hardware: r.hardware,
            stats: r.stats,
        });
    }
    Ok(out)
}

impl Queues {
    /// Registered workers (of one automation type, checked as an id).
    pub async fn workers(&self, automation_type: Option<&str>) -> Result<WorkerList> {
        if let Some(t) = automation_type {
            check_body_id("automation_type", t)?;
        }
        let workers = worker_records(self.fleet.as_ref(), automation_type).await?;
        Ok(WorkerList { workers })
    }

    /// Registers the worker (or updates its hardware) and marks it seen now, `IDLE`; answers its
    /// desired config and how often to heartbeat within `idle_ttl` (the maintainer's eviction
    /// age; `None`: never).
    pub async fn register(
        &self,
        automation_type: &str,
        worker_id: &str,
        body: RegisterBody,
        idle_ttl: Option<Duration>,
    ) -> Result<WorkerAnswer> {
        let hardware = Value::Object(document("hardware", body.hardware)?.unwrap_or_default());
        self.fleet
            .worker_register(automation_type, worker_id, &hardware)
            .await?;
        // Seen from the registration on, so the idle rule counts from now, not from 1970.
        let seen = WorkerState {
            state: "IDLE",
            last_error: None,
            last_seen: unix_now(),
            applied_gen: None,
        };
        self.fleet
            .worker_set_state(automation_type, worker_id, seen)
            .await?;
        self.answer(automation_type, worker_id, idle_ttl).await
    }

    /// Reports the worker alive, with its state and the tasks it holds; answers its desired
    /// config, or `not_registered` when it was deregistered or evicted.
    pub async fn heartbeat(
        &self,
        automation_type: &str,
        worker_id: &str,
        body: HeartbeatBody,
        idle_ttl: Option<Duration>,
    ) -> Result<WorkerAnswer> {
        let worker_state =
            bounded("state", body.state, MAX_STATE_BYTES)?.unwrap_or_else(|| "RUNNING".to_string());
        if worker_state.is_empty() {
            return Err(Error::invalid("state", "`state` must not be empty"));
        }
        let last_error = bounded("last_error", body.last_error, MAX_ERROR_BYTES)?;
        if let Some(tasks) = &body.tasks {
            if tasks.len() > MAX_HELD_TASKS {
                return Err(Error::invalid(
                    "tasks",
                    format!("`tasks` lists more than {MAX_HELD_TASKS} ids"),
                ));
            }
            for id in tasks {
                check_body_id("tasks", id)?;
            }
        }
        let stats = document("stats", body.stats)?;
        let seen = WorkerState {
            state: &worker_state,
            last_error: last_error.as_deref(),
            last_seen: unix_now(),
            applied_gen: body.applied_gen,
        };
        let known = self
            .fleet
            .worker_set_state(automation_type, worker_id, seen)
            .await?;
        if !known {
            return Err(not_registered());
        }
        if stats.is_some() || body.tasks.is_some() {
            let mut doc = stats.unwrap_or_default();
            if let Some(tasks) = body.tasks {
                let held = tasks.into_iter().map(Value::String).collect();
                doc.insert(HELD_KEY.into(), Value::Array(held));
            }
            self.fleet
                .worker_set_stats(automation_type, worker_id, &Value::Object(doc))
                .await?;
        }
        self.answer(automation_type, worker_id, idle_ttl).await
    }

    /// Removes the worker from the registry (a worker stopping on purpose).
    pub async fn deregister(&self, automation_type: &str, worker_id: &str) -> Result<Deregistered> {
        let removed = self.fleet.worker_remove(automation_type, worker_id).await?;
        Ok(Deregistered { removed })
    }

    async fn answer(
        &self,
        automation_type: &str,
        worker_id: &str,
        idle_ttl: Option<Duration>,
    ) -> Result<WorkerAnswer> {
        let (config, config_gen) = self
            .fleet
            .worker_get_config(automation_type, worker_id)
            .await?;
        Ok(WorkerAnswer {
            automation_type: automation_type.to_string(),
            worker_id: worker_id.to_string(),
            config,
            config_gen,
            heartbeat_seconds: heartbeat_seconds(idle_ttl),
            idle_ttl_seconds: idle_ttl.map(|t| t.as_secs()),
        })
    }
}
