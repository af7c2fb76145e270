//! The port's front (ADR 0367): every area trait implemented once for every type implementing
//! its narrow trait. Here, and only here, arguments are checked, sugar is expanded and waits are
//! run; the adapter's method is then called with what passed.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::ops::{
    CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps, QueueBatchOps,
    QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
use super::wait;
use crate::fleet::{
    CancelOutcome, MAX_TASK_BATCH, Retention, TaskEvents, TaskInfo, Tasks, check_task_id,
};
use crate::fleet::{
    Catalog, ConfigWrite, Counters, DeadLetters, Delivery, EventStream, Events, IdempotencyKey,
    InFlight, JobQueue, Kv, LockGrant, Locks, PoolClaim, PoolItem, Pools, Priority, QueueBatches,
    QueueFlow, QueueStats, RateLimit, Receipt, Schedules, Streams, Submit, SubmitOutcome, Tags,
    TaskHead, WorkerRecord, WorkerState, Workers, check_batch, check_finite, check_hold,
    check_name, check_object, check_progress, task_head,
};
use crate::{Error, Result};

#[async_trait]
impl<T: KvOps> Kv for T {
    async fn kv_set(&self, ns: &str, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<()> {
        check_name("ns", ns)?;
        KvOps::kv_set(self, ns, key, value, ttl).await
    }

    async fn kv_set_nx(
        &self,
        ns: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool> {
        check_name("ns", ns)?;
        KvOps::kv_set_nx(self, ns, key, value, ttl).await
    }

    async fn kv_get(&self, ns: &str, key: &str) -> Result<Option<Vec<u8>>> {
        check_name("ns", ns)?;
        KvOps::kv_get(self, ns, key).await
    }

    async fn kv_del(&self, ns: &str, key: &str) -> Result<bool> {
        check_name("ns", ns)?;
        KvOps::kv_del(self, ns, key).await
    }
}

#[async_trait]
impl<T: PoolOps> Pools for T {
    async fn pool_put(
        &self,
        name: &str,
        id: &str,
        payload: &[u8],
        tags: &Tags,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("pool", name)?;
        PoolOps::pool_put(self, name, id, payload, tags, ttl).await
    }

    async fn pool_list(&self, name: &str) -> Result<Vec<PoolItem>> {
        check_name("pool", name)?;
        PoolOps::pool_list(self, name).await
    }

    async fn pool_size(&self, name: &str) -> Result<u64> {
        check_name("pool", name)?;
        PoolOps::pool_size(self, name).await
    }

    async fn pool_remove(&self, name: &str, id: &str) -> Result<bool> {
        check_name("pool", name)?;
        PoolOps::pool_remove(self, name, id).await
    }

    async fn pool_release(&self, name: &str, id: &str, token: &str) -> Result<bool> {
        check_name("pool", name)?;
        PoolOps::pool_release(self, name, id, token).await
    }

    async fn pool_claim_any(
        &self,
        name: &str,
        where_: &Tags,
        hold: Duration,
    ) -> Result<Option<PoolClaim>> {
        check_name("pool", name)?;
        let hold_ms = check_hold("hold", hold)?;
        PoolOps::pool_claim_any(self, name, where_, hold_ms).await
    }
}

#[async_trait]
impl<T: LockOps> Locks for T {
    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        wait::lock(self, name, hold_ms, wait).await
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
        LockOps::lock_release(self, name, token).await
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        LockOps::lock_extend(self, name, token, hold_ms).await
    }
}

#[async_trait]
impl<T: CounterOps> Counters for T {
    async fn counter_incr(&self, name: &str, by: i64) -> Result<i64> {
        check_name("counter", name)?;
        CounterOps::counter_incr(self, name, by).await
    }

    async fn counter_get(&self, name: &str) -> Result<i64> {
        check_name("counter", name)?;
        CounterOps::counter_get(self, name).await
    }

    async fn counter_set(&self, name: &str, value: i64) -> Result<()> {
        check_name("counter", name)?;
        CounterOps::counter_set(self, name, value).await
    }

    async fn counter_del(&self, name: &str) -> Result<bool> {
        check_name("counter", name)?;
        CounterOps::counter_del(self, name).await
    }
}

#[async_trait]
impl<T: QueueOps> JobQueue for T {
    async fn queue_push(&self, name: &str, body: &[u8], priority: Priority) -> Result<()> {
        check_name("queue", name)?;
        QueueOps::queue_push(self, name, body, &task_head(body), priority).await
    }

    async fn queue_submit_once(
        &self,
        name: &str,
        body: &[u8],
        priority: Priority,
        idem: IdempotencyKey<'_>,
    ) -> Result<SubmitOutcome> {
        let submit = Submit::new().priority(priority).idem(idem);
        JobQueue::queue_submit(self, name, body, &submit).await
    }

    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome> {
        check_name("queue", name)?;
        if let Some(idem) = &submit.idem {
            check_name("idem.ns", idem.ns)?;
        }
        QueueOps::queue_submit(self, name, body, &task_head(body), submit).await
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        QueueOps::queue_size(self, name).await
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        check_name("queue", name)?;
        QueueOps::queue_stats(self, name).await
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        QueueOps::queue_peek(self, name, n).await
    }

    async fn queue_reserve(
        &self,
        name: &str,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        let got = wait::reserve(self, name, 1, timeout, visibility_ms).await?;
        Ok(got.into_iter().next())
    }

    async fn queue_ack(&self, name: &str, receipt: &Receipt) -> Result<bool> {
        check_name("queue", name)?;
        QueueOps::queue_ack(self, name, receipt, None).await
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        delay: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        QueueOps::queue_nack(self, name, receipt, body, &task_head(body), delay).await
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility: Duration,
    ) -> Result<bool> {
        check_name("queue", name)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        QueueOps::queue_extend(self, name, receipt, visibility_ms).await
    }

    async fn queue_fail(&self, name: &str, receipt: &Receipt, body: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        QueueOps::queue_fail(self, name, receipt, body, &task_head(body)).await
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        QueueOps::queue_sweep_expired(self, name).await
    }

    async fn queue_promote_due(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        QueueOps::queue_promote_due(self, name).await
    }

    async fn queue_dead(&self, name: &str, body: &[u8]) -> Result<()> {
        check_name("queue", name)?;
        QueueOps::queue_dead(self, name, body, &task_head(body)).await
    }
}

#[async_trait]
impl<T: QueueOps + QueueBatchOps> QueueBatches for T {
    async fn queue_push_many(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<()> {
        check_name("queue", name)?;
        check_batch("bodies", bodies.len())?;
        if bodies.is_empty() {
            return Ok(());
        }
        let heads: Vec<TaskHead> = bodies.iter().map(|b| task_head(b)).collect();
        // The same id twice in one batch is refused here, before any backend step (guarantee
        // `task.unique_id`); ids taken by existing records are the adapter's check.
        let mut seen = std::collections::HashSet::new();
        for id in heads.iter().filter_map(|h| h.id.as_deref()) {
            if !seen.insert(id) {
                return Err(Error::AlreadyExists {
                    what: "task",
                    id: id.to_owned(),
                });
            }
        }
        QueueBatchOps::queue_push_many(self, name, bodies, &heads, priority).await
    }

    async fn queue_reserve_many(
        &self,
        name: &str,
        max: usize,
        timeout: Duration,
        visibility: Duration,
    ) -> Result<Vec<Delivery>> {
        check_name("queue", name)?;
        if max == 0 {
            return Err(Error::invalid("max", "must be at least 1"));
        }
        check_batch("max", max)?;
        let visibility_ms = check_hold("visibility", visibility)?;
        wait::reserve(self, name, max, timeout, visibility_ms).await
    }

    async fn queue_ack_many(&self, name: &str, receipts: &[Receipt]) -> Result<Vec<bool>> {
        check_name("queue", name)?;
        check_batch("receipts", receipts.len())?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        QueueBatchOps::queue_ack_many(self, name, receipts).await
    }
}

#[async_trait]
impl<T: QueueFlowOps> QueueFlow for T {
    async fn queue_pause(&self, name: &str) -> Result<bool> {
        check_name("queue", name)?;
        QueueFlowOps::queue_pause(self, name).await
    }

    async fn queue_resume(&self, name: &str) -> Result<bool> {
        check_name("queue", name)?;
        QueueFlowOps::queue_resume(self, name).await
    }

    async fn queue_set_rate_limit(&self, name: &str, limit: Option<RateLimit>) -> Result<()> {
        check_name("queue", name)?;
        // The fields are public, so a limit may not have come through `RateLimit::new`.
        let limit = limit.map(|l| RateLimit::new(l.max, l.per)).transpose()?;
        QueueFlowOps::queue_set_rate_limit(self, name, limit).await
    }

    async fn queue_progress(&self, name: &str, receipt: &Receipt, progress: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        check_progress(progress)?;
        QueueFlowOps::queue_progress(self, name, receipt, progress).await
    }

    async fn queue_in_flight(&self, name: &str, n: usize) -> Result<Vec<InFlight>> {
        check_name("queue", name)?;
        QueueFlowOps::queue_in_flight(self, name, n).await
    }

    async fn queue_release(&self, name: &str, receipt: &Receipt, delay: Duration) -> Result<bool> {
        check_name("queue", name)?;
        QueueFlowOps::queue_release(self, name, receipt, delay).await
    }

    async fn queue_delivered(&self, name: &str, receipt: &Receipt) -> Result<Option<Delivery>> {
        check_name("queue", name)?;
        QueueFlowOps::queue_delivered(self, name, receipt).await
    }
}

#[async_trait]
impl<T: DeadLetterOps> DeadLetters for T {
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        DeadLetterOps::dlq_peek(self, name, n).await
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("queue", name)?;
        DeadLetterOps::dlq_pop(self, name, n).await
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        DeadLetterOps::dlq_length(self, name).await
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        DeadLetterOps::dlq_clear(self, name).await
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        check_name("queue", name)?;
        DeadLetterOps::dlq_requeue(self, name, n, priority).await
    }

    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>> {
        check_name("queue", name)?;
        check_batch("bodies", bodies.len())?;
        DeadLetterOps::dlq_requeue_chosen(self, name, bodies, priority).await
    }
}

#[async_trait]
impl<T: ScheduleOps> Schedules for T {
    async fn schedule_put(&self, name: &str, doc: &[u8]) -> Result<()> {
        check_name("schedule", name)?;
        ScheduleOps::schedule_put(self, name, doc).await
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        check_name("schedule", name)?;
        ScheduleOps::schedule_get(self, name).await
    }

    async fn schedule_list(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        ScheduleOps::schedule_list(self).await
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        check_name("schedule", name)?;
        ScheduleOps::schedule_delete(self, name).await
    }
}

#[async_trait]
impl<T: StreamOps> Streams for T {
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        check_name("stream", name)?;
        check_finite("score", score)?;
        StreamOps::stream_push(self, name, envelope, score, max_len, ttl).await
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        StreamOps::stream_pop(self, name, n).await
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        check_name("stream", name)?;
        StreamOps::stream_peek(self, name, n).await
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        check_name("stream", name)?;
        StreamOps::stream_length(self, name).await
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        check_name("stream", name)?;
        StreamOps::stream_trim(self, name, max_len, ttl).await
    }
}

#[async_trait]
impl<T: EventOps> Events for T {
    async fn event_publish(&self, topic: &str, body: &[u8]) -> Result<()> {
        check_name("topic", topic)?;
        EventOps::event_publish(self, topic, body).await
    }

    async fn event_subscribe(&self, topic: &str) -> Result<EventStream> {
        check_name("topic", topic)?;
        EventOps::event_subscribe(self, topic).await
    }
}

#[async_trait]
impl<T: WorkerOps> Workers for T {
    async fn worker_register(
        &self,
        automation_type: &str,
        worker_id: &str,
        hardware: &Value,
    ) -> Result<()> {
        check_name("automation_type", automation_type)?;
        check_name("worker_id", worker_id)?;
        WorkerOps::worker_register(self, automation_type, worker_id, hardware).await
    }

    async fn worker_get_config(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<(Value, u64)> {
        WorkerOps::worker_get_config(self, automation_type, worker_id).await
    }

    async fn worker_set_config(
        &self,
        automation_type: &str,
        worker_id: &str,
        config: &Value,
        expected_gen: Option<u64>,
    ) -> Result<ConfigWrite> {
        check_object("config", config)?;
        WorkerOps::worker_set_config(self, automation_type, worker_id, config, expected_gen).await
    }

    async fn worker_set_state(
        &self,
        automation_type: &str,
        worker_id: &str,
        state: WorkerState<'_>,
    ) -> Result<bool> {
        WorkerOps::worker_set_state(self, automation_type, worker_id, state).await
    }

    async fn worker_set_stats(
        &self,
        automation_type: &str,
        worker_id: &str,
        stats: &Value,
    ) -> Result<bool> {
        WorkerOps::worker_set_stats(self, automation_type, worker_id, stats).await
    }

    async fn worker_stats_push(
        &self,
        automation_type: &str,
        worker_id: &str,
        ts: f64,
        frame: &Value,
        max_entries: usize,
    ) -> Result<bool> {
        check_finite("ts", ts)?;
        WorkerOps::worker_stats_push(self, automation_type, worker_id, ts, frame, max_entries).await
    }

    async fn worker_stats_history(
        &self,
        automation_type: &str,
        worker_id: &str,
        since: f64,
        limit: usize,
    ) -> Result<Vec<Value>> {
        WorkerOps::worker_stats_history(self, automation_type, worker_id, since, limit).await
    }

    async fn worker_get(
        &self,
        automation_type: &str,
        worker_id: &str,
    ) -> Result<Option<WorkerRecord>> {
        WorkerOps::worker_get(self, automation_type, worker_id).await
    }

    async fn worker_list(&self, automation_type: Option<&str>) -> Result<Vec<(String, String)>> {
        WorkerOps::worker_list(self, automation_type).await
    }

    async fn worker_remove(&self, automation_type: &str, worker_id: &str) -> Result<bool> {
        WorkerOps::worker_remove(self, automation_type, worker_id).await
    }
}

#[async_trait]
impl<T: CatalogOps> Catalog for T {
    async fn catalog_set(&self, automation_type: &str, doc: &[u8]) -> Result<()> {
        check_name("automation_type", automation_type)?;
        CatalogOps::catalog_set(self, automation_type, doc).await
    }

    async fn catalog_get(&self, automation_type: &str) -> Result<Option<Vec<u8>>> {
        CatalogOps::catalog_get(self, automation_type).await
    }

    async fn catalog_all(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        CatalogOps::catalog_all(self).await
    }

    async fn queue_names(&self) -> Result<Vec<String>> {
        CatalogOps::queue_names(self).await
    }
}

/// How many steps one `queue_maintain` takes at most, and how much each step may do.
const MAINTAIN_STEPS: usize = 10;
const STEP: usize = 1000;

#[async_trait]
impl<T: TaskOps + QueueOps + EventOps> Tasks for T {
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        check_name("queue", name)?;
        check_task_id(id)?;
        TaskOps::task_get(self, name, id).await
    }

    async fn task_cancel(&self, name: &str, id: &str) -> Result<CancelOutcome> {
        let ids = [id.to_owned()];
        let outcome = Tasks::task_cancel_many(self, name, &ids).await?;
        outcome
            .into_iter()
            .next()
            .ok_or_else(|| Error::corrupt(format!("queue {name}"), "a cancel answered no outcome"))
    }

    async fn task_cancel_many(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        check_name("queue", name)?;
        if ids.len() > MAX_TASK_BATCH {
            return Err(Error::invalid(
                "ids",
                format_args!("at most {MAX_TASK_BATCH} per call"),
            ));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        for id in ids {
            check_task_id(id)?;
        }
        // The adapter sees each id once, so a repeated id is answered alike (not `Cancelled`
        // then `Finished(Cancelled)`).
        let mut unique: Vec<String> = Vec::with_capacity(ids.len());
        let mut index = std::collections::HashMap::with_capacity(ids.len());
        for id in ids {
            index.entry(id.as_str()).or_insert_with(|| {
                unique.push(id.clone());
                unique.len() - 1
            });
        }
        let outcomes = TaskOps::task_cancel(self, name, &unique).await?;
        if outcomes.len() != unique.len() {
            return Err(Error::corrupt(
                format!("queue {name}"),
                format_args!(
                    "{} ids cancelled, {} outcomes",
                    unique.len(),
                    outcomes.len()
                ),
            ));
        }
        // Tell the holders at once; their next heartbeat is the guaranteed path, so a lost
        // notice (or a failed publish) costs at most one heartbeat period.
        let topic = cancel_topic(name);
        for (id, outcome) in unique.iter().zip(&outcomes) {
            if *outcome == CancelOutcome::CancelRequested {
                let _ = EventOps::event_publish(self, &topic, id.as_bytes()).await;
            }
        }
        Ok(ids.iter().map(|id| outcomes[index[id.as_str()]]).collect())
    }

    async fn queue_purge(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let mut total = 0u64;
        loop {
            let n = TaskOps::queue_purge_step(self, name, STEP).await?;
            total = total.saturating_add(n);
            if n < STEP as u64 {
                return Ok(total);
            }
        }
    }

    async fn queue_complete(&self, name: &str, receipt: &Receipt, result: &[u8]) -> Result<bool> {
        check_name("queue", name)?;
        let limit = TaskOps::max_result_bytes(self);
        if result.len() > limit {
            return Err(Error::invalid(
                "result",
                format_args!(
                    "is {} bytes, more than the {limit} a task may store; store it elsewhere and \
                     return a reference",
                    result.len()
                ),
            ));
        }
        QueueOps::queue_ack(self, name, receipt, Some(result)).await
    }

    async fn task_events(
        &self,
        name: &str,
        after: Option<&str>,
        max: usize,
        timeout: Duration,
    ) -> Result<TaskEvents> {
        check_name("queue", name)?;
        if max == 0 || max > MAX_TASK_BATCH {
            return Err(Error::invalid(
                "max",
                format_args!("must be 1 to {MAX_TASK_BATCH}"),
            ));
        }
        wait::task_events(self, name, after, max, timeout).await
    }

    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        check_name("queue", name)?;
        TaskOps::queue_retention(self, name).await
    }

    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        check_name("queue", name)?;
        retention.check()?;
        TaskOps::queue_set_retention(self, name, retention).await
    }

    async fn queue_maintain(&self, name: &str) -> Result<u64> {
        check_name("queue", name)?;
        let mut total = 0u64;
        for _ in 0..MAINTAIN_STEPS {
            let n = TaskOps::task_maintain(self, name, STEP).await?;
            total = total.saturating_add(n);
            if n < STEP as u64 {
                break;
            }
        }
        Ok(total)
    }

    fn max_result_bytes(&self) -> usize {
        TaskOps::max_result_bytes(self)
    }
}

/// The topic a cancel of a running task of queue `name` is announced on (the id as the body).
pub fn cancel_topic(name: &str) -> String {
    format!("fleet.cancel.{name}")
}
