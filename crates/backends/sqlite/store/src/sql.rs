//! Every statement the store runs. Runtime queries (`sqlx::query`), so building needs no database;
//! `tests/statements.rs` runs each against a fresh file and checks the claim queries' plans.

/// The kind of a row, as the `events_life` index stores it. Must match the migration exactly.
macro_rules! kind {
    () => {
        "(CASE WHEN json_valid(data) THEN json_extract(data, '$.kind') END)"
    };
}

/// The seven lifecycle kinds, as the `events_life` index's `WHERE` lists them.
macro_rules! lifecycle_in {
    () => {
        "IN (
    'run.started', 'run.paused', 'run.resumed', 'run.interrupted',
    'run.completed', 'run.failed', 'run.cancelled'
)"
    };
}

/// The run's highest seq, read in the write transaction.
pub(crate) const MAX_SEQ: &str =
    "SELECT MAX(seq) FROM events WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3";

/// Rows per `INSERT` of a batch (5 parameters each; SQLite allows 32766).
pub(crate) const INSERT_CHUNK: usize = 64;

/// One `INSERT` of `rows` events (1 to `INSERT_CHUNK`). A batch is a few statements instead of one
/// per event; the texts are built once, and sqlx caches each prepared size.
pub(crate) fn insert(rows: usize) -> &'static str {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| (1..=INSERT_CHUNK).map(insert_text).collect());
    texts
        .get(rows.clamp(1, INSERT_CHUNK) - 1)
        .map_or("", String::as_str)
}

fn insert_text(rows: usize) -> String {
    let mut sql =
        String::from("INSERT INTO events (namespace, log_key, run_id, seq, data) VALUES ");
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(?, ?, ?, ?, ?)");
    }
    sql
}

/// A log's events in append order, paged; `?3 = -1` means no limit.
pub(crate) const READ: &str = "SELECT id, data FROM events WHERE namespace = ?1 AND log_key = ?2 \
     ORDER BY id LIMIT ?3 OFFSET ?4";

/// One run's events from a seq. Seqs grow with ids within a run (each is MAX + 1 under the write
/// lock), so seq order is append order, and `events_by_run` serves the range without a sort.
pub(crate) const READ_RUN: &str = "SELECT id, data FROM events \
     WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3 AND seq >= ?4 ORDER BY seq";

/// The open runs of one log, sorted by run id, from the trigger-kept `events_open_runs`: one range
/// of its primary key, however long the log's history (ADR 0031).
pub(crate) const OPEN_RUNS: &str = "SELECT run_id FROM events_open_runs \
     WHERE namespace = ?1 AND log_key = ?2 ORDER BY run_id";

/// A run's latest event of any kind (its tail): one seek in `events_by_run`.
pub(crate) const TAIL: &str = "SELECT id, data FROM events \
     WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3 ORDER BY seq DESC LIMIT 1";

/// A run's latest lifecycle kind: one seek in `events_life`.
/// The line of a log (ADR 0394): how many runs wait, the last place given and whether `?3`
/// waits, in one read under the push's write lock.
pub(crate) const LINE_STATE: &str = "SELECT count(*), COALESCE(max(pos), 0), \
     COALESCE(max(run_id = ?3), 0) FROM events_line WHERE namespace = ?1 AND log_key = ?2";

/// Adds a waiting run at place `?3` of its log's line.
pub(crate) const LINE_PUSH: &str = "INSERT INTO events_line (namespace, log_key, pos, run_id, entry) \
     VALUES (?1, ?2, ?3, ?4, ?5)";

/// The first `?3` waiting runs of a log, oldest first.
pub(crate) const LINE_READ: &str = "SELECT pos, entry FROM events_line \
     WHERE namespace = ?1 AND log_key = ?2 ORDER BY pos LIMIT ?3";

/// Takes a run out of its log's line.
pub(crate) const LINE_REMOVE: &str =
    "DELETE FROM events_line WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3";

pub(crate) const LIFE: &str = concat!(
    "SELECT ",
    kind!(),
    " FROM events WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3 AND ",
    kind!(),
    " ",
    lifecycle_in!(),
    " ORDER BY id DESC LIMIT 1"
);

/// Every run of a namespace with its latest lifecycle kind.
pub(crate) const LIST_RUNS: &str = concat!(
    "SELECT log_key, run_id, kind FROM (SELECT log_key, run_id, MAX(id), ",
    kind!(),
    " AS kind FROM events WHERE namespace = ?1 AND ",
    kind!(),
    " ",
    lifecycle_in!(),
    " GROUP BY log_key, run_id)"
);

#[cfg(test)]
mod tests {
    use sqlx::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
    use switchyard_conformance::harness::TempSqlite;

    use super::*;
    use crate::SqliteEventStore;

    async fn migrated() -> (TempSqlite, SqliteConnection) {
        let file = TempSqlite::new();
        SqliteEventStore::open(file.path())
            .await
            .expect("open")
            .close()
            .await;
        let conn =
            SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(file.path()))
                .await
                .expect("connect");
        (file, conn)
    }

    async fn plan(conn: &mut SqliteConnection, statement: &str, binds: usize) -> String {
        let mut query = sqlx::query_as::<_, (i64, i64, i64, String)>(
            // Leaked once per test statement; the string must outlive the query.
            Box::leak(format!("EXPLAIN QUERY PLAN {statement}").into_boxed_str()),
        );
        for _ in 0..binds {
            query = query.bind("x");
        }
        let rows = query.fetch_all(&mut *conn).await.expect("explain");
        rows.into_iter()
            .map(|(_, _, _, detail)| detail)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The lifecycle queries must be served by `events_life`: if the kind expression here drifts
    /// from the migration's, SQLite silently falls back to parsing every row of the log, and this
    /// test fails. Claims read `events_open_runs` by its key.
    #[tokio::test]
    async fn lifecycle_queries_use_their_indexes() {
        let (_file, mut conn) = migrated().await;
        let open = plan(&mut conn, OPEN_RUNS, 2).await;
        assert!(
            open.contains("SEARCH events_open_runs USING PRIMARY KEY (namespace=? AND log_key=?)"),
            "{open}"
        );
        assert!(!open.contains("TEMP B-TREE"), "{open}");
        for (statement, binds) in [(LIFE, 3), (LIST_RUNS, 1)] {
            let plan = plan(&mut conn, statement, binds).await;
            assert!(plan.contains("INDEX events_life"), "{statement}\n{plan}");
            assert!(!plan.contains("SCAN events"), "{statement}\n{plan}");
        }
        for (statement, binds, index) in [
            (TAIL, 3, "events_by_run"),
            (READ_RUN, 4, "events_by_run"),
            (READ, 4, "events_by_log"),
            (MAX_SEQ, 3, "events_by_run"),
        ] {
            let plan = plan(&mut conn, statement, binds).await;
            assert!(plan.contains(index), "{statement}\n{plan}");
            assert!(
                !plan.contains("TEMP B-TREE"),
                "no sort: {statement}\n{plan}"
            );
        }
    }

    /// Every statement runs against a fresh file (runtime queries are not checked at build time).
    #[tokio::test]
    async fn every_statement_runs() {
        let (_file, mut conn) = migrated().await;
        sqlx::query(insert(1))
            .bind("ns")
            .bind("log")
            .bind("run")
            .bind(0_i64)
            .bind(r#"{"kind":"run.started"}"#)
            .execute(&mut conn)
            .await
            .expect("insert");
        // Texts bind as the namespace, log and run; integers as seq, limit and offset.
        for (statement, binds) in [
            (MAX_SEQ, &["ns", "log", "run"][..]),
            (READ, &["ns", "log", "-1", "0"]),
            (READ_RUN, &["ns", "log", "run", "0"]),
            (OPEN_RUNS, &["ns", "log"]),
            (TAIL, &["ns", "log", "run"]),
            (LIFE, &["ns", "log", "run"]),
            (LIST_RUNS, &["ns"]),
            (LINE_STATE, &["ns", "log", "run"]),
        ] {
            let mut query = sqlx::query(statement);
            for bind in binds {
                query = match bind.parse::<i64>() {
                    Ok(n) => query.bind(n),
                    Err(_) => query.bind(*bind),
                };
            }
            let rows = query.fetch_all(&mut conn).await.expect(statement);
            assert!(!rows.is_empty(), "{statement} found the row");
        }
        let open: Vec<String> = sqlx::query_scalar(OPEN_RUNS)
            .bind("ns")
            .bind("log")
            .fetch_all(&mut conn)
            .await
            .expect("open runs");
        assert_eq!(open, vec!["run".to_string()]);
    }
}
