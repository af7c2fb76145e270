//! The `EventStore` suite on PostgreSQL, in both layouts (ADRs 0377, 0378), each case in a schema
//! of its own on the shared server.

use std::sync::Arc;

use futures::FutureExt;
use switchyard_conformance::event_store::{CorruptRecord, EventStoreFixture, EventStoreSetup};
use switchyard_conformance::harness::{postgres_exec, postgres_url, unique_schema};
use switchyard_core::Result;
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

async fn factory(setup: EventStoreSetup, layout: PostgresLayout) -> Result<EventStoreFixture> {
    let url = postgres_url();
    let schema = unique_schema("store");
    let mut options = PostgresOptions::default()
        .max_connections(8)
        .schema(&schema)
        .layout(layout);
    if let Some(clock) = setup.clock {
        options = options.clock(clock);
    }
    let store = PostgresEventStore::open_with(&url, options).await?;
    Ok(
        EventStoreFixture::new(Arc::new(store)).with_corruption(move |record: CorruptRecord| {
            let (url, schema) = (url.clone(), schema.clone());
            async move {
                // At the run's next seq, written behind the store's back: not JSON at all where
                // `data` is TEXT; JSON that is no event where it is JSONB (which holds JSON only).
                let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
                let (ns, log, run) = (
                    quote(&record.namespace_key),
                    quote(&record.log_key),
                    quote(&record.run_id),
                );
                let (columns, values) = match layout {
                    PostgresLayout::Switchyard => {
                        ("kind, data", "'text.delta', '{\"v\": not json'")
                    }
                    _ => ("data", "'{\"v\": \"not an event\"}'"),
                };
                postgres_exec(
                    &url,
                    &format!(
                        "INSERT INTO {schema}.events (namespace, log_key, run_id, seq, {columns}) \
                         SELECT {ns}, {log}, {run}, COALESCE(MAX(seq) + 1, 0), {values} \
                         FROM {schema}.events \
                         WHERE namespace = {ns} AND log_key = {log} AND run_id = {run}"
                    ),
                )
                .expect("write the corrupt row");
            }
            .boxed()
        }),
    )
}

/// agentdeck's layout, the default.
mod agentdeck {
    use super::*;

    async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
        super::factory(setup, PostgresLayout::Agentdeck).await
    }

    switchyard_conformance::event_store_suite!(factory);
}

/// The switchyard layout, kept for databases made with it.
mod switchyard {
    use super::*;

    async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
        super::factory(setup, PostgresLayout::Switchyard).await
    }

    switchyard_conformance::event_store_suite!(factory);
}
