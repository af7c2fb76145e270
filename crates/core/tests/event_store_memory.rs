//! The event store suite on the memory adapter.

use std::sync::Arc;

use switchyard_conformance::event_store::{EventStoreFixture, EventStoreSetup};
use switchyard_core::{MemoryEventStore, Result};

async fn factory(setup: EventStoreSetup) -> Result<EventStoreFixture> {
    let store = match setup.clock {
        Some(clock) => MemoryEventStore::with_clock(clock),
        None => MemoryEventStore::new(),
    };
    Ok(EventStoreFixture::new(Arc::new(store)).typed_storage_only())
}

switchyard_conformance::event_store_suite!(factory);
