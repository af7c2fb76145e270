//! Sorted streams of [`PostgresFleetBackend`]: [`Streams`] (guarantee `streams.sorted`).

use super::*;

#[async_trait]
impl StreamOps for PostgresFleetBackend {
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let op = "stream_push";
        let mut tx = self.pool().begin().await.map_err(|e| db(op, name, e))?;
        // An identical envelope moves to the new score, as in the seed's Redis sorted set.
        sqlx::query(
            "INSERT INTO fleet_streams (name, score, body) VALUES ($1, $2, $3) \
             ON CONFLICT (name, body_hash) DO UPDATE SET score = excluded.score",
        )
        .bind(name)
        .bind(score)
        .bind(envelope)
        .execute(&mut *tx)
        .await
        .map_err(|e| db(op, name, e))?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query("DELETE FROM fleet_streams WHERE name = $1 AND score < $2")
                .bind(name)
                .bind(score - ttl)
                .execute(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        // `str(score)` on `{name}.emit`, as the seed publishes it, sent when the push commits.
        let emit = event_payload(&format!("{name}.emit"), float_repr(score).as_bytes())?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(self.channel())
            .bind(emit)
            .execute(&mut *tx)
            .await
            .map_err(|e| db(op, name, e))?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut rows: Vec<(f64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM fleet_streams WHERE id IN (SELECT id FROM fleet_streams \
             WHERE name = $1 ORDER BY score, body LIMIT $2 FOR UPDATE SKIP LOCKED) \
             RETURNING score, body",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("stream_pop", name, e))?;
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(rows.into_iter().map(|r| r.1).collect())
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT body FROM fleet_streams WHERE name = $1 ORDER BY score, body LIMIT $2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.pool())
        .await
        .map_err(|e| db("stream_peek", name, e))
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM fleet_streams WHERE name = $1")
            .bind(name)
            .fetch_one(self.pool())
            .await
            .map_err(|e| db("stream_length", name, e))?;
        Ok(count(n))
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        let op = "stream_trim";
        let mut tx = self.pool().begin().await.map_err(|e| db(op, name, e))?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query("DELETE FROM fleet_streams WHERE name = $1 AND score < fleet_now() - $2")
                .bind(name)
                .bind(ttl)
                .execute(&mut *tx)
                .await
                .map_err(|e| db(op, name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        tx.commit().await.map_err(|e| db(op, name, e))?;
        Ok(())
    }
}

/// Drops the lowest-scored entries beyond `max_len` (0 = no cap) without counting the stream
/// first.
async fn trim_len(conn: &mut PgConnection, name: &str, max_len: u64) -> Result<()> {
    if max_len == 0 {
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM fleet_streams WHERE id IN (SELECT id FROM fleet_streams WHERE name = $1 \
         ORDER BY score DESC, body DESC OFFSET $2)",
    )
    .bind(name)
    .bind(i64::try_from(max_len).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await
    .map_err(|e| db("stream_trim", name, e))?;
    Ok(())
}
