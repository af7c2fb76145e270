//! The event store suite on the memory adapter.

use std::sync::Arc;

use switchyard_conformance::event_store::EventStoreFixture;
use switchyard_core::{Clock, MemoryEventStore};

async fn factory(clock: Option<Arc<dyn Clock>>) -> EventStoreFixture {
    let store = match clock {
        Some(clock) => MemoryEventStore::with_clock(clock),
        None => MemoryEventStore::new(),
    };
    EventStoreFixture {
        store: Arc::new(store),
        corrupt: None,
    }
}

switchyard_conformance::event_store_suite!(factory);
