//! The shared `EventStore` suite on the harness Redis Cluster (3 masters, 3 replicas), in the
//! cluster key layout the `redis-cluster://` URL selects.

mod common;

use std::sync::Arc;

use switchyard_conformance::event_store::{CorruptRecord, EventStoreFixture, EventStoreSetup};
use switchyard_conformance::harness::{redis_cluster_url, unique_prefix};
use switchyard_core::Result;
use switchyard_store_redis::{KeyLayout, KeySpace};

async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
    let prefix = unique_prefix("esc");
    let store = common::store_at(&redis_cluster_url(), &prefix, setup.clock).await;
    assert_eq!(store.keys().layout(), KeyLayout::Cluster);
    let keys = KeySpace::with_layout(prefix, KeyLayout::Cluster);
    Ok(
        EventStoreFixture::new(Arc::new(store)).with_corruption(move |rec: CorruptRecord| {
            let keys = keys.clone();
            Box::pin(async move {
                let garbage = "{\"v\":{\"major\":3,\"minor\":1},\"kind\":\"text.delta\",\"seq\":";
                for key in [
                    keys.log(&rec.namespace_key, &rec.log_key),
                    keys.run(&rec.namespace_key, &rec.log_key, &rec.run_id),
                ] {
                    common::cluster_raw(&redis_cluster_url(), &["RPUSH", &key, garbage])
                        .await
                        .expect("RPUSH corrupt record");
                }
            })
        }),
    )
}

switchyard_conformance::event_store_suite!(factory);
