//! What the process-kill checks (`tests/consumer_kill.rs`, `tests/enqueue_kill.rs`) share with
//! the child binaries they kill (`switchyard-chaos-consumer`, `switchyard-chaos-runner`): how a
//! URL and a Redis key prefix open the same store or fleet in both processes, and the run
//! payloads both write.

use std::sync::Arc;

use switchyard_core::event::{Block, InvocableKind, Payload, RunCompleted, RunStarted, Usage};
use switchyard_core::{EventStore, FleetBackend};
use switchyard_fleet_postgres::PostgresFleetBackend;
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};
use switchyard_fleet_sqlite::SqliteFleetBackend;
use switchyard_store_postgres::PostgresEventStore;
use switchyard_store_redis::{RedisEventStore, RedisStoreOptions};
use switchyard_store_sqlite::SqliteEventStore;

/// The event store at `url`: `sqlite://PATH`, `redis://…` (keys under `prefix`) or
/// `postgres://…?schema=NAME`.
pub async fn open_event_store(url: &str, prefix: &str) -> Result<Arc<dyn EventStore>, String> {
    let store: Arc<dyn EventStore> = if let Some(path) = url.strip_prefix("sqlite://") {
        Arc::new(
            SqliteEventStore::open(path)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else if url.starts_with("redis:") {
        let options = RedisStoreOptions::default().prefix(prefix);
        Arc::new(
            RedisEventStore::connect_with(url, options)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else {
        Arc::new(
            PostgresEventStore::open(url)
                .await
                .map_err(|e| e.to_string())?,
        )
    };
    Ok(store)
}

/// The fleet backend at `url`: `sqlite://PATH`, `redis://…` (keys under `prefix`) or
/// `postgres://…?schema=NAME`.
pub async fn open_fleet(url: &str, prefix: &str) -> Result<Arc<dyn FleetBackend>, String> {
    let backend: Arc<dyn FleetBackend> = if url.starts_with("sqlite:") {
        Arc::new(
            SqliteFleetBackend::open_url(url)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else if url.starts_with("redis:") {
        let config = RedisFleetConfig::new(url).with_prefix(prefix);
        Arc::new(
            RedisFleetBackend::with_config(config)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else {
        Arc::new(
            PostgresFleetBackend::open(url)
                .await
                .map_err(|e| e.to_string())?,
        )
    };
    Ok(backend)
}

/// A `run.started` whose input says `text`.
pub fn opening(text: &str) -> RunStarted {
    RunStarted {
        invocable: "chaos".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text(text)],
    }
}

/// A `run.completed`.
pub fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 1,
            usd: None,
        },
    })
}
