//! The `EventStore` suite on PostgreSQL, each case in a schema of its own on the shared server.

use std::sync::Arc;

use futures::FutureExt;
use switchyard_conformance::event_store::{CorruptRecord, EventStoreFixture, EventStoreSetup};
use switchyard_conformance::harness::{postgres_exec, postgres_url, unique_schema};
use switchyard_core::Result;
use switchyard_store_postgres::{PostgresEventStore, PostgresOptions};

async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
    let url = postgres_url();
    let schema = unique_schema("store");
    let mut options = PostgresOptions::default()
        .max_connections(8)
        .schema(&schema);
    if let Some(clock) = setup.clock {
        options = options.clock(clock);
    }
    let store = PostgresEventStore::open_with(&url, options).await?;
    Ok(
        EventStoreFixture::new(Arc::new(store)).with_corruption(move |record: CorruptRecord| {
            let (url, schema) = (url.clone(), schema.clone());
            async move {
                // Not JSON at all, at the run's next seq, written behind the store's back.
                let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
                let (ns, log, run) = (
                    quote(&record.namespace_key),
                    quote(&record.log_key),
                    quote(&record.run_id),
                );
                postgres_exec(
                    &url,
                    &format!(
                        "INSERT INTO {schema}.events (namespace, log_key, run_id, seq, kind, data) \
                         SELECT {ns}, {log}, {run}, COALESCE(MAX(seq) + 1, 0), 'text.delta', \
                         '{{\"v\": not json' FROM {schema}.events \
                         WHERE namespace = {ns} AND log_key = {log} AND run_id = {run}"
                    ),
                )
                .expect("write the corrupt row");
            }
            .boxed()
        }),
    )
}

switchyard_conformance::event_store_suite!(factory);
