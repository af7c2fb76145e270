//! Sorted streams of [`SqliteFleetBackend`]: [`Streams`] (guarantee `streams.sorted`), on the
//! seed's tables.

use super::*;

#[async_trait]
impl StreamOps for SqliteFleetBackend {
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "stream_push", name).await?;
        // An identical envelope moves to the new score (as in the seed's Redis sorted set).
        sqlx::query("DELETE FROM streams WHERE name = ?1 AND body = ?2")
            .bind(name)
            .bind(envelope)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_push", name, e))?;
        sqlx::query("INSERT INTO streams (name, score, body) VALUES (?1, ?2, ?3)")
            .bind(name)
            .bind(score)
            .bind(envelope)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_push", name, e))?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query("DELETE FROM streams WHERE name = ?1 AND score < ?2")
                .bind(name)
                .bind(score - ttl)
                .execute(&mut *tx)
                .await
                .map_err(|e| db("stream_push", name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        tx.commit().await.map_err(|e| db("stream_push", name, e))?;
        // `str(score)`, as the seed publishes it.
        self.publish(&format!("{name}.emit"), float_repr(score).into_bytes());
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut rows: Vec<(f64, Vec<u8>)> = sqlx::query_as(
            "DELETE FROM streams WHERE id IN \
             (SELECT id FROM streams WHERE name = ?1 ORDER BY score, body LIMIT ?2) \
             RETURNING CAST(score AS REAL), COALESCE(body, X'')",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(&mut *self.writer().await?)
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
            "SELECT COALESCE(body, X'') FROM streams WHERE name = ?1 ORDER BY score, body LIMIT ?2",
        )
        .bind(name)
        .bind(to_i64(n))
        .fetch_all(self.r())
        .await
        .map_err(|e| db("stream_peek", name, e))
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM streams WHERE name = ?1")
            .bind(name)
            .fetch_one(self.r())
            .await
            .map_err(|e| db("stream_length", name, e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        let mut w = self.writer().await?;
        let mut tx = begin(&mut w, "stream_trim", name).await?;
        if let Some(ttl) = ttl_secs(ttl) {
            sqlx::query(concat!(
                "DELETE FROM streams WHERE name = ?1 AND score < ",
                now_sql!(),
                " - ?2"
            ))
            .bind(name)
            .bind(ttl)
            .execute(&mut *tx)
            .await
            .map_err(|e| db("stream_trim", name, e))?;
        }
        trim_len(&mut tx, name, max_len).await?;
        tx.commit().await.map_err(|e| db("stream_trim", name, e))?;
        Ok(())
    }
}
