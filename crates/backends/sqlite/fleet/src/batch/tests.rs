//! The group commit's recovery from failing writes, on a table of its own.

use super::*;
use sqlx::ConnectOptions;
use switchyard_conformance::harness::TempSqlite;

#[test]
fn numbered_parameters_become_bare_in_order() {
    let mut out = String::new();
    let order = positional("SELECT ?1, ?12, ?2 + ?1, '?'", &mut out);
    assert_eq!(out, "SELECT ?, ?, ? + ?, '?'");
    assert_eq!(order, vec![0, 11, 1, 0]);
}

type Answer = oneshot::Receiver<Result<Vec<SqliteRow>>>;

/// An insert of `v` into `t` (values must be positive), returning the doubled value.
fn insert(v: i64) -> (Write, Answer) {
    let (reply, rx) = oneshot::channel();
    let w = Write {
        op: "test_insert",
        key: v.to_string(),
        sql: "INSERT INTO t (v, note) VALUES (?1, ?2) RETURNING v * 2".into(),
        stmts: 1,
        cached: false,
        args: vec![Arg::Int(v), Arg::Text(format!("row {v}"))],
        reply: Reply::One(reply),
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

/// Inserts `a` then `b` in one write of two statements.
fn pair(a: i64, b: i64) -> (Write, Answer) {
    let (reply, rx) = oneshot::channel();
    let w = Write {
        op: "test_pair",
        key: format!("{a}+{b}"),
        sql: "INSERT INTO t (v, note) VALUES (?1, 'pair') RETURNING v;\n\
              INSERT INTO t (v, note) VALUES (?2, 'pair') RETURNING v"
            .into(),
        stmts: 2,
        cached: false,
        args: vec![Arg::Int(a), Arg::Int(b)],
        reply: Reply::One(reply),
    };
    (w, rx)
}

#[tokio::test]
async fn a_write_of_several_statements_is_all_or_nothing() {
    let db = TempSqlite::new();
    let mut c = conn(&db).await;
    let (w1, r1) = insert(1);
    let (w2, r2) = pair(2, 3);
    // The second statement fails: the first one's row goes too.
    let (w3, r3) = pair(4, -4);
    let (w4, r4) = insert(5);
    run_batch(&mut c, VecDeque::from([w1, w2, w3, w4])).await;
    assert!(r1.await.expect("answered").is_ok());
    let rows = r2.await.expect("answered").expect("both inserted");
    let got: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>(0)).collect();
    assert_eq!(got, vec![2, 3], "the rows of every statement, in order");
    assert!(r3.await.expect("answered").is_err());
    assert!(r4.await.expect("answered").is_ok());
    let kept: Vec<i64> = stored(&mut c).await.into_iter().map(|r| r.0).collect();
    assert_eq!(kept, vec![1, 2, 3, 5]);
    // Alone, a write of several statements is still one transaction.
    let (w, r) = pair(6, -6);
    run_batch(&mut c, VecDeque::from([w])).await;
    assert!(r.await.expect("answered").is_err());
    assert_eq!(stored(&mut c).await.len(), 4);
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
