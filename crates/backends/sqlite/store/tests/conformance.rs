//! The `EventStore` suite on SQLite, corrupt-record case included.

mod common;

use std::sync::Arc;

use futures::FutureExt;
use switchyard_conformance::event_store::{CorruptRecord, EventStoreFixture, EventStoreSetup};
use switchyard_core::Result;

use common::{TempStore, raw};

async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
    let store = Arc::new(TempStore::new(setup.clock).await);
    let path = store.file.path().to_path_buf();
    Ok(
        EventStoreFixture::new(store).with_corruption(move |record: CorruptRecord| {
            let path = path.clone();
            async move {
                // Not JSON at all, at the run's next seq, written behind the store's back.
                let mut conn = raw(&path).await;
                sqlx::query(
                    "INSERT INTO events (namespace, log_key, run_id, seq, data) \
                     SELECT ?1, ?2, ?3, COALESCE(MAX(seq) + 1, 0), '{\"v\": not json' \
                     FROM events WHERE namespace = ?1 AND log_key = ?2 AND run_id = ?3",
                )
                .bind(&record.namespace_key)
                .bind(&record.log_key)
                .bind(&record.run_id)
                .execute(&mut conn)
                .await
                .expect("write the corrupt row");
            }
            .boxed()
        }),
    )
}

switchyard_conformance::event_store_suite!(factory);
