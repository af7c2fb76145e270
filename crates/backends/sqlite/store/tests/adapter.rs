//! Adapter-specific behaviour outside the port's suite: opening, closing, corrupt rows named by id,
//! conditional appends from two stores on one file.

mod common;

use switchyard_conformance::harness::TempSqlite;
use switchyard_core::event::{
    Block, InvocableKind, MessageText, Payload, RunCancelled, RunStarted,
};
use switchyard_core::{Appended, Error, EventStore, RunContext, RunStatus};
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

/// Two stores on one file (two processes, each with its own writer connection): conditional
/// appends through one never land after a terminal event written through the other, because both
/// take the file's write lock for the check and the write (ADR 0365).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditional_appends_from_two_stores_never_follow_the_end() {
    let file = TempSqlite::new();
    let a = std::sync::Arc::new(SqliteEventStore::open(file.path()).await.expect("open a"));
    let b = SqliteEventStore::open(file.path()).await.expect("open b");
    let ctx = RunContext::new("r").with_session("s");
    let (claim, _) = b
        .claim_start(
            &ctx,
            RunStarted {
                invocable: "helper".into(),
                kind_of_invocable: InvocableKind::Agent,
                input: vec![Block::text("hi")],
            },
            "o",
            std::time::Duration::from_secs(3600),
        )
        .await
        .expect("claim");
    assert!(claim.won());
    let racers: Vec<_> = (0..4)
        .map(|i| {
            let (a, ctx) = (a.clone(), ctx.clone());
            tokio::spawn(async move {
                let mut last = 0;
                for n in 0..10_000 {
                    match a
                        .append_if_open(&ctx, vec![text(i * 10_000 + n)], "o")
                        .await
                        .expect("append_if_open")
                    {
                        Appended::Stored { events, .. } => last = events[0].seq,
                        Appended::NotOpen(status) => return (last, Some(status)),
                    }
                }
                (last, None)
            })
        })
        .collect();
    while b.read_run(&ctx, 0).await.expect("read").len() < 40 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let end = b
        .append(
            &ctx,
            vec![Payload::RunCancelled(RunCancelled { reason: None })],
            "o",
        )
        .await
        .expect("cancel")[0]
        .seq;
    for racer in racers {
        let (last, status) = racer.await.expect("join");
        assert_eq!(status, Some(RunStatus::Cancelled));
        assert!(last < end, "stored at {last}, after the end at {end}");
    }
    let events = a.read_run(&ctx, 0).await.expect("read");
    assert_eq!(
        events.last().map(|e| e.seq),
        Some(end),
        "the end is the last event"
    );
}
