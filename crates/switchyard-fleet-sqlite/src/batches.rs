//! Batches of [`SqliteFleetBackend`]: [`QueueBatches`] (guarantee 26). Each batch is one SQL
//! statement, group-committed like the single-task writes (ADR 0150, ADR 0291): one
//! multi-row `INSERT`, one reserve of up to `max` rows, one `DELETE … IN (…)`.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::*;

/// `sql` followed by `n` groups `group(i)` separated by commas (parameters numbered by caller).
fn list(sql: &str, n: usize, group: impl Fn(&mut String, usize)) -> String {
    let mut out = String::with_capacity(sql.len() + n * 24);
    out.push_str(sql);
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        group(&mut out, i);
    }
    out
}

#[async_trait]
impl QueueBatches for SqliteFleetBackend {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<()> {
        check_name("queue", name)?;
        check_batch("bodies", bodies.len())?;
        if bodies.is_empty() {
            return Ok(());
        }
        // One multi-row INSERT: rows take ascending ids in the order given, and the statement
        // is atomic, so a reader sees all of the batch or none of it.
        let sql = list(
            "INSERT INTO queues (name, tier, body, attempts) VALUES ",
            bodies.len(),
            |out, i| {
                let _ = write!(out, "(?1, ?2, ?{}, 0)", i + 3);
            },
        );
        let mut args = Vec::with_capacity(bodies.len() + 2);
        args.push(Arg::Text(name.to_string()));
        args.push(Arg::Text(tier_name(priority).to_string()));
        args.extend(bodies.iter().map(|b| Arg::Blob(b.clone())));
        self.inner
            .batch
            .write("queue_push_many", name, sql, args)
            .await?;
        self.inner.pushed.notify_waiters();
        Ok(())
    }

    async fn queue_reserve_many(
        &self,
        name: &str,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Delivery>> {
        check_name("queue", name)?;
        check_batch("max", max)?;
        if max == 0 {
            return Err(Error::invalid("max", "must be at least 1"));
        }
        self.reserve_wait("queue_reserve_many", name, max, timeout, visibility)
            .await
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        check_name("queue", name)?;
        check_batch("receipts", receipts.len())?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        let sql = list(
            "DELETE FROM queue_processing WHERE name = ?1 AND task_id IN (",
            receipts.len(),
            |out, i| {
                let _ = write!(out, "?{}", i + 2);
            },
        ) + ") RETURNING task_id";
        let mut args = Vec::with_capacity(receipts.len() + 1);
        args.push(Arg::Text(name.to_string()));
        args.extend(receipts.iter().map(|r| Arg::Text(r.as_str().to_string())));
        let rows = self
            .inner
            .batch
            .write("queue_ack_many", name, sql, args)
            .await?;
        let mut acked = HashSet::with_capacity(rows.len());
        for row in &rows {
            let (receipt,): (String,) =
                sqlx::FromRow::from_row(row).map_err(|e| db("queue_ack_many", name, e))?;
            acked.insert(receipt);
        }
        // A receipt given twice was acked once: the first mention answers `true`.
        Ok(receipts.iter().map(|r| acked.remove(r.as_str())).collect())
    }
}
