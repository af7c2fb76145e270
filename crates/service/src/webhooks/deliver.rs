//! One attempt of one delivery: look the subscription up again (it may be gone), check its
//! target again, POST the signed body to the checked addresses only, and log the attempt.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchyard_fleet::{HandlerError, Permanent, Task};

use super::{DeliveryAttempt, Webhooks, log_name, sign, target};

/// The most bytes of a receiver's answer that are read; the rest is dropped unread.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The most bytes of an answer kept in the log's `error` when the receiver refused.
const ERROR_EXCERPT_BYTES: usize = 200;

/// A delivery task's payload on [`DELIVERY_QUEUE`](super::DELIVERY_QUEUE): the message, signed
/// afresh at each attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DeliveryTask {
    /// The subscription's id.
    pub subscription: String,
    /// The message's `webhook-id`.
    pub message_id: String,
    /// The event type.
    pub event: String,
    /// The JSON body, as the exact bytes that are signed and sent.
    pub body: String,
}

/// The most clients kept; past it the cache starts over (a client is cheap to rebuild, only not
/// once per delivery).
const MAX_CLIENTS: usize = 256;

/// HTTP clients by the host they serve and the checked addresses they are pinned to. Building a
/// client loads the system's trust roots, which costs more than a delivery on loopback; a client
/// is kept only for the exact addresses the last check allowed, so a host that resolves
/// elsewhere gets a new client, pinned again, and its connections are reused only to addresses
/// that passed the check.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    by_target: std::sync::Mutex<HashMap<(String, Vec<SocketAddr>), reqwest::Client>>,
}

impl Clients {
    fn pinned(
        &self,
        url: &reqwest::Url,
        addrs: &[SocketAddr],
        settings: &super::WebhookSettings,
    ) -> reqwest::Result<reqwest::Client> {
        let host = url.host_str().unwrap_or_default().to_string();
        let key = (host, addrs.to_vec());
        let mut cache = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = cache.get(&key) {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder()
            // A redirect could point anywhere, private addresses included: it is an answer
            // like any other non-2xx, logged and retried.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve the host again, past the check.
            .no_proxy()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.timeout)
            .user_agent(concat!("switchyard-webhooks/", env!("CARGO_PKG_VERSION")));
        if !key.0.is_empty() {
            builder = builder.resolve_to_addrs(&key.0, addrs);
        }
        let client = builder.build()?;
        if cache.len() >= MAX_CLIENTS {
            cache.clear();
        }
        cache.insert(key, client.clone());
        Ok(client)
    }
}

/// What one attempt met.
struct Outcome {
    status: Option<u16>,
    error: Option<String>,
    latency: Duration,
}

impl Webhooks {
    /// Runs one attempt of `task`; an error makes the consumer retry it (or dead-letter it after
    /// the last attempt, or at once when the error is [`Permanent`]).
    pub(crate) async fn deliver(&self, task: Task<DeliveryTask>) -> Result<(), HandlerError> {
        let job = &task.payload;
        let registry = self.registry().await.map_err(|e| e.to_string())?;
        let Some(stored) = registry.get(&job.subscription) else {
            // Deleted since it was enqueued: nothing to deliver, nothing to retry.
            return Ok(());
        };
        let key = sign::secret_key(&stored.secret).map_err(Permanent::new)?;
        let outcome = match target::parse(&stored.hook.url) {
            Err(m) => Err(format!("the URL {m}")),
            Ok(url) => match target::resolve(&url, &self.allowance).await {
                // A refused target is refused on every attempt: no retry.
                Err(m) => Err(format!("the URL {m}")),
                Ok(addrs) => Ok(self.post(&url, &addrs, &key, job).await),
            },
        };
        let (outcome, permanent) = match outcome {
            Ok(outcome) => (outcome, false),
            Err(error) => (
                Outcome {
                    status: None,
                    error: Some(error),
                    latency: Duration::ZERO,
                },
                true,
            ),
        };
        self.log(job, task.attempt, &outcome).await;
        match outcome.error {
            None => Ok(()),
            Some(error) if permanent => Err(Permanent::new(error).into()),
            Some(error) => Err(error.into()),
        }
    }

    /// POSTs the message to `addrs` (the checked addresses of `url`'s host) and reads at most
    /// [`MAX_RESPONSE_BYTES`] of the answer.
    async fn post(
        &self,
        url: &reqwest::Url,
        addrs: &[std::net::SocketAddr],
        key: &[u8],
        job: &DeliveryTask,
    ) -> Outcome {
        let started = Instant::now();
        let failed = |error: String| Outcome {
            status: None,
            error: Some(error),
            latency: started.elapsed(),
        };
        let client = match self.clients.pinned(url, addrs, &self.settings) {
            Ok(c) => c,
            Err(e) => return failed(format!("no HTTP client: {e}")),
        };
        let timestamp = chrono::Utc::now().timestamp();
        let signature = sign::sign(key, &job.message_id, timestamp, job.body.as_bytes());
        let sent = client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", &job.message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(job.body.clone())
            .send()
            .await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => return failed(describe(&e, self.settings.timeout)),
        };
        let latency = started.elapsed();
        let status = response.status();
        let mut excerpt = Vec::new();
        let mut read = 0usize;
        // Reading the answer (bounded) lets a receiver finish; only an excerpt is kept.
        while read < MAX_RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    read += chunk.len();
                    let room = ERROR_EXCERPT_BYTES.saturating_sub(excerpt.len());
                    excerpt.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let error = (!status.is_success()).then(|| {
            let text = String::from_utf8_lossy(&excerpt);
            let text = text.trim();
            let mut error = if status.is_redirection() {
                format!("answered {status}; redirects are not followed")
            } else {
                format!("answered {status}")
            };
            if !text.is_empty() {
                error.push_str(": ");
                error.push_str(text);
            }
            error
        });
        Outcome {
            status: Some(status.as_u16()),
            error,
            latency,
        }
    }

    /// Appends the attempt to the subscription's log (its oldest entries beyond `log_size`
    /// drop out). A failure to log does not fail the delivery.
    async fn log(&self, job: &DeliveryTask, attempt: u32, outcome: &Outcome) {
        let now = chrono::Utc::now();
        let entry = DeliveryAttempt {
            webhook_id: job.message_id.clone(),
            event: job.event.clone(),
            attempt,
            status: outcome.status,
            latency_ms: u64::try_from(outcome.latency.as_millis()).unwrap_or(u64::MAX),
            error: outcome.error.clone(),
            delivered: outcome.error.is_none(),
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        };
        let Ok(bytes) = serde_json::to_vec(&entry) else {
            return;
        };
        let score = now.timestamp_micros() as f64 / 1e6;
        if let Err(e) = self
            .fleet
            .stream_push(
                &log_name(&job.subscription),
                &bytes,
                score,
                self.settings.log_size,
                None,
            )
            .await
        {
            tracing::warn!(subscription = %job.subscription, error = %e, "logging a webhook delivery failed");
        }
    }
}

/// A transport failure in plain words (the timeout named with its length).
fn describe(error: &reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        format!("timed out after {timeout:?}")
    } else if error.is_connect() {
        format!("could not connect: {error}")
    } else {
        format!("the request failed: {error}")
    }
}
