//! The worker registry of [`RedisFleetBackend`]: [`Workers`] (guarantees `worker.registry` and
//! `worker.stats`), on the seed's keys.

use super::*;

#[async_trait]
impl WorkerOps for RedisFleetBackend {
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let mut keys = vec![
            k.worker(at, wid, "hardware"),
            k.worker(at, wid, "config"),
            k.worker(at, wid, "gen"),
            k.workers_of(at),
        ];
        if self.cluster_layout() {
            // The type index lives in its own slot; it is written first, so every registered
            // worker's type is listed (a type whose workers are gone lists none).
            let types = k.worker_types();
            self.command(
                "worker_register",
                &types,
                self.client().sadd::<(), _, _>(&types, quote(at)),
            )
            .await?;
        } else {
            keys.push(k.workers_all());
        }
        self.eval(
            "worker_register",
            &k.worker(at, wid, "hardware"),
            &self.inner.scripts.worker_register,
            keys,
            vec![
                text(py_json(hardware)),
                text(wid),
                text(FleetKeys::all_member(at, wid)),
            ],
        )
        .await?;
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        let k = &self.inner.keys;
        let ck = k.worker(automation_type, worker_id, "config");
        // One MGET: config and generation are read together, never a torn pair.
        let r: Vec<RValue> = self
            .command(
                "worker_get_config",
                &ck,
                self.client().mget(vec![
                    ck.clone(),
                    k.worker(automation_type, worker_id, "gen"),
                ]),
            )
            .await?;
        let mut it = r.into_iter();
        let config = it.next().and_then(to_bytes);
        let generation = it.next().as_ref().and_then(to_i64).unwrap_or(0);
        match config {
            None => Ok((Value::Object(Map::new()), 0)),
            Some(raw) => Ok((json_doc(&ck, Some(raw))?, generation.max(0) as u64)),
        }
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let reply = self
            .eval(
                "worker_set_config",
                &k.worker(at, wid, "config"),
                &self.inner.scripts.worker_set_config,
                vec![
                    k.workers_of(at),
                    k.worker(at, wid, "config"),
                    k.worker(at, wid, "gen"),
                ],
                vec![
                    text(wid),
                    text(py_json(config)),
                    text(expected_gen.map(|g| g.to_string()).unwrap_or_default()),
                ],
            )
            .await?;
        let parts = array(reply);
        let code = parts.first().and_then(to_i64);
        let generation = parts.get(1).and_then(to_i64).unwrap_or(0).max(0) as u64;
        Ok(match code {
            Some(1) => ConfigWrite::Applied { generation },
            Some(0) => ConfigWrite::GenMismatch {
                current: generation,
            },
            _ => ConfigWrite::NotRegistered,
        })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_set_state",
                &k.worker(at, wid, "state"),
                &self.inner.scripts.worker_set_state,
                vec![k.workers_of(at), k.worker(at, wid, "state")],
                vec![
                    text(wid),
                    text(state.state),
                    text(float_repr(state.last_seen)),
                    text(state.last_error.unwrap_or("")),
                    text(state.applied_gen.map(|g| g.to_string()).unwrap_or_default()),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_set_stats",
                &k.worker(at, wid, "stats"),
                &self.inner.scripts.worker_set_stats,
                vec![k.workers_of(at), k.worker(at, wid, "stats")],
                vec![text(wid), text(py_json(stats))],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let n = self
            .eval_i64(
                "worker_stats_push",
                &k.worker(at, wid, "stats:history"),
                &self.inner.scripts.worker_stats_push,
                vec![k.workers_of(at), k.worker(at, wid, "stats:history")],
                vec![
                    text(wid),
                    text(float_repr(ts)),
                    text(py_json(frame)),
                    int(max_entries as u64),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = self
            .inner
            .keys
            .worker(automation_type, worker_id, "stats:history");
        let r: Vec<RValue> = self
            .command(
                "worker_stats_history",
                &k,
                self.client()
                    .zrangebyscore(&k, since, "+inf", false, Some((0, limit as i64))),
            )
            .await?;
        // A frame that is not JSON is skipped, as the seed does.
        Ok(r.into_iter()
            .filter_map(to_bytes)
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let loc = k.worker(at, wid, "*");
        let reply = self
            .eval(
                "worker_get",
                &loc,
                &self.inner.scripts.worker_get,
                vec![
                    k.workers_of(at),
                    k.worker(at, wid, "hardware"),
                    k.worker(at, wid, "config"),
                    k.worker(at, wid, "gen"),
                    k.worker(at, wid, "stats"),
                    k.worker(at, wid, "state"),
                ],
                vec![text(wid)],
            )
            .await?;
        let parts = array(reply);
        if parts.len() < 4 {
            return Ok(None);
        }
        let mut it = parts.into_iter();
        let mut next = || it.next().unwrap_or(RValue::Null);
        let hardware = json_doc(&k.worker(at, wid, "hardware"), to_bytes(next()))?;
        let config = json_doc(&k.worker(at, wid, "config"), to_bytes(next()))?;
        let config_gen = to_i64(&next()).unwrap_or(0).max(0) as u64;
        let stats = json_doc(&k.worker(at, wid, "stats"), to_bytes(next()))?;
        let state = to_string(next()).unwrap_or_else(|| "IDLE".to_string());
        let last_seen = to_f64(&next()).unwrap_or(0.0);
        let last_error = to_string(next()).filter(|e| !e.is_empty());
        let applied_gen = to_i64(&next()).and_then(|g| u64::try_from(g).ok());
        Ok(Some(WorkerRecord {
            hardware,
            config,
            config_gen,
            state,
            last_seen,
            last_error,
            applied_gen,
            stats,
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        let k = &self.inner.keys;
        let mut out: Vec<(String, String)> = match automation_type {
            Some(at) => {
                let key = k.workers_of(at);
                let members: Vec<RValue> = self
                    .command("worker_list", &key, self.client().smembers(&key))
                    .await?;
                members
                    .into_iter()
                    .filter_map(to_string)
                    .map(|wid| (at.to_string(), wid))
                    .collect()
            }
            None if self.cluster_layout() => {
                let key = k.worker_types();
                let types: Vec<RValue> = self
                    .command("worker_list", &key, self.client().smembers(&key))
                    .await?;
                let mut out = Vec::new();
                // One SMEMBERS per type, each in its type's slot.
                for at in types.into_iter().filter_map(to_string).map(|t| unquote(&t)) {
                    let key = k.workers_of(&at);
                    let members: Vec<RValue> = self
                        .command("worker_list", &key, self.client().smembers(&key))
                        .await?;
                    out.extend(
                        members
                            .into_iter()
                            .filter_map(to_string)
                            .map(|wid| (at.clone(), wid)),
                    );
                }
                out
            }
            None => {
                let key = k.workers_all();
                let members: Vec<RValue> = self
                    .command("worker_list", &key, self.client().smembers(&key))
                    .await?;
                members
                    .into_iter()
                    .filter_map(to_string)
                    .filter_map(|m| {
                        let (at, wid) = m.split_once('|')?;
                        Some((unquote(at), unquote(wid)))
                    })
                    .collect()
            }
        };
        out.sort();
        Ok(out)
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let k = &self.inner.keys;
        let (at, wid) = (automation_type, worker_id);
        let mut keys = vec![
            k.workers_of(at),
            k.worker(at, wid, "hardware"),
            k.worker(at, wid, "config"),
            k.worker(at, wid, "state"),
            k.worker(at, wid, "stats"),
            k.worker(at, wid, "stats:history"),
        ];
        if !self.cluster_layout() {
            keys.push(k.workers_all());
        }
        let n = self
            .eval_i64(
                "worker_remove",
                &k.workers_of(at),
                &self.inner.scripts.worker_remove,
                keys,
                vec![text(wid), text(FleetKeys::all_member(at, wid))],
            )
            .await?;
        Ok(n == 1)
    }
}
