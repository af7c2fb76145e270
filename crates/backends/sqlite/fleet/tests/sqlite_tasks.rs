//! Task records on SQLite (ADR 0380, section 7), where the file itself matters: a taken id in
//! a group commit fails only its own caller, and tasks a seed consumer moves with its own SQL
//! (it never touches our records) are reported and cancelled from what the file shows. (The
//! guarantees themselves are pinned by `fleet_task_suite!`.)

use std::time::Duration;

use sqlx::ConnectOptions;
use switchyard_conformance::harness::TempSqlite;
use switchyard_core::Error;
use switchyard_core::fleet::prelude::*;
use switchyard_core::fleet::{CancelOutcome, Priority, RunAt, Submit, TaskState, Tasks};
use switchyard_fleet_sqlite::SqliteFleetBackend;

fn body(id: &str) -> Vec<u8> {
    format!(r#"{{"id": "{id}", "payload": {{}}}}"#).into_bytes()
}

async fn seed(file: &TempSqlite) -> sqlx::SqliteConnection {
    sqlx::sqlite::SqliteConnectOptions::new()
        .filename(file.path())
        .connect()
        .await
        .expect("seed connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_id_in_a_group_commit_fails_only_its_caller() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    b.queue_push("q", &body("taken"), Priority::Normal)
        .await
        .expect("push");
    // Concurrent pushes share batches: the one with the taken id must not undo the others.
    let mut pushes = Vec::new();
    for i in 0..40 {
        let b = b.clone();
        pushes.push(tokio::spawn(async move {
            let id = if i == 17 {
                "taken".to_string()
            } else {
                format!("t{i}")
            };
            (
                id.clone(),
                b.queue_push("q", &body(&id), Priority::Normal).await,
            )
        }));
    }
    for p in pushes {
        let (id, res) = p.await.expect("push task");
        match (id.as_str(), res) {
            ("taken", Err(Error::AlreadyExists { what: "task", id })) => assert_eq!(id, "taken"),
            ("taken", other) => panic!("the taken id is refused, got {other:?}"),
            (_, res) => res.unwrap_or_else(|e| panic!("{id}: {e}")),
        }
    }
    assert_eq!(b.queue_size("q").await.expect("size"), 40);
    assert_eq!(
        b.task_get("q", "t39").await.expect("get").map(|t| t.state),
        Some(TaskState::Waiting)
    );
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_seed_consumer_moves_is_reported_foreign_and_still_cancelled() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    let mut seed = seed(&file).await;
    b.queue_push("q", &body("held"), Priority::Normal)
        .await
        .expect("push");
    // The seed's reserve: pop the row, hold it under the task's id.
    let row: (i64, Vec<u8>) =
        sqlx::query_as("SELECT id, body FROM queues WHERE name = 'q' ORDER BY id LIMIT 1")
            .fetch_one(&mut seed)
            .await
            .expect("seed pop");
    sqlx::query("DELETE FROM queues WHERE id = ?1")
        .bind(row.0)
        .execute(&mut seed)
        .await
        .expect("seed pop");
    sqlx::query(
        "INSERT INTO queue_processing (name, task_id, body, deadline) VALUES ('q', 'held', ?1, 1e12)",
    )
    .bind(&row.1)
    .execute(&mut seed)
    .await
    .expect("seed hold");
    let t = b.task_get("q", "held").await.expect("get").expect("record");
    assert_eq!((t.state, t.foreign), (TaskState::Running, true));
    assert_eq!(
        b.task_cancel("q", "held").await.expect("cancel"),
        CancelOutcome::CancelRequested,
        "the seed holds it: only the flag can be set"
    );
    assert!(
        b.task_get("q", "held")
            .await
            .expect("get")
            .expect("record")
            .cancel_requested
    );

    // The seed's drain of a due scheduled task: a new row in the normal tier.
    b.queue_submit(
        "q",
        &body("later"),
        &Submit::new().run_at(RunAt::After(Duration::from_secs(3600))),
    )
    .await
    .expect("submit");
    // A body that is not JSON in the same tier does not trouble the search for it.
    b.queue_push("q", b"not json {", Priority::Normal)
        .await
        .expect("push");
    let moved: (i64, Vec<u8>) =
        sqlx::query_as("DELETE FROM queue_scheduled WHERE name = 'q' RETURNING id, body")
            .fetch_one(&mut seed)
            .await
            .expect("seed drain");
    sqlx::query("INSERT INTO queues (name, tier, body) VALUES ('q', 'normal', ?1)")
        .bind(&moved.1)
        .execute(&mut seed)
        .await
        .expect("seed drain");
    let t = b
        .task_get("q", "later")
        .await
        .expect("get")
        .expect("record");
    assert_eq!((t.state, t.foreign), (TaskState::Waiting, true));
    assert_eq!(
        b.task_cancel("q", "later").await.expect("cancel"),
        CancelOutcome::Cancelled
    );
    assert_eq!(
        b.queue_peek("q", 10).await.expect("peek"),
        vec![b"not json {".to_vec()],
        "the drained body is found in the tier and removed"
    );
    assert_eq!(
        b.task_get("q", "later")
            .await
            .expect("get")
            .map(|t| t.state),
        Some(TaskState::Cancelled)
    );
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_error_is_cut_to_a_kibibyte_on_its_event_on_a_character_boundary() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    b.queue_push("q", &body("e"), Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve("q", Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
        .expect("task");
    let long = "é".repeat(900);
    let failed = format!(r#"{{"id": "e", "last_error": {{"message": "{long}"}}}}"#);
    assert!(
        b.queue_fail("q", &d.receipt, failed.as_bytes())
            .await
            .expect("fail")
    );
    let events = b
        .task_events("q", None, 10, Duration::ZERO)
        .await
        .expect("events")
        .events;
    let error = events[0].error.as_deref().expect("an error");
    assert!(
        error.len() <= 1024 && error.len() >= 1022,
        "{}",
        error.len()
    );
    assert!(long.starts_with(error));
    let t = b.task_get("q", "e").await.expect("get").expect("record");
    assert_eq!(
        t.last_error.as_deref(),
        Some(long.as_str()),
        "the record keeps it whole"
    );
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_the_seed_popped_ends_its_record_failed_at_maintenance() {
    let file = TempSqlite::new();
    let b = SqliteFleetBackend::open(file.path()).await.expect("open");
    let mut seed = seed(&file).await;
    b.queue_push("q", &body("d"), Priority::Normal)
        .await
        .expect("push");
    let d = b
        .queue_reserve("q", Duration::ZERO, Duration::from_secs(60))
        .await
        .expect("reserve")
        .expect("task");
    assert!(
        b.queue_fail("q", &d.receipt, &body("d"))
            .await
            .expect("fail")
    );
    assert_eq!(b.queue_maintain("q").await.expect("maintain"), 0);
    assert_eq!(
        b.task_get("q", "d").await.expect("get").map(|t| t.state),
        Some(TaskState::Dead)
    );
    // The seed's `dlq_pop`: its own DELETE, no record touched.
    sqlx::query("DELETE FROM queue_dead WHERE name = 'q'")
        .execute(&mut seed)
        .await
        .expect("seed pop");
    assert_eq!(b.queue_maintain("q").await.expect("maintain"), 1);
    assert_eq!(
        b.task_get("q", "d").await.expect("get").map(|t| t.state),
        Some(TaskState::Failed)
    );
    let s = b.queue_stats("q").await.expect("stats");
    assert_eq!((s.dead_lettered, s.failed), (1, 1));
    b.close().await;
}
