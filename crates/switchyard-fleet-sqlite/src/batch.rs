//! Group commit for the fleet's one-statement writes (ADR 0150).
//!
//! Every `Write` is one SQL statement with its arguments. One task takes every pending write
//! from a channel and sends them to the writer connection as one multi-statement string,
//! `BEGIN IMMEDIATE; SAVEPOINT w; <write 1>; RELEASE w; SAVEPOINT w; <write 2>; …; COMMIT`, so
//! a batch costs one hand-off to sqlx's connection thread and one commit instead of one of each
//! per write. Each write is its own savepoint: a failing one is rolled back alone and the batch
//! goes on. Replies leave only after COMMIT.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, Either, SqliteConnection};
use switchyard_core::{Error, Result};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{WHAT, db};

/// The writer connection, shared by the batch task and the multi-statement operations.
pub(super) type Writer = Arc<Mutex<Option<SqliteConnection>>>;

/// Most writes in one transaction: bounds the write lock's hold and the SQL string.
const MAX_BATCH: usize = 256;

/// One bound value of a [`Write`].
#[derive(Clone)]
pub(super) enum Arg {
    Text(String),
    Blob(Vec<u8>),
    Real(f64),
    Int(i64),
}

/// One write: a single statement numbering its parameters `?1`, `?2`, … in `args` order.
pub(super) struct Write {
    op: &'static str,
    key: String,
    sql: Cow<'static, str>,
    args: Vec<Arg>,
    reply: oneshot::Sender<Result<Vec<SqliteRow>>>,
}

impl Write {
    fn fail(self, e: Error) {
        let _ = self.reply.send(Err(e));
    }

    /// Fails a write that had succeeded in a transaction that did not commit.
    fn fail_with_batch(self, cause: &str) {
        let e = Error::unavailable(
            self.op,
            self.key.clone(),
            format!("the batch transaction did not commit: {cause}"),
        );
        self.fail(e);
    }
}

/// Handle on the batch task; dropping every clone ends the task.
#[derive(Clone)]
pub(super) struct Batcher {
    tx: mpsc::UnboundedSender<Write>,
}

impl Batcher {
    /// Starts the batch task on a thread of its own, with its own small runtime: it then
    /// outlives whichever runtime opened the backend (tests open one per case) and ends when
    /// the last `Batcher` is dropped.
    pub(super) fn spawn(writer: Writer) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("fleet-sqlite-batch".into())
            .spawn(move || rt.block_on(run(writer, rx)))?;
        Ok(Batcher { tx })
    }

    /// Runs `sql` (one statement) as its own atomic unit in the next batch; its rows once the
    /// batch has committed.
    pub(super) async fn write(
        &self,
        op: &'static str,
        key: &str,
        sql: impl Into<Cow<'static, str>>,
        args: Vec<Arg>,
    ) -> Result<Vec<SqliteRow>> {
        let (reply, rx) = oneshot::channel();
        let w = Write {
            op,
            key: key.to_string(),
            sql: sql.into(),
            args,
            reply,
        };
        self.tx.send(w).map_err(|_| Error::Closed { what: WHAT })?;
        // A dropped reply means the task is gone (its runtime shut down).
        rx.await.map_err(|_| Error::Closed { what: WHAT })?
    }
}

async fn run(writer: Writer, mut rx: mpsc::UnboundedReceiver<Write>) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut guard = writer.lock().await;
        // Whatever arrived while waiting for the connection joins this batch.
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        match guard.as_mut() {
            None => batch
                .drain(..)
                .for_each(|w| w.fail(Error::Closed { what: WHAT })),
            Some(conn) if batch.len() == 1 => {
                if let Some(w) = batch.pop() {
                    run_one(conn, w).await;
                }
            }
            Some(conn) => run_batch(conn, batch.drain(..).collect()).await,
        }
    }
}

/// Adds `from` to `args`; `None` (a parameter past the write's arguments) is an error.
fn bind_all(
    args: &mut SqliteArguments<'static>,
    from: impl IntoIterator<Item = Option<Arg>>,
) -> std::result::Result<(), String> {
    for a in from {
        let r = match a.ok_or("a parameter has no argument")? {
            Arg::Text(v) => args.add(v),
            Arg::Blob(v) => args.add(v),
            Arg::Real(v) => args.add(v),
            Arg::Int(v) => args.add(v),
        };
        r.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A lone write runs as one autocommit statement, from the statement cache: one statement is
/// atomic and takes the write lock (waiting up to the busy timeout) like `BEGIN IMMEDIATE`.
async fn run_one(conn: &mut SqliteConnection, mut w: Write) {
    let mut args = SqliteArguments::default();
    if let Err(e) = bind_all(&mut args, std::mem::take(&mut w.args).into_iter().map(Some)) {
        let e = Error::invalid("arguments", e);
        return w.fail(e);
    }
    let res = sqlx::query_with(&w.sql, args).fetch_all(&mut *conn).await;
    let res = res.map_err(|e| db(w.op, &w.key, e));
    let _ = w.reply.send(res);
}

/// What the connection thread returned for one multi-statement string.
enum Step {
    Row(SqliteRow),
    /// A statement finished.
    End,
}

/// Runs the multi-statement string; the steps before the first error, and that error.
async fn execute(
    conn: &mut SqliteConnection,
    sql: &str,
    args: SqliteArguments<'static>,
) -> (Vec<Step>, Option<sqlx::Error>) {
    let mut steps = Vec::new();
    // Multi-statement strings are SQLite-only in sqlx and deprecated on `Query`; the executor's
    // `fetch_many` is the way to see each statement's end.
    let q = sqlx::query_with(sql, args).persistent(false);
    let mut stream = sqlx::Executor::fetch_many(conn, q);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Either::Left(_)) => steps.push(Step::End),
            Ok(Either::Right(row)) => steps.push(Step::Row(row)),
            Err(e) => return (steps, Some(e)),
        }
    }
    (steps, None)
}

/// Ends an open transaction whatever state it is in; an error means there was none.
async fn rollback_quietly(conn: &mut SqliteConnection) {
    let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
}

/// Appends `sql` with each `?N` turned into a bare `?`, and returns which argument (0-based)
/// each `?` takes, in order. Bare parameters are what sqlx numbers across the statements of one
/// string (it binds `?N` per statement, and stops at the first unnamed slot past its
/// arguments, so `?11` alone in a statement would be left NULL). Our statements hold no `?`
/// inside literals.
fn positional(sql: &str, out: &mut String) -> Vec<usize> {
    let mut order = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '?' {
            continue;
        }
        let mut n = 0usize;
        let mut digits = false;
        while let Some(v) = chars.peek().and_then(|d| d.to_digit(10)) {
            n = n * 10 + v as usize;
            digits = true;
            chars.next();
        }
        if digits && n > 0 {
            order.push(n - 1);
        }
    }
    order
}

/// Runs `rest` in one transaction of savepoints, recovering from a failing write, and replies.
async fn run_batch(conn: &mut SqliteConnection, mut rest: VecDeque<Write>) {
    // Writes that succeeded inside the open transaction, with their rows; replied at COMMIT.
    let mut done: Vec<(Write, Vec<SqliteRow>)> = Vec::new();
    let mut in_tx = false;
    while !rest.is_empty() || in_tx {
        let begin = !in_tx;
        let mut sql = String::with_capacity(64 + rest.len() * 160);
        let mut args = SqliteArguments::default();
        if begin {
            sql.push_str("BEGIN IMMEDIATE;\n");
        }
        let mut bad = false;
        for w in rest.iter() {
            sql.push_str("SAVEPOINT w;\n");
            let order = positional(&w.sql, &mut sql);
            sql.push_str(";\nRELEASE w;\n");
            let own = order.iter().map(|&i| w.args.get(i).cloned());
            bad |= bind_all(&mut args, own).is_err();
        }
        sql.push_str("COMMIT");
        if bad {
            // Cannot happen with our value types; fail everything rather than misbind.
            for w in rest.drain(..) {
                w.fail(Error::invalid("arguments", "a batch argument did not bind"));
            }
            if in_tx {
                rollback_quietly(conn).await;
                for (w, _) in done.drain(..) {
                    w.fail_with_batch("a batch argument did not bind");
                }
            }
            return;
        }
        let writes = rest.len();
        let (steps, failure) = execute(conn, &sql, args).await;
        // Statement k of the string: [BEGIN], then SAVEPOINT / body / RELEASE per write, COMMIT.
        let first = usize::from(begin);
        let mut stmt = 0usize;
        let mut committed = false;
        let mut rows = Vec::new();
        let mut body_rows = Vec::new();
        for step in steps {
            match step {
                Step::Row(r) => rows.push(r),
                Step::End => {
                    if begin && stmt == 0 {
                        in_tx = true;
                    } else {
                        let k = stmt - first;
                        if k == 3 * writes {
                            in_tx = false;
                            committed = true;
                            for (w, rows) in done.drain(..) {
                                let _ = w.reply.send(Ok(rows));
                            }
                        } else if k % 3 == 1 {
                            body_rows = std::mem::take(&mut rows);
                        } else if k % 3 == 2
                            && let Some(w) = rest.pop_front()
                        {
                            done.push((w, std::mem::take(&mut body_rows)));
                        }
                    }
                    rows.clear();
                    stmt += 1;
                }
            }
        }
        let Some(e) = failure else {
            if !committed {
                // The string stopped without an error or a COMMIT: never expected; give up
                // on the batch rather than guess which statements ran.
                rollback_quietly(conn).await;
                for (w, _) in done.drain(..) {
                    w.fail_with_batch("the batch stopped early");
                }
                for w in rest.drain(..) {
                    w.fail_with_batch("the batch stopped early");
                }
                return;
            }
            continue;
        };
        if begin && stmt == 0 {
            // BEGIN IMMEDIATE failed (busy past the timeout, I/O): nothing ran.
            let cause = e.to_string();
            let mut all = rest.drain(..);
            if let Some(w) = all.next() {
                let err = db(w.op, &w.key, e);
                w.fail(err);
            }
            for w in all {
                let err = Error::unavailable(w.op, w.key.clone(), cause.clone());
                w.fail(err);
            }
            return;
        }
        let k = stmt - first;
        let cause = e.to_string();
        if k == 3 * writes {
            // COMMIT failed: nothing of the transaction is kept.
            rollback_quietly(conn).await;
            in_tx = false;
            for (w, _) in done.drain(..) {
                w.fail_with_batch(&cause);
            }
            continue;
        }
        let Some(w) = rest.pop_front() else {
            rollback_quietly(conn).await;
            in_tx = false;
            continue;
        };
        let err = db(w.op, &w.key, e);
        w.fail(err);
        // The write's own failure: undo its savepoint and go on with the rest. If that fails,
        // SQLite already rolled back the whole transaction (I/O, full disk), so the writes
        // before it are lost: they fail too, and the rest start a new transaction.
        let undone = k % 3 == 1
            && sqlx::query("ROLLBACK TO w")
                .execute(&mut *conn)
                .await
                .is_ok()
            && sqlx::query("RELEASE w").execute(&mut *conn).await.is_ok();
        if !undone {
            rollback_quietly(conn).await;
            in_tx = false;
            for (w, _) in done.drain(..) {
                w.fail_with_batch(&cause);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::{ConnectOptions, Row};
    use switchyard_conformance::harness::TempSqlite;

    #[test]
    fn numbered_parameters_become_bare_in_order() {
        let mut out = String::new();
        let order = positional("SELECT ?1, ?12, ?2 + ?1, '?'", &mut out);
        assert_eq!(out, "SELECT ?, ?, ? + ?, '?'");
        assert_eq!(order, vec![0, 11, 1, 0]);
    }

    type Reply = oneshot::Receiver<Result<Vec<SqliteRow>>>;

    /// An insert of `v` into `t` (values must be positive), returning the doubled value.
    fn insert(v: i64) -> (Write, Reply) {
        let (reply, rx) = oneshot::channel();
        let w = Write {
            op: "test_insert",
            key: v.to_string(),
            sql: "INSERT INTO t (v, note) VALUES (?1, ?2) RETURNING v * 2".into(),
            args: vec![Arg::Int(v), Arg::Text(format!("row {v}"))],
            reply,
        };
        (w, rx)
    }

    async fn conn(db: &TempSqlite) -> SqliteConnection {
        let mut c = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db.path())
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .connect()
            .await
            .expect("open");
        sqlx::query("CREATE TABLE t (v INTEGER PRIMARY KEY CHECK (v > 0), note TEXT NOT NULL)")
            .execute(&mut c)
            .await
            .expect("create");
        c
    }

    async fn stored(c: &mut SqliteConnection) -> Vec<(i64, String)> {
        sqlx::query_as("SELECT v, note FROM t ORDER BY v")
            .fetch_all(c)
            .await
            .expect("select")
    }

    /// Runs one batch of inserts; each write's doubled value, or `None` if it failed.
    async fn batch(c: &mut SqliteConnection, values: &[i64]) -> Vec<Option<i64>> {
        let (writes, replies): (VecDeque<_>, Vec<_>) = values.iter().map(|&v| insert(v)).unzip();
        run_batch(c, writes).await;
        let mut out = Vec::new();
        for rx in replies {
            let res = rx.await.expect("every write is answered");
            out.push(res.ok().map(|rows| {
                assert_eq!(rows.len(), 1, "one RETURNING row per insert");
                rows[0].get::<i64, _>(0)
            }));
        }
        out
    }

    #[tokio::test]
    async fn each_write_gets_its_own_rows_and_commits() {
        let db = TempSqlite::new();
        let mut c = conn(&db).await;
        assert_eq!(
            batch(&mut c, &[1, 2, 3]).await,
            vec![Some(2), Some(4), Some(6)]
        );
        let notes: Vec<i64> = stored(&mut c).await.into_iter().map(|r| r.0).collect();
        assert_eq!(notes, vec![1, 2, 3]);
        // Committed: a second connection sees the rows.
        let mut other = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db.path())
            .connect()
            .await
            .expect("open");
        assert_eq!(stored(&mut other).await.len(), 3);
    }

    #[tokio::test]
    async fn a_failing_write_rolls_back_alone_wherever_it_sits() {
        let db = TempSqlite::new();
        let mut c = conn(&db).await;
        // CHECK fails for -1, the primary key for the second 5: first, middle, last, twice.
        let got = batch(&mut c, &[-1, 4, 5, -2, 5, 6, -3]).await;
        assert_eq!(
            got,
            vec![None, Some(8), Some(10), None, None, Some(12), None]
        );
        let rows = stored(&mut c).await;
        assert_eq!(
            rows,
            vec![
                (4, "row 4".to_string()),
                (5, "row 5".to_string()),
                (6, "row 6".to_string())
            ]
        );
        // The transaction is closed: the connection starts a new one.
        assert_eq!(batch(&mut c, &[7]).await, vec![Some(14)]);
    }

    #[tokio::test]
    async fn a_batch_of_only_failures_commits_nothing_and_leaves_no_transaction() {
        let db = TempSqlite::new();
        let mut c = conn(&db).await;
        assert_eq!(batch(&mut c, &[-1, -2]).await, vec![None, None]);
        assert!(stored(&mut c).await.is_empty());
        sqlx::query("BEGIN IMMEDIATE; COMMIT")
            .execute(&mut c)
            .await
            .expect("no transaction left open");
    }

    #[tokio::test]
    async fn writes_of_a_closed_backend_fail_closed() {
        let writer: Writer = Arc::new(Mutex::new(None));
        let b = Batcher::spawn(writer).expect("spawn");
        let res = b.write("test_insert", "k", "SELECT 1", Vec::new()).await;
        assert!(matches!(res, Err(Error::Closed { .. })), "{:?}", res.err());
    }
}
