//! The worker registry of [`PostgresFleetBackend`]: [`Workers`] (guarantees `worker.registry` and
//! `worker.stats`).

use super::*;

#[async_trait]
impl WorkerOps for PostgresFleetBackend {
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        let hw = json_text("hardware", hardware)?;
        // Insert-or-update-hardware in one statement; a new row starts above the generation a
        // removed worker of the same id left behind.
        sqlx::query(
            "INSERT INTO fleet_workers (automation_type, worker_id, hardware, config_gen) \
             VALUES ($1, $2, $3, COALESCE((SELECT config_gen + 1 FROM fleet_worker_gens \
               WHERE automation_type = $1 AND worker_id = $2), 0)) \
             ON CONFLICT (automation_type, worker_id) DO UPDATE SET hardware = excluded.hardware",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(hw)
        .execute(self.pool())
        .await
        .map_err(|e| db("worker_register", automation_type, e))?;
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        // One row: config and generation are read together.
        let row: Option<(String, i64)> = sqlx::query_as(
            "SELECT config, config_gen FROM fleet_workers \
             WHERE automation_type = $1 AND worker_id = $2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("worker_get_config", automation_type, e))?;
        match row {
            None => Ok((Value::Object(Map::new()), 0)),
            Some((config, generation)) => Ok((
                parse_json(
                    format_args!("fleet_workers[{automation_type:?}, {worker_id:?}].config"),
                    &config,
                )?,
                count(generation),
            )),
        }
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        let text = json_text("config", config)?;
        let op = "worker_set_config";
        let expected = expected_gen.map(|g| i64::try_from(g).unwrap_or(i64::MAX));
        // The write decides on the row it locks; only a refused write reads why.
        let written: Option<i64> = sqlx::query_scalar(
            "UPDATE fleet_workers SET config = $3, config_gen = config_gen + 1 \
             WHERE automation_type = $1 AND worker_id = $2 \
             AND ($4::bigint IS NULL OR config_gen = $4) RETURNING config_gen",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .bind(expected)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db(op, automation_type, e))?;
        if let Some(generation) = written {
            return Ok(ConfigWrite::Applied {
                generation: count(generation),
            });
        }
        let current: Option<i64> = sqlx::query_scalar(
            "SELECT config_gen FROM fleet_workers WHERE automation_type = $1 AND worker_id = $2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db(op, automation_type, e))?;
        Ok(match current {
            None => ConfigWrite::NotRegistered,
            Some(current) => ConfigWrite::GenMismatch {
                current: count(current),
            },
        })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        check_finite("last_seen", state.last_seen)?;
        let res = sqlx::query(
            "UPDATE fleet_workers SET state = $3, last_error = $4, last_seen = $5, applied_gen = $6 \
             WHERE automation_type = $1 AND worker_id = $2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(state.state)
        .bind(state.last_error.filter(|e| !e.is_empty()))
        .bind(state.last_seen)
        .bind(
            state
                .applied_gen
                .map(|g| i64::try_from(g).unwrap_or(i64::MAX)),
        )
        .execute(self.pool())
        .await
        .map_err(|e| db("worker_set_state", automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        let text = json_text("stats", stats)?;
        let res = sqlx::query(
            "UPDATE fleet_workers SET stats = $3 WHERE automation_type = $1 AND worker_id = $2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .execute(self.pool())
        .await
        .map_err(|e| db("worker_set_stats", automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        let text = json_text("frame", frame)?;
        let op = "worker_stats_push";
        let mut tx = self
            .pool()
            .begin()
            .await
            .map_err(|e| db(op, automation_type, e))?;
        // The worker's row lock orders this worker's pushes and keeps a removal out meanwhile.
        let registered: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM fleet_workers WHERE automation_type = $1 AND worker_id = $2 FOR UPDATE",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        if registered.is_none() {
            tx.rollback()
                .await
                .map_err(|e| db(op, automation_type, e))?;
            return Ok(false);
        }
        // An identical frame moves to the new ts, as in the seed's Redis sorted set.
        sqlx::query(
            "DELETE FROM fleet_worker_stats \
             WHERE automation_type = $1 AND worker_id = $2 AND frame = $3",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(&text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        sqlx::query(
            "INSERT INTO fleet_worker_stats (automation_type, worker_id, ts, frame) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(ts)
        .bind(&text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        if max_entries > 0 {
            sqlx::query(
                "DELETE FROM fleet_worker_stats WHERE id IN (SELECT id FROM fleet_worker_stats \
                 WHERE automation_type = $1 AND worker_id = $2 \
                 ORDER BY ts DESC, frame DESC OFFSET $3)",
            )
            .bind(automation_type)
            .bind(worker_id)
            .bind(to_i64(max_entries))
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, automation_type, e))?;
        }
        tx.commit().await.map_err(|e| db(op, automation_type, e))?;
        Ok(true)
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
        let frames: Vec<String> = sqlx::query_scalar(
            "SELECT frame FROM fleet_worker_stats \
             WHERE automation_type = $1 AND worker_id = $2 AND ts >= $3 \
             ORDER BY ts, frame LIMIT $4",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(since)
        .bind(to_i64(limit))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("worker_stats_history", automation_type, e))?;
        // A frame that does not parse is skipped, as the seed does.
        Ok(frames
            .iter()
            .filter_map(|f| serde_json::from_str(f).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        type Row = (
            String,
            String,
            i64,
            String,
            f64,
            Option<String>,
            Option<i64>,
            String,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT hardware, config, config_gen, state, last_seen, last_error, applied_gen, stats \
             FROM fleet_workers WHERE automation_type = $1 AND worker_id = $2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.pool())
        .await
        .map_err(|e| db("worker_get", automation_type, e))?;
        let Some((hw, config, generation, state, last_seen, last_error, applied, stats)) = row
        else {
            return Ok(None);
        };
        let loc = |col: &str| format!("fleet_workers[{automation_type:?}, {worker_id:?}].{col}");
        Ok(Some(WorkerRecord {
            hardware: parse_json(loc("hardware"), &hw)?,
            config: parse_json(loc("config"), &config)?,
            config_gen: count(generation),
            state: if state.is_empty() {
                "IDLE".to_string()
            } else {
                state
            },
            last_seen,
            last_error: last_error.filter(|e| !e.is_empty()),
            applied_gen: applied.and_then(|g| u64::try_from(g).ok()),
            stats: parse_json(loc("stats"), &stats)?,
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT automation_type, worker_id FROM fleet_workers \
             WHERE $1::text IS NULL OR automation_type = $1 ORDER BY automation_type, worker_id",
        )
        .bind(automation_type)
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("worker_list", automation_type.unwrap_or("*"), e))
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        // One statement: the worker, its history, and its generation kept for a re-registration.
        let removed: i64 = sqlx::query_scalar(
            "WITH gone AS (DELETE FROM fleet_workers WHERE automation_type = $1 AND worker_id = $2 \
               RETURNING automation_type, worker_id, config_gen), \
             history AS (DELETE FROM fleet_worker_stats \
               WHERE automation_type = $1 AND worker_id = $2), \
             kept AS (INSERT INTO fleet_worker_gens (automation_type, worker_id, config_gen) \
               SELECT automation_type, worker_id, config_gen FROM gone \
               ON CONFLICT (automation_type, worker_id) \
               DO UPDATE SET config_gen = GREATEST(fleet_worker_gens.config_gen, excluded.config_gen)) \
             SELECT count(*) FROM gone",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_one(self.pool())
        .await
        .map_err(|e| db("worker_remove", automation_type, e))?;
        Ok(removed == 1)
    }
}
