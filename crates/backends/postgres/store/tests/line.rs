//! A session's line (ADR 0394) beyond the suite, in both layouts: where it lives (a table of its
//! own, beside `events`, so a waiting run writes no event), a row that does not decode, values
//! PostgreSQL cannot hold, and the READ COMMITTED the push's lock needs.

use std::time::Duration;

use switchyard_conformance::harness::{postgres_query, postgres_url, unique_id, unique_schema};
use switchyard_core::event::{Block, InvocableKind, RunStarted};
use switchyard_core::store::{MAX_LINE, QueuedRun};
use switchyard_core::{Error, EventStore, RunContext};
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

const LAYOUTS: [PostgresLayout; 2] = [PostgresLayout::Agentdeck, PostgresLayout::Switchyard];

async fn open(layout: PostgresLayout, tag: &str) -> (PostgresEventStore, String) {
    let schema = unique_schema(tag);
    let store = PostgresEventStore::open_with(
        &postgres_url(),
        PostgresOptions::default()
            .max_connections(4)
            .schema(&schema)
            .layout(layout),
    )
    .await
    .expect("open");
    (store, schema)
}

fn rows(sql: &str) -> Vec<Vec<Option<String>>> {
    postgres_query(&postgres_url(), sql).expect(sql)
}

fn entry(ctx: &RunContext, text: &str) -> QueuedRun {
    QueuedRun {
        run_id: ctx.run_id().to_string(),
        opening: RunStarted {
            invocable: "helper".into(),
            kind_of_invocable: InvocableKind::Agent,
            input: vec![Block::text(text)],
        },
        origin: "o \"q\" ✓".into(),
        stale_after: Duration::from_millis(1_500),
    }
}

/// A waiting run is a row of `switchyard_line` and nothing else: no event, no status row, so
/// readers of the log (a seed process included) see a free session. The entry reads back as it
/// was pushed, whatever its text holds (a NUL included, which the entry's JSON escapes).
#[tokio::test]
async fn a_waiting_run_is_a_line_row_and_no_event() {
    for layout in LAYOUTS {
        let (store, schema) = open(layout, "line_where").await;
        let ctx = RunContext::new(unique_id("run")).with_session("s ✓");
        let pushed = entry(&ctx, "hi \u{0} \\ \"there\"");
        assert_eq!(store.line_push(&ctx, &pushed).await.expect("push"), 1);
        assert_eq!(
            store.line_read(&ctx, MAX_LINE).await.expect("read"),
            std::slice::from_ref(&pushed),
            "{layout:?}"
        );
        let events = rows(&format!("SELECT count(*) FROM {schema}.events"));
        assert_eq!(events, [[Some("0".to_string())]], "{layout:?}");
        let line = rows(&format!(
            "SELECT log_key, pos, run_id, entry FROM {schema}.switchyard_line"
        ));
        assert_eq!(
            line,
            [[
                Some("s ✓".to_string()),
                Some("1".into()),
                Some(ctx.run_id().into()),
                Some(pushed.to_json()),
            ]],
            "{layout:?}"
        );
    }
}

/// A line row whose entry does not decode is `Corrupt` naming the line and the row, never a
/// panic; the other lines stay readable, and the row can still be taken out.
#[tokio::test]
async fn a_line_row_that_does_not_decode_is_corrupt_naming_it() {
    for layout in LAYOUTS {
        let (store, schema) = open(layout, "line_corrupt").await;
        let ctx = RunContext::new("bad").with_session("s");
        let other = RunContext::new("fine").with_session("t");
        store
            .line_push(&ctx, &entry(&ctx, "a"))
            .await
            .expect("push");
        store
            .line_push(&other, &entry(&other, "b"))
            .await
            .expect("push");
        rows(&format!(
            "UPDATE {schema}.switchyard_line SET entry = '{{\"run_id\": 1' WHERE run_id = 'bad'"
        ));
        match store.line_read(&ctx, MAX_LINE).await {
            Err(Error::Corrupt { location, .. }) => {
                assert!(
                    location.contains("switchyard_line") && location.contains("pos=1"),
                    "{layout:?}: {location}"
                );
            }
            got => panic!("{layout:?}: expected Corrupt, got {got:?}"),
        }
        assert_eq!(
            store.line_read(&other, MAX_LINE).await.expect("read").len(),
            1,
            "{layout:?}"
        );
        assert!(store.line_remove(&ctx, "bad").await.expect("remove"));
        assert!(
            store
                .line_read(&ctx, MAX_LINE)
                .await
                .expect("read")
                .is_empty()
        );
    }
}

/// An id PostgreSQL cannot hold (a NUL) is the caller's to fix, in every line call.
#[tokio::test]
async fn nul_in_an_id_is_invalid_input() {
    for layout in LAYOUTS {
        let (store, _) = open(layout, "line_nul").await;
        let ctx = RunContext::new("r").with_session("s\0x");
        let results = [
            store.line_push(&ctx, &entry(&ctx, "a")).await.map(drop),
            store.line_read(&ctx, 1).await.map(drop),
            store.line_remove(&ctx, "r").await.map(drop),
        ];
        for result in results {
            assert!(
                matches!(result, Err(Error::InvalidInput { .. })),
                "{layout:?}: {result:?}"
            );
        }
    }
}

/// A push in a transaction stronger than READ COMMITTED would read the line from a snapshot
/// taken before its lock, so two pushes could take one place: it is refused, saying what to set.
#[tokio::test]
async fn a_push_needs_read_committed() {
    for layout in LAYOUTS {
        let (_store, schema) = open(layout, "line_iso").await;
        let refused = postgres_query(
            &postgres_url(),
            &format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; \
                 SELECT * FROM {schema}.line_push(1, '', 'l', 'r', '{{}}', 10); COMMIT"
            ),
        )
        .expect_err("refused");
        assert!(refused.contains("READ COMMITTED"), "{layout:?}: {refused}");
    }
}
