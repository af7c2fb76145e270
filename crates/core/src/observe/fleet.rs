//! The fleet backend, observed: every method of its area traits, reported under its own name.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{Observed, PortKind};
use crate::Result;
use crate::fleet::{CancelOutcome, Retention, TaskEvents, TaskInfo, Tasks};
use crate::fleet::{
    Catalog, ConfigWrite, Counters, DeadLetters, Delivery, EventStream, Events, FleetBackend,
    IdempotencyKey, InFlight, JobQueue, Kv, LockGrant, Locks, PoolClaim, PoolItem, Pools, Priority,
    QueueBatches, QueueFlow, QueueStats, RateLimit, Receipt, Schedules, Streams, Submit,
    SubmitOutcome, Tags, WorkerRecord, WorkerState, Workers,
};

const PORT: PortKind = PortKind::Fleet;

/// Implements each listed area trait for `Observed<F>` by forwarding every method to the wrapped
/// backend through [`Observed::call`], so no method can be forgotten: a trait gaining a method
/// fails to compile here until it is listed.
macro_rules! observed {
    ($($area:ident {
        $(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*
        $(sync fn $sync:ident(&self) -> $sret:ty;)*
    })*) => {$(
        #[async_trait]
        impl<F: FleetBackend + ?Sized> $area for Observed<F> {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.call(PORT, stringify!($name), self.inner.$name($($arg),*)).await
                }
            )*
            $(
                // A setting, not a backend call: nothing to observe.
                fn $sync(&self) -> $sret {
                    self.inner.$sync()
                }
            )*
        }
    )*};
}

observed! {
    Kv {
        fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()>;
        fn kv_set_nx(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool>;
        fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>>;
        fn kv_del(&self, ns: &str, key: &str) -> Result<bool>;
    }
    Pools {
        fn pool_put(&self, name: &str, id: &str, payload: &[u8], tags: &Tags, ttl: Option<Duration>) -> Result<()>;
        fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>>;
        fn pool_size(&self, name: &str) -> Result<u64>;
        fn pool_remove(&self, name: &str, id: &str) -> Result<bool>;
        fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool>;
        fn pool_claim_any(&self, name: &str, where_: &Tags, hold: Duration) -> Result<Option<PoolClaim>>;
    }
    Locks {
        fn lock_acquire(&self, name: &str, hold: Duration, wait: Duration) -> Result<Option<LockGrant>>;
        fn lock_release(&self, name: &str, token: &str) -> Result<bool>;
        fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool>;
    }
    Counters {
        fn counter_incr(&self, name: &str, by: i64) -> Result<i64>;
        fn counter_get(&self, name: &str) -> Result<i64>;
        fn counter_set(&self, name: &str, value: i64) -> Result<()>;
        fn counter_del(&self, name: &str) -> Result<bool>;
    }
    JobQueue {
        fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()>;
        fn queue_submit_once(&self, name: &str, body: &[u8], priority: Priority, idem: IdempotencyKey<'_>) -> Result<SubmitOutcome>;
        fn queue_submit(&self, name: &str, body: &[u8], submit: &Submit<'_>) -> Result<SubmitOutcome>;
        fn queue_size(&self, name: &str) -> Result<u64>;
        fn queue_stats(&self, name: &str) -> Result<QueueStats>;
        fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
        fn queue_reserve(&self, name: &str, timeout: Duration, visibility: Duration) -> Result<Option<Delivery>>;
        fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool>;
        fn queue_nack(&self, name: &str, receipt: &Receipt, body: &[u8], delay: Duration) -> Result<bool>;
        fn queue_extend(&self, name: &str, receipt: &Receipt, visibility: Duration) -> Result<bool>;
        fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool>;
        fn queue_sweep_expired(&self, name: &str) -> Result<u64>;
        fn queue_promote_due(&self, name: &str) -> Result<u64>;
        fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()>;
    }
    QueueBatches {
        fn queue_push_many(&self, name: &str, bodies: &[Vec<u8>], priority: Priority) -> Result<()>;
        fn queue_reserve_many(&self, name: &str, max: usize, timeout: Duration, visibility: Duration) -> Result<Vec<Delivery>>;
        fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>>;
    }
    QueueFlow {
        fn queue_pause(&self, name: &str) -> Result<bool>;
        fn queue_resume(&self, name: &str) -> Result<bool>;
        fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()>;
        fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool>;
        fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>>;
        fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool>;
        fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>>;
    }
    DeadLetters {
        fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
        fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
        fn dlq_length(&self, name: &str) -> Result<u64>;
        fn dlq_clear(&self, name: &str) -> Result<u64>;
        fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64>;
        fn dlq_requeue_chosen(&self, name: &str, bodies: &[Vec<u8>], priority: Priority) -> Result<Vec<bool>>;
    }
    Schedules {
        fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()>;
        fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>>;
        fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>>;
        fn schedule_delete(&self, name: &str) -> Result<bool>;
    }
    Streams {
        fn stream_push(&self, name: &str, envelope: &[u8], score: f64, max_len: u64, ttl: Option<Duration>) -> Result<()>;
        fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
        fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>>;
        fn stream_length(&self, name: &str) -> Result<u64>;
        fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()>;
    }
    Events {
        fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()>;
        fn event_subscribe(&self, topic: &str) -> Result<EventStream>;
    }
    Workers {
        fn worker_register(&self, automation_type: &str, worker_id: &str, hardware: &Value) -> Result<()>;
        fn worker_get_config(&self, automation_type: &str, worker_id: &str) -> Result<(Value, u64)>;
        fn worker_set_config(&self, automation_type: &str, worker_id: &str, config: &Value, expected_gen: Option<u64>) -> Result<ConfigWrite>;
        fn worker_set_state(&self, automation_type: &str, worker_id: &str, state: WorkerState<'_>) -> Result<bool>;
        fn worker_set_stats(&self, automation_type: &str, worker_id: &str, stats: &Value) -> Result<bool>;
        fn worker_stats_push(&self, automation_type: &str, worker_id: &str, ts: f64, frame: &Value, max_entries: usize) -> Result<bool>;
        fn worker_stats_history(&self, automation_type: &str, worker_id: &str, since: f64, limit: usize) -> Result<Vec<Value>>;
        fn worker_get(&self, automation_type: &str, worker_id: &str) -> Result<Option<WorkerRecord>>;
        fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>>;
        fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool>;
    }
    Tasks {
        fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>>;
        fn task_cancel(&self, name: &str, id: &str) -> Result<CancelOutcome>;
        fn task_cancel_many(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>>;
        fn queue_purge(&self, name: &str) -> Result<u64>;
        fn queue_complete(&self, name: &str, receipt: &Receipt, result: &[u8]) -> Result<bool>;
        fn task_events(&self, name: &str, after: Option<&str>, max: usize, timeout: Duration) -> Result<TaskEvents>;
        fn queue_retention(&self, name: &str) -> Result<Retention>;
        fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()>;
        fn queue_maintain(&self, name: &str) -> Result<u64>;
        sync fn max_result_bytes(&self) -> usize;
    }
    Catalog {
        fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()>;
        fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>>;
        fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>>;
        fn queue_names(&self) -> Result<Vec<String>>;
    }
}
