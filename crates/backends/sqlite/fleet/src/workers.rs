//! The worker registry of [`SqliteFleetBackend`]: [`Workers`] (guarantees `worker.registry` and
//! `worker.stats`), on the seed's tables.

use super::*;

#[async_trait]
impl WorkerOps for SqliteFleetBackend {
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        let hw = json_text("hardware", hardware)?;
        // Insert-or-update-hardware in one statement; the insert trigger lifts the generation
        // above the one a removed worker left behind.
        sqlx::query(
            "INSERT INTO workers (automation_type, worker_id, hardware, config, config_gen, state, \
             last_seen, last_error, stats) VALUES (?1, ?2, ?3, '{}', 0, 'IDLE', 0, NULL, '{}') \
             ON CONFLICT (automation_type, worker_id) DO UPDATE SET hardware = excluded.hardware",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(hw)
        .execute(&mut *self.writer().await?)
        .await
        .map_err(|e| db("worker_register", automation_type, e))?;
        Ok(())
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        // One row: config and generation are read together, never a torn pair.
        let row: Option<(Option<String>, Option<i64>)> = sqlx::query_as(
            "SELECT config, config_gen FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("worker_get_config", automation_type, e))?;
        match row {
            None => Ok((Value::Object(Map::new()), 0)),
            Some((config, generation)) => Ok((
                parse_json(
                    format_args!("workers[{automation_type:?}, {worker_id:?}].config"),
                    config.as_deref(),
                    Value::Object(Map::new()),
                )?,
                u64::try_from(generation.unwrap_or(0)).unwrap_or(0),
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
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "worker_set_config", automation_type).await?;
        let current: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT config_gen FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db("worker_set_config", automation_type, e))?;
        let Some(current) = current else {
            tx.rollback()
                .await
                .map_err(|e| db("worker_set_config", automation_type, e))?;
            return Ok(ConfigWrite::NotRegistered);
        };
        let current = u64::try_from(current.unwrap_or(0)).unwrap_or(0);
        if expected_gen.is_some_and(|e| e != current) {
            tx.rollback()
                .await
                .map_err(|e| db("worker_set_config", automation_type, e))?;
            return Ok(ConfigWrite::GenMismatch { current });
        }
        let generation = current + 1;
        sqlx::query(
            "UPDATE workers SET config = ?3, config_gen = ?4 \
             WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .bind(i64::try_from(generation).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(|e| db("worker_set_config", automation_type, e))?;
        tx.commit()
            .await
            .map_err(|e| db("worker_set_config", automation_type, e))?;
        Ok(ConfigWrite::Applied { generation })
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        let res = sqlx::query(
            "UPDATE workers SET state = ?3, last_error = ?4, last_seen = ?5, applied_gen = ?6 \
             WHERE automation_type = ?1 AND worker_id = ?2",
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
        .execute(&mut *self.writer().await?)
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
            "UPDATE workers SET stats = ?3 WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(text)
        .execute(&mut *self.writer().await?)
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
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, automation_type).await?;
        if !Self::worker_exists(&mut tx, automation_type, worker_id)
            .await
            .map_err(|e| db(op, automation_type, e))?
        {
            tx.rollback()
                .await
                .map_err(|e| db(op, automation_type, e))?;
            return Ok(false);
        }
        // An identical frame moves to the new ts, as in the seed's Redis ZSET.
        sqlx::query(
            "DELETE FROM worker_stats_history \
             WHERE automation_type = ?1 AND worker_id = ?2 AND frame = ?3",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(&text)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        sqlx::query(
            "INSERT INTO worker_stats_history (automation_type, worker_id, ts, frame) \
             VALUES (?1, ?2, ?3, ?4)",
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
                "DELETE FROM worker_stats_history WHERE rowid IN (SELECT rowid \
                 FROM worker_stats_history WHERE automation_type = ?1 AND worker_id = ?2 \
                 ORDER BY ts DESC, frame DESC LIMIT -1 OFFSET ?3)",
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
        let frames: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT frame FROM worker_stats_history \
             WHERE automation_type = ?1 AND worker_id = ?2 AND ts >= ?3 \
             ORDER BY ts, frame LIMIT ?4",
        )
        .bind(automation_type)
        .bind(worker_id)
        .bind(since)
        .bind(to_i64(limit))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("worker_stats_history", automation_type, e))?;
        // A frame that does not parse is skipped, as the seed does.
        Ok(frames
            .iter()
            .filter_map(|f| serde_json::from_str(f.as_deref()?).ok())
            .collect())
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        type Row = (
            Option<String>,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<f64>,
            Option<String>,
            Option<i64>,
            Option<String>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT hardware, config, config_gen, state, CAST(last_seen AS REAL), last_error, \
             applied_gen, stats FROM workers WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .fetch_optional(self.r())
        .await
        .map_err(|e| db("worker_get", automation_type, e))?;
        let Some((hw, config, generation, state, last_seen, last_error, applied, stats)) = row
        else {
            return Ok(None);
        };
        let loc = |col: &str| format!("workers[{automation_type:?}, {worker_id:?}].{col}");
        let empty = || Value::Object(Map::new());
        Ok(Some(WorkerRecord {
            hardware: parse_json(loc("hardware"), hw.as_deref(), empty())?,
            config: parse_json(loc("config"), config.as_deref(), empty())?,
            config_gen: u64::try_from(generation.unwrap_or(0)).unwrap_or(0),
            state: state
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "IDLE".to_string()),
            last_seen: last_seen.unwrap_or(0.0),
            last_error: last_error.filter(|e| !e.is_empty()),
            applied_gen: applied.and_then(|g| u64::try_from(g).ok()),
            stats: parse_json(loc("stats"), stats.as_deref(), empty())?,
        }))
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT automation_type, worker_id FROM workers \
             WHERE ?1 IS NULL OR automation_type = ?1 ORDER BY automation_type, worker_id",
        )
        .bind(automation_type)
        .fetch_all(self.r())
        .await
        .map_err(|e| db("worker_list", automation_type.unwrap_or("*"), e))
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        let op = "worker_remove";
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, op, automation_type).await?;
        // The delete trigger keeps the generation ; the stats history goes too.
        let res = sqlx::query("DELETE FROM workers WHERE automation_type = ?1 AND worker_id = ?2")
            .bind(automation_type)
            .bind(worker_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, automation_type, e))?;
        sqlx::query(
            "DELETE FROM worker_stats_history WHERE automation_type = ?1 AND worker_id = ?2",
        )
        .bind(automation_type)
        .bind(worker_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, automation_type, e))?;
        tx.commit().await.map_err(|e| db(op, automation_type, e))?;
        Ok(res.rows_affected() == 1)
    }
}
