//! The worker registry of one automation type, and the catalog.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use switchyard_core::fleet::{ConfigWrite, FleetBackend, WorkerRecord, WorkerState};
use switchyard_core::{Error, Result};

use super::primitives::{encode_json, value_of};

/// How many compare-and-set rounds [`WorkerRegistry::patch_config`] tries before giving up.
const PATCH_ATTEMPTS: u32 = 16;

/// Workers of one automation type: registration, desired config with generations, reported
/// state and stats.
#[derive(Debug, Clone)]
pub struct WorkerRegistry {
    backend: Arc<dyn FleetBackend>,
    automation_type: String,
}

impl WorkerRegistry {
    /// The registry of `automation_type` on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>, automation_type: impl Into<String>) -> Self {
        WorkerRegistry {
            backend,
            automation_type: automation_type.into(),
        }
    }

    /// The automation type.
    pub fn automation_type(&self) -> &str {
        &self.automation_type
    }

    /// Registers the worker (or updates its hardware); config `{}` at generation 0 when new, or
    /// above any generation it had before a removal.
    pub async fn register(&self, worker_id: &str, hardware: &Value) -> Result<()> {
        self.backend
            .worker_register(&self.automation_type, worker_id, hardware)
            .await
    }

    /// `(config, generation)`, read together.
    pub async fn config(&self, worker_id: &str) -> Result<(Value, u64)> {
        self.backend
            .worker_get_config(&self.automation_type, worker_id)
            .await
    }

    /// Replaces the config; with `expected_gen`, only if the generation still is that one.
    pub async fn set_config(
        &self,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        self.backend
            .worker_set_config(&self.automation_type, worker_id, config, expected_gen)
            .await
    }

    /// Shallow-merges `patch` into the config (the master's PATCH) as a compare-and-set loop,
    /// so concurrent patches never lose each other's keys. Returns the merged
    /// config and its generation, or `None` if the worker is not registered.
    pub async fn patch_config(
        &self,
        worker_id: &str,
        patch: &Map<String, Value>,
    ) -> Result<Option<(Value, u64)>> {
        for _ in 0..PATCH_ATTEMPTS {
            if self.get(worker_id).await?.is_none() {
                return Ok(None);
            }
            let (current, generation) = self.config(worker_id).await?;
            let mut merged = match current {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            for (k, v) in patch {
                merged.insert(k.clone(), v.clone());
            }
            let merged = Value::Object(merged);
            match self
                .set_config(worker_id, &merged, Some(generation))
                .await?
            {
                ConfigWrite::Applied { generation } => return Ok(Some((merged, generation))),
                ConfigWrite::NotRegistered => return Ok(None),
                ConfigWrite::GenMismatch { .. } => continue,
                // `ConfigWrite` may grow; treat anything new as a lost round.
                #[allow(unreachable_patterns)]
                _ => continue,
            }
        }
        Err(Error::Contended {
            op: "patch_config",
            key: format!("{}/{worker_id}", self.automation_type),
            attempts: PATCH_ATTEMPTS,
        })
    }

    /// Overwrites the worker's state report; `false` if it is not registered.
    pub async fn set_state(&self, worker_id: &str, state: WorkerState<'_>) -> Result<bool> {
        self.backend
            .worker_set_state(&self.automation_type, worker_id, state)
            .await
    }

    /// Overwrites the stats document; `false` if not registered.
    pub async fn set_stats(&self, worker_id: &str, stats: &Value) -> Result<bool> {
        self.backend
            .worker_set_stats(&self.automation_type, worker_id, stats)
            .await
    }

    /// Appends a stats frame at `ts`, keeping the newest `max_entries` (the seed's 240).
    pub async fn push_stats(
        &self,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        self.backend
            .worker_stats_push(&self.automation_type, worker_id, ts, frame, max_entries)
            .await
    }

    /// Frames with `ts ≥ since`, oldest first, at most `limit`.
    pub async fn stats_history(
        &self,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        self.backend
            .worker_stats_history(&self.automation_type, worker_id, since, limit)
            .await
    }

    /// The worker's record.
    pub async fn get(&self, worker_id: &str) -> Result<Option<WorkerRecord>> {
        self.backend
            .worker_get(&self.automation_type, worker_id)
            .await
    }

    /// Ids of this type's workers, sorted.
    pub async fn list(&self) -> Result<Vec<String>> {
        Ok(self
            .backend
            .worker_list(Some(&self.automation_type))
            .await?
            .into_iter()
            .map(|(_, w)| w)
            .collect())
    }

    /// Unregisters the worker (its generation is kept); `true` if it existed.
    pub async fn remove(&self, worker_id: &str) -> Result<bool> {
        self.backend
            .worker_remove(&self.automation_type, worker_id)
            .await
    }

    /// Removes workers whose `last_seen` is more than `max_idle_secs` before `now` (the
    /// master's idle eviction); the ids removed.
    pub async fn evict_idle(&self, now: f64, max_idle_secs: f64) -> Result<Vec<String>> {
        let mut evicted = Vec::new();
        for id in self.list().await? {
            if let Some(rec) = self.get(&id).await?
                && now - rec.last_seen > max_idle_secs
                && self.remove(&id).await?
            {
                evicted.push(id);
            }
        }
        Ok(evicted)
    }
}

/// One JSON document per automation type.
#[derive(Debug, Clone)]
pub struct Catalog {
    backend: Arc<dyn FleetBackend>,
}

impl Catalog {
    /// The catalog on `backend`.
    pub fn new(backend: Arc<dyn FleetBackend>) -> Self {
        Catalog { backend }
    }

    /// Stores the document of `automation_type` (as Python `json.dumps` bytes).
    pub async fn set(&self, automation_type: &str, doc: &Value) -> Result<()> {
        let bytes = encode_json("doc", doc)?;
        self.backend.catalog_set(automation_type, &bytes).await
    }

    /// The document of `automation_type`; one that is not JSON is [`Error::Corrupt`].
    pub async fn get(&self, automation_type: &str) -> Result<Option<Value>> {
        match self.backend.catalog_get(automation_type).await? {
            Some(bytes) => value_of(format_args!("catalog[{automation_type:?}]"), &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Every document by automation type.
    pub async fn all(&self) -> Result<BTreeMap<String, Value>> {
        self.backend
            .catalog_all()
            .await?
            .into_iter()
            .map(|(at, bytes)| {
                let v = value_of(format_args!("catalog[{at:?}]"), &bytes)?;
                Ok((at, v))
            })
            .collect()
    }
}
