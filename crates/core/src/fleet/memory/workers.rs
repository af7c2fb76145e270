//! The worker registry of [`MemoryFleetBackend`]: [`Workers`] (guarantees `worker.registry` and
//! `worker.stats`).

use super::*;

#[async_trait]
impl WorkerOps for MemoryFleetBackend {
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        if let Some(w) = st.workers.get_mut(&key) {
            w.hardware = hardware.clone();
            return Ok(());
        }
        // A generation left by a removed worker is bumped: the seeded `{}` is a new config for
        // any process still running with the old one.
        let next = st.gens.get(&key).map_or(0, |g| g + 1);
        st.gens.insert(key.clone(), next);
        st.workers.insert(
            key,
            Worker {
                hardware: hardware.clone(),
                config: Value::Object(Map::new()),
                state: None,
                stats: Value::Object(Map::new()),
                history: Vec::new(),
            },
        );
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        Ok(match st.workers.get(&key) {
            Some(w) => (w.config.clone(), st.gens.get(&key).copied().unwrap_or(0)),
            None => (Value::Object(Map::new()), 0),
        })
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        if !st.workers.contains_key(&key) {
            return Ok(ConfigWrite::NotRegistered);
        }
        let current = st.gens.get(&key).copied().unwrap_or(0);
        if expected_gen.is_some_and(|e| e != current) {
            return Ok(ConfigWrite::GenMismatch { current });
        }
        st.gens.insert(key.clone(), current + 1);
        if let Some(w) = st.workers.get_mut(&key) {
            w.config = config.clone();
        }
        Ok(ConfigWrite::Applied {
            generation: current + 1,
        })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        w.state = Some((
            state.state.to_string(),
            state
                .last_error
                .filter(|e| !e.is_empty())
                .map(str::to_string),
            state.last_seen,
            state.applied_gen,
        ));
        Ok(true)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        w.stats = stats.clone();
        Ok(true)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let encoded = serde_json::to_string(frame).map_err(|e| Error::invalid("frame", e))?;
        let mut st = self.state();
        let Some(w) = st.workers.get_mut(&key) else {
            return Ok(false);
        };
        // Same semantics as the seed's ZSET: an identical frame moves to the new ts.
        w.history.retain(|(_, f)| *f != encoded);
        let pos = w
            .history
            .partition_point(|(t, f)| (*t, f.as_str()) < (ts, encoded.as_str()));
        w.history.insert(pos, (ts, encoded));
        if max_entries > 0 && w.history.len() > max_entries {
            let excess = w.history.len() - max_entries;
            w.history.drain(..excess);
        }
        Ok(true)
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        let Some(w) = st.workers.get(&key) else {
            return Ok(Vec::new());
        };
        Ok(w.history
            .iter()
            .filter(|(t, _)| *t >= since)
            .take(limit)
            .filter_map(|(_, f)| serde_json::from_str(f).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        let key = (automation_type.to_string(), worker_id.to_string());
        let st = self.state();
        let Some(w) = st.workers.get(&key) else {
            return Ok(None);
        };
        let (state, last_error, last_seen, applied_gen) = w
            .state
            .clone()
            .unwrap_or_else(|| ("IDLE".to_string(), None, 0.0, None));
        Ok(Some(WorkerRecord {
            hardware: w.hardware.clone(),
            config: w.config.clone(),
            config_gen: st.gens.get(&key).copied().unwrap_or(0),
            state,
            last_seen,
            last_error,
            applied_gen,
            stats: w.stats.clone(),
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        let st = self.state();
        Ok(st
            .workers
            .keys()
            .filter(|(at, _)| automation_type.is_none_or(|want| want == at))
            .cloned()
            .collect())
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let key = (automation_type.to_string(), worker_id.to_string());
        Ok(self.state().workers.remove(&key).is_some())
    }
}
