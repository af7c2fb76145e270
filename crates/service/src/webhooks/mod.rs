//! Webhooks: subscriptions that tell another service when a run or a task ends, delivered with
//! the Standard Webhooks signature and retried through switchyard's own queue (ADR 0395).
//!
//! A subscription names a URL, the event types it wants (`run.completed`, `task.dead`, …) and
//! optionally the namespaces (run events) and the queues (task events, which need them) it
//! covers. Its secret is returned once, at creation. Everything lives in the fleet backend —
//! the subscriptions in one KV document, each queue's end-event cursor in KV, each
//! subscription's delivery log in a sorted stream — so webhooks work on every backend with no
//! adapter code of their own.
//!
//! Deliveries are tasks on the internal queue [`DELIVERY_QUEUE`]: a run's end (seen by
//! [`Runs`](crate::runs::Runs) as it is published) or a task's end (read from the queue's
//! end-event log by the dispatcher) enqueues one task per matching subscription, and the
//! [`WebhookWorker`] delivers them, retrying with backoff and dead-lettering after the last
//! attempt. A delivery is at least once; its `webhook-id` is the same on every attempt, so a
//! receiver can drop repeats.

mod deliver;
mod dispatch;
mod settings;
mod sign;
mod target;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_core::fleet::FleetBackend;
use switchyard_fleet::Lock;
use utoipa::ToSchema;

use crate::{Error, Result};

pub use dispatch::WebhookWorker;
pub use settings::WebhookSettings;
pub use target::Cidr;

/// The internal queue whose tasks are deliveries.
pub const DELIVERY_QUEUE: &str = "switchyard.webhooks";

/// The event types a subscription may name.
pub const EVENT_TYPES: &[&str] = &[
    "run.completed",
    "run.failed",
    "run.cancelled",
    "task.completed",
    "task.failed",
    "task.dead",
    "task.cancelled",
];

/// The longest webhook URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// The most entries of each list of a subscription (`events`, `namespaces`, `queues`).
pub const MAX_LIST_LEN: usize = 32;

/// The largest body a delivery carries, in bytes; a larger event is sent without its payload
/// or result (`"truncated": true`).
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// Where the subscriptions and the cursors are kept (KV namespace).
const KV_NS: &str = "switchyard.webhooks";
const REGISTRY_KEY: &str = "subscriptions";
/// Serializes changes of the subscription document across gateways.
const REGISTRY_LOCK: &str = "switchyard.webhooks.registry";
const REGISTRY_HOLD: Duration = Duration::from_secs(10);

fn log_name(id: &str) -> String {
    format!("switchyard.webhooks.log.{id}")
}

/// A subscription as created (`POST /v1/webhooks`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// Where to POST: `http` or `https`, a public address unless the gateway allows more.
    pub url: String,
    /// The event types to deliver, from `run.completed`, `run.failed`, `run.cancelled`,
    /// `task.completed`, `task.failed`, `task.dead`, `task.cancelled`.
    pub events: Vec<String>,
    /// Run events only from these namespaces (`""` is the default one); every namespace when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// The queues whose task ends are delivered; required with a `task.*` event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// The signing secret (`whsec_` and the base64 of 24 to 64 bytes); generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// A subscription as listed (its secret is never shown after creation).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Webhook {
    /// Its id (`wh_…`).
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    /// `null`: every namespace.
    pub namespaces: Option<Vec<String>>,
    pub queues: Vec<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
}

/// The answer to a creation: the subscription and its secret, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// The signing secret; keep it, it is not shown again.
    pub secret: String,
}

/// Every subscription, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
}

/// What a delete did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookDeleted {
    pub deleted: bool,
}

/// One attempt of one delivery.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryAttempt {
    /// The message's `webhook-id`, the same on every attempt.
    pub webhook_id: String,
    /// The event type.
    pub event: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The receiver's status code; `null` when no answer came (refused, timed out).
    pub status: Option<u16>,
    /// From sending the request to the answer's headers (or the failure), in milliseconds.
    pub latency_ms: u64,
    /// Why the attempt failed; `null` when delivered.
    pub error: Option<String>,
    /// Whether the receiver took it (a 2xx answer).
    pub delivered: bool,
    /// When the attempt ended (RFC 3339).
    pub at: String,
}

/// A subscription's delivery log, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryLog {
    pub deliveries: Vec<DeliveryAttempt>,
}

/// A subscription as stored: with its secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    hook: Webhook,
    secret: String,
}

type Registry = BTreeMap<String, Stored>;

/// The webhook rules over a fleet backend (cheap to clone).
#[derive(Debug, Clone)]
pub struct Webhooks {
    fleet: Arc<dyn FleetBackend>,
    settings: Arc<WebhookSettings>,
    allowance: Arc<target::Allowance>,
    /// HTTP clients by host and the checked addresses they are pinned to (`deliver.rs`).
    clients: Arc<deliver::Clients>,
}

impl Webhooks {
    /// The rules over `fleet`, with `settings` (checked: a bad setting is a config error naming
    /// it).
    pub fn new(
        fleet: Arc<dyn FleetBackend>,
        settings: WebhookSettings,
    ) -> switchyard_core::Result<Self> {
        let allowance = settings.allowance()?;
        Ok(Webhooks {
            fleet,
            settings: Arc::new(settings),
            allowance: Arc::new(allowance),
            clients: Arc::default(),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &WebhookSettings {
        &self.settings
    }

    /// Creates a subscription: checks the URL (resolving its host), the events and the lists,
    /// and answers with the secret, shown this once.
    pub async fn create(&self, request: CreateWebhook) -> Result<CreatedWebhook> {
        let refused = |m: String| Error::invalid("url", format!("`url` {m}"));
        let url = target::parse(&request.url).map_err(refused)?;
        let events = check_events(request.events)?;
        let namespaces = match request.namespaces {
            Some(list) => Some(check_list("namespaces", list, true)?),
            None => None,
        };
        let queues = check_list("queues", request.queues, false)?;
        if events.iter().any(|e| e.starts_with("task.")) && queues.is_empty() {
            return Err(Error::invalid(
                "queues",
                "task events need the queues to follow: name them in `queues`",
            ));
        }
        let secret = match request.secret {
            Some(s) => {
                sign::secret_key(&s).map_err(|m| Error::invalid("secret", m))?;
                s
            }
            None => sign::new_secret(),
        };
        // Resolved last, once the cheap checks passed.
        target::resolve(&url, &self.allowance)
            .await
            .map_err(refused)?;
        // A queue no subscription follows yet starts at its log's end now, so the first end
        // after this answer is delivered and none before it; a followed queue keeps its cursor.
        let followed: std::collections::BTreeSet<String> = self
            .registry()
            .await?
            .into_values()
            .filter(|s| s.hook.events.iter().any(|e| e.starts_with("task.")))
            .flat_map(|s| s.hook.queues)
            .collect();
        let wants_tasks = events.iter().any(|e| e.starts_with("task."));
        for queue in queues.iter().filter(|_| wants_tasks) {
            self.start_cursor(queue, !followed.contains(queue)).await?;
        }
        let hook = Webhook {
            id: format!("wh_{}", switchyard_fleet::uuid4_hex()),
            url: url.to_string(),
            events,
            namespaces,
            queues,
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        let stored = Stored {
            hook: hook.clone(),
            secret: secret.clone(),
        };
        let max = self.settings.max_subscriptions;
        self.change(move |registry| {
            if registry.len() >= max {
                return Err(Error::invalid_as(
                    "too_many_webhooks",
                    "url",
                    format!("the gateway keeps at most {max} subscriptions; delete one first"),
                )
                .with("max_webhooks", max as u64));
            }
            registry.insert(stored.hook.id.clone(), stored);
            Ok(())
        })
        .await?;
        Ok(CreatedWebhook {
            webhook: hook,
            secret,
        })
    }

    /// Every subscription, oldest first, without secrets.
    pub async fn list(&self) -> Result<WebhookList> {
        let mut webhooks: Vec<Webhook> = self
            .registry()
            .await?
            .into_values()
            .map(|s| s.hook)
            .collect();
        webhooks.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(WebhookList { webhooks })
    }

    /// One subscription, or `unknown_webhook`.
    pub async fn get(&self, id: &str) -> Result<Webhook> {
        self.registry()
            .await?
            .remove(id)
            .map(|s| s.hook)
            .ok_or_else(unknown)
    }

    /// Deletes a subscription and its delivery log; deliveries already enqueued are dropped
    /// when their turn comes.
    pub async fn delete(&self, id: &str) -> Result<WebhookDeleted> {
        let key = id.to_string();
        let mut deleted = false;
        self.change(|registry| {
            deleted = registry.remove(&key).is_some();
            Ok(())
        })
        .await?;
        if deleted {
            let log = log_name(id);
            let n = self.fleet.stream_length(&log).await?;
            self.fleet.stream_pop(&log, n as usize).await?;
        }
        Ok(WebhookDeleted { deleted })
    }

    /// The subscription's delivery log, newest first (at most the settings' `log_size`).
    pub async fn deliveries(&self, id: &str) -> Result<DeliveryLog> {
        self.get(id).await?;
        let rows = self
            .fleet
            .stream_peek(&log_name(id), self.settings.log_size as usize)
            .await?;
        let mut deliveries: Vec<DeliveryAttempt> = rows
            .iter()
            .filter_map(|r| serde_json::from_slice(r).ok())
            .collect();
        deliveries.reverse();
        Ok(DeliveryLog { deliveries })
    }

    async fn registry(&self) -> Result<Registry> {
        let Some(doc) = self.fleet.kv_get(KV_NS, REGISTRY_KEY).await? else {
            return Ok(Registry::new());
        };
        serde_json::from_slice(&doc).map_err(|e| {
            Error::Backend(switchyard_core::Error::corrupt(
                "webhook subscriptions",
                format!("do not parse: {e}"),
            ))
        })
    }

    /// Reads, changes and writes the subscription document under a lock, so two gateways
    /// creating at once do not lose one of the two.
    async fn change(&self, edit: impl FnOnce(&mut Registry) -> Result<()>) -> Result<()> {
        let lock = Lock::new(self.fleet.clone(), REGISTRY_LOCK);
        let Some(guard) = lock.acquire(REGISTRY_HOLD, REGISTRY_HOLD).await? else {
            return Err(Error::Backend(switchyard_core::Error::unavailable(
                "lock_acquire",
                REGISTRY_LOCK,
                "the webhook subscriptions are being changed elsewhere; try again",
            )));
        };
        let mut registry = self.registry().await?;
        let out = edit(&mut registry);
        if out.is_ok() {
            let doc = serde_json::to_vec(&registry).map_err(|e| {
                Error::Backend(switchyard_core::Error::corrupt(
                    "webhook subscriptions",
                    format!("do not serialize: {e}"),
                ))
            })?;
            self.fleet.kv_set(KV_NS, REGISTRY_KEY, &doc, None).await?;
        }
        let _ = guard.release().await;
        out
    }
}

fn unknown() -> Error {
    Error::not_found(
        "unknown_webhook",
        "no webhook subscription has this id; GET /v1/webhooks lists them",
    )
}

fn check_events(events: Vec<String>) -> Result<Vec<String>> {
    if events.is_empty() {
        return Err(Error::invalid("events", "name at least one event type"));
    }
    let events = check_list("events", events, false)?;
    if let Some(bad) = events.iter().find(|e| !EVENT_TYPES.contains(&e.as_str())) {
        return Err(Error::invalid(
            "events",
            format!(
                "{bad:?} is not an event type; use {}",
                EVENT_TYPES.join(", ")
            ),
        ));
    }
    Ok(events)
}

/// A bounded list of names without repeats (sorted, so equal subscriptions compare equal).
fn check_list(field: &str, list: Vec<String>, empty_name_ok: bool) -> Result<Vec<String>> {
    if list.len() > MAX_LIST_LEN {
        return Err(Error::invalid(
            field,
            format!("names {} entries; at most {MAX_LIST_LEN}", list.len()),
        )
        .with("max_entries", MAX_LIST_LEN as u64));
    }
    for name in &list {
        if name.is_empty() && !empty_name_ok {
            return Err(Error::invalid(field, "a name must not be empty"));
        }
        if name.len() > switchyard_core::keys::MAX_ID_BYTES {
            return Err(Error::invalid(field, format!("{name:?} is too long")));
        }
    }
    let mut list = list;
    list.sort();
    list.dedup();
    Ok(list)
}
