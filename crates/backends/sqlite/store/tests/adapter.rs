//! Adapter-specific behaviour outside the port's suite: opening, closing, corrupt rows named by id.

mod common;

use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{MessageText, Payload};
use switchyard_core::{Error, EventStore, RunContext};
use switchyard_store_sqlite::SqliteEventStore;

use common::raw;

fn text(n: usize) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("{n}"),
    })
}

#[tokio::test]
async fn memory_databases_are_refused_as_config() {
    for path in [":memory:", ""] {
        match SqliteEventStore::open(path).await {
            Err(Error::Config { key, .. }) => assert_eq!(key, "path"),
            other => panic!("{path:?}: expected Config, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_missing_directory_is_unavailable_not_a_panic() {
    let file = TempSqlite::new();
    let path = file.path().join("no-such-dir").join("events.db");
    match SqliteEventStore::open(&path).await {
        Err(Error::Unavailable { op, key, .. }) => {
            assert_eq!(op, "open");
            assert!(key.contains("no-such-dir"), "{key}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn calls_after_close_are_closed() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let ctx = RunContext::new("r");
    store
        .append(&ctx, vec![text(0)], "o")
        .await
        .expect("append");
    store.close().await;
    assert!(matches!(
        store.append(&ctx, vec![text(1)], "o").await,
        Err(Error::Closed { .. })
    ));
    assert!(matches!(
        store.read(&ctx, 0, None).await,
        Err(Error::Closed { .. })
    ));
    // The data survives: a new store on the file reads it.
    let again = SqliteEventStore::open(file.path()).await.expect("reopen");
    assert_eq!(again.read(&ctx, 0, None).await.expect("read").len(), 1);
}

#[tokio::test]
async fn a_corrupt_row_names_its_id_and_the_rest_of_the_log_pages_around_it() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let ctx = RunContext::new("r");
    store
        .append(&ctx, vec![text(0), text(1)], "o")
        .await
        .expect("append");
    let mut conn = raw(file.path()).await;
    // Valid JSON, wrong schema major: the seed's reader refuses it too.
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO events (namespace, log_key, run_id, seq, data) \
         VALUES ('', 'r', 'r', 2, '{\"v\":{\"major\":9,\"minor\":0}}') RETURNING id",
    )
    .fetch_one(&mut conn)
    .await
    .expect("insert");
    match store.read(&ctx, 0, None).await {
        Err(Error::Corrupt { location, reason }) => {
            assert_eq!(location, format!("events row id={id}"));
            assert!(reason.contains("major"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Pages and seq ranges that leave the bad row out still read.
    assert_eq!(store.read(&ctx, 0, Some(2)).await.expect("page").len(), 2);
    assert_eq!(store.read_run(&ctx, 3).await.expect("after it").len(), 0);
    // The next append continues after the bad row's seq rather than clashing with it.
    let next = store
        .append(&ctx, vec![text(3)], "o")
        .await
        .expect("append");
    assert_eq!(next[0].seq, 3);
}

/// A batch larger than one `INSERT` statement is still one transaction with dense seqs and one ts.
#[tokio::test]
async fn a_batch_spanning_several_statements_is_whole_and_ordered() {
    let file = TempSqlite::new();
    let store = SqliteEventStore::open(file.path()).await.expect("open");
    let ctx = RunContext::new("r");
    let events = store
        .append(&ctx, (0..150).map(text).collect(), "o")
        .await
        .expect("append");
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..150).collect::<Vec<u64>>()
    );
    let stored = store.read(&ctx, 0, None).await.expect("read");
    assert_eq!(stored, events);
    assert!(stored.iter().all(|e| e.ts == stored[0].ts));
}
