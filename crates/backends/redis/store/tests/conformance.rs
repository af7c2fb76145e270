//! The shared `EventStore` suite on the harness Redis.

mod common;

use std::sync::Arc;

use switchyard_conformance::event_store::{CorruptRecord, EventStoreFixture, EventStoreSetup};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::Result;
use switchyard_core::keys::quote;

async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
    let prefix = unique_prefix("es");
    let store = common::store_at(&redis_url(), &prefix, setup.clock).await;
    let corrupt_prefix = prefix.clone();
    Ok(
        EventStoreFixture::new(Arc::new(store)).with_corruption(move |rec: CorruptRecord| {
            let prefix = corrupt_prefix.clone();
            Box::pin(async move {
                let ns = quote(&rec.namespace_key);
                let log = quote(&rec.log_key);
                let run = quote(&rec.run_id);
                let garbage = "{\"v\":{\"major\":3,\"minor\":1},\"kind\":\"text.delta\",\"seq\":";
                for key in [
                    format!("{prefix}:log:{ns}:{log}"),
                    format!("{prefix}:run:{ns}:{log}:{run}"),
                ] {
                    common::raw(&redis_url(), &["RPUSH", &key, garbage])
                        .await
                        .expect("RPUSH corrupt record");
                }
            })
        }),
    )
}

switchyard_conformance::event_store_suite!(factory);
