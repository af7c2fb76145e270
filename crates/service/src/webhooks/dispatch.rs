//! From ends to deliveries: a run's end enqueues its deliveries as the run service publishes
//! it; a task's end is read from its queue's end-event log by the dispatcher, which keeps a
//! cursor per queue in the fleet's KV. [`WebhookWorker`] runs the dispatcher and the consumer
//! of the delivery queue.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_core::Event;
use switchyard_core::fleet::TaskState;
use switchyard_core::status::lifecycle_status;
use switchyard_fleet::{
    Consumer, ConsumerConfig, ConsumerHandle, Lock, PushOptions, Queue, Submitted, TaskEvent,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::deliver::DeliveryTask;
use super::{DELIVERY_QUEUE, KV_NS, MAX_PAYLOAD_BYTES, Stored, Webhooks, sign};
use crate::Result;

/// Only one gateway follows the end-event logs at a time; the others wait for its hold to lapse.
const DISPATCH_LOCK: &str = "switchyard.webhooks.dispatch";
const DISPATCH_HOLD: Duration = Duration::from_secs(30);

/// Ends read per queue per round.
const PAGE: usize = 100;

fn cursor_key(queue: &str) -> String {
    format!("cursor:{queue}")
}

/// The webhook event type of a task's end.
fn task_event_type(state: TaskState) -> Option<&'static str> {
    Some(match state {
        TaskState::Completed => "task.completed",
        TaskState::Failed => "task.failed",
        TaskState::Dead => "task.dead",
        TaskState::Cancelled => "task.cancelled",
        _ => return None,
    })
}

/// A message body: `{type, timestamp, data}`. When `data` would make it larger than
/// [`MAX_PAYLOAD_BYTES`], `bulky` (the run's payload, the task's result) is left out and
/// `truncated` set, so a receiver knows to read it from switchyard.
fn body(event: &str, timestamp: &str, mut data: Value, bulky: &str) -> String {
    let doc =
        |data: &Value| json!({ "type": event, "timestamp": timestamp, "data": data }).to_string();
    let text = doc(&data);
    if text.len() <= MAX_PAYLOAD_BYTES {
        return text;
    }
    if let Some(map) = data.as_object_mut() {
        map.insert(bulky.into(), Value::Null);
        map.insert("truncated".into(), Value::Bool(true));
    }
    doc(&data)
}

impl Webhooks {
    /// Enqueues the deliveries of a stored run event when it ends its run (`run.completed`,
    /// `run.failed`, `run.cancelled`) and a subscription wants it. Called by the run service
    /// for every event it publishes; a failure is logged, never turned into an error of the
    /// write, which is already durable.
    pub async fn run_event(&self, event: &Event) {
        if !lifecycle_status(event.kind()).is_some_and(|s| s.is_terminal()) {
            return;
        }
        if let Err(e) = self.run_ended(event).await {
            tracing::warn!(run_id = %event.run_id, error = %e, "enqueueing webhook deliveries failed");
        }
    }

    async fn run_ended(&self, event: &Event) -> Result<()> {
        let kind = event.kind();
        let namespace = event.namespace.clone().unwrap_or_default();
        let registry = self.registry().await?;
        let wanted: Vec<&Stored> = registry
            .values()
            .filter(|s| {
                s.hook.events.iter().any(|e| e == kind)
                    && s.hook
                        .namespaces
                        .as_ref()
                        .is_none_or(|list| list.contains(&namespace))
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let timestamp = event.ts.to_rfc3339();
        let data = json!({
            "run_id": event.run_id,
            "session_id": event.session_id,
            "namespace": event.namespace,
            "seq": event.seq,
            "origin": event.origin,
            "payload": event.payload,
        });
        let message = body(kind, &timestamp, data, "payload");
        let key = format!("run\n{namespace}\n{}\n{}", event.run_id, event.seq);
        for stored in wanted {
            self.enqueue(stored, kind, &key, &message).await?;
        }
        Ok(())
    }

    /// Enqueues one delivery, once per subscription and event: a repeat within a day (a
    /// dispatcher that stopped before storing its cursor) is answered by the queue's
    /// idempotency key and enqueues nothing.
    async fn enqueue(&self, stored: &Stored, event: &str, key: &str, message: &str) -> Result<()> {
        let message_id = sign::message_id(&stored.hook.id, key);
        let task = DeliveryTask {
            subscription: stored.hook.id.clone(),
            message_id: message_id.clone(),
            event: event.to_string(),
            body: message.to_string(),
        };
        let queue = Queue::<DeliveryTask>::new(self.fleet.clone(), DELIVERY_QUEUE);
        let outcome = queue
            .submit_once(&message_id, &task, PushOptions::default())
            .await?;
        if let Submitted::Duplicate(_) = outcome {
            tracing::debug!(%message_id, "webhook delivery already enqueued");
        }
        Ok(())
    }

    /// Stores the queue's cursor at its end-event log's end: unless one is stored, or, with
    /// `restart`, in any case (a queue no subscription followed until now must not have its
    /// old ends delivered from a cursor left by a deleted subscription).
    pub(super) async fn start_cursor(&self, queue: &str, restart: bool) -> Result<()> {
        let key = cursor_key(queue);
        if !restart && self.fleet.kv_get(KV_NS, &key).await?.is_some() {
            return Ok(());
        }
        let end = self
            .fleet
            .task_events(queue, Some("$"), 1, Duration::ZERO)
            .await?;
        if restart {
            self.fleet
                .kv_set(KV_NS, &key, end.cursor.as_bytes(), None)
                .await?;
        } else {
            self.fleet
                .kv_set_nx(KV_NS, &key, end.cursor.as_bytes(), None)
                .await?;
        }
        Ok(())
    }

    /// One round of the dispatcher: for every queue a subscription follows, the ends after its
    /// cursor become deliveries, then the cursor moves past them. Enqueued before the cursor is
    /// stored, so a crash between the two enqueues again (and the idempotency key drops it).
    async fn dispatch_round(&self) -> Result<()> {
        let registry = self.registry().await?;
        let queues: BTreeSet<String> = registry
            .values()
            .filter(|s| s.hook.events.iter().any(|e| e.starts_with("task.")))
            .flat_map(|s| s.hook.queues.iter().cloned())
            .collect();
        if queues.is_empty() {
            return Ok(());
        }
        let lock = Lock::new(self.fleet.clone(), DISPATCH_LOCK);
        let Some(guard) = lock.try_acquire(DISPATCH_HOLD).await? else {
            return Ok(());
        };
        for queue in queues {
            if let Err(e) = self.dispatch_queue(&registry, &queue).await {
                tracing::warn!(%queue, error = %e, "following the end events for webhooks failed");
            }
        }
        let _ = guard.release().await;
        Ok(())
    }

    async fn dispatch_queue(&self, registry: &super::Registry, queue: &str) -> Result<()> {
        self.start_cursor(queue, false).await?;
        let key = cursor_key(queue);
        let cursor = self
            .fleet
            .kv_get(KV_NS, &key)
            .await?
            .map(|c| String::from_utf8_lossy(&c).into_owned());
        let page = self
            .fleet
            .task_events(queue, cursor.as_deref(), PAGE, Duration::ZERO)
            .await?;
        if page.gap {
            tracing::warn!(%queue, "the end-event log was trimmed past the webhook cursor: some task ends were not delivered");
        }
        for end in &page.events {
            self.task_ended(registry, queue, end).await?;
        }
        if cursor.as_deref() != Some(page.cursor.as_str()) {
            self.fleet
                .kv_set(KV_NS, &key, page.cursor.as_bytes(), None)
                .await?;
        }
        Ok(())
    }

    async fn task_ended(
        &self,
        registry: &super::Registry,
        queue: &str,
        end: &TaskEvent,
    ) -> Result<()> {
        let Some(kind) = task_event_type(end.state) else {
            return Ok(());
        };
        let wanted: Vec<&Stored> = registry
            .values()
            .filter(|s| {
                s.hook.events.iter().any(|e| e == kind) && s.hook.queues.iter().any(|q| q == queue)
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let result = end.result.as_ref().map(|r| {
            serde_json::from_slice::<Value>(r)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(r).into_owned()))
        });
        let timestamp = chrono::DateTime::from_timestamp_micros((end.at * 1e6) as i64)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let data = json!({
            "queue": queue,
            "task_id": end.task_id,
            "state": end.state,
            "attempt": end.attempt,
            "error": end.error,
            "result": result,
            "result_size": end.result_size,
        });
        let message = body(kind, &timestamp, data, "result");
        let key = format!("task\n{queue}\n{}\n{}", end.task_id, end.cursor);
        for stored in wanted {
            self.enqueue(stored, kind, &key, &message).await?;
        }
        Ok(())
    }

    /// Starts the delivery consumer and the dispatcher on the current Tokio runtime; stop them
    /// with [`WebhookWorker::shutdown`].
    pub fn start(&self) -> WebhookWorker {
        let s = &self.settings;
        let config = ConsumerConfig {
            concurrency: s.concurrency,
            max_attempts: s.max_attempts,
            backoff_unit: s.backoff,
            backoff_cap: s.backoff_cap,
            // Past the HTTP timeout the attempt is already over; this only bounds a stuck one.
            timeout: Some(s.connect_timeout + s.timeout + Duration::from_secs(5)),
            visibility: Duration::from_secs(60).max(s.timeout * 2),
            shutdown_grace: Duration::from_secs(5),
            ..ConsumerConfig::default()
        };
        let queue = Queue::<DeliveryTask>::new(self.fleet.clone(), DELIVERY_QUEUE);
        let hooks = self.clone();
        let consumer = Consumer::spawn(queue, config, move |task| {
            let hooks = hooks.clone();
            async move { hooks.deliver(task).await }
        });
        let (stop, mut stopped) = watch::channel(false);
        let hooks = self.clone();
        let dispatcher = tokio::spawn(async move {
            loop {
                if let Err(e) = hooks.dispatch_round().await {
                    tracing::warn!(error = %e, "a webhook dispatch round failed");
                }
                tokio::select! {
                    _ = stopped.changed() => return,
                    () = tokio::time::sleep(hooks.settings.dispatch_every) => {}
                }
            }
        });
        WebhookWorker {
            consumer,
            stop,
            dispatcher,
        }
    }
}

/// The running dispatcher and delivery consumer of a gateway.
#[derive(Debug)]
pub struct WebhookWorker {
    consumer: ConsumerHandle,
    stop: watch::Sender<bool>,
    dispatcher: JoinHandle<()>,
}

impl WebhookWorker {
    /// Stops the dispatcher (after its round in progress) and the consumer (deliveries in
    /// flight get a short grace, the rest go back to the queue for the next start).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.dispatcher.await;
        self.consumer.shutdown().await;
    }
}
