//! The client: its builder, the request plumbing, and one typed method per route.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode, header};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchyard_core::keys::quote;
use switchyard_core::{Payload, RunContext, RunStatus};
use switchyard_service::queues::{
    AckBody, AckItem, AckManyBody, AckedMany, CancelAnswer, CancelBody, Cancelled, DeadLetterList,
    Deleted, EventsPage, ExtendBody, FailBody, InFlightList, NackBody, Nacked, PauseState,
    QueueList, QueueStatsJson, RateLimitBody, RequeueBody, Requeued, Reservations, ReserveBody,
    RetentionBody, RetentionJson, Schedule, ScheduleList, SubmitBody, Submitted, TaskJson,
    WaitingTasks, WorkerList,
};
use switchyard_service::runs::{
    AppendedEvents, CancelRun, CancelRunAnswer, Queued, ResumeRun, Resumed, RunList, RunTurn,
    RunView, SessionLine, StartRun, Started,
};
use switchyard_service::webhooks::{
    CreateWebhook, CreatedWebhook, DeliveryLog, Webhook, WebhookDeleted, WebhookList,
};

use crate::error::chain;
use crate::{Error, EventStream};

/// How long a connection attempt may take, unless the builder says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, unless the builder says otherwise. The gateway's long poll
/// (`reserve` with `wait_seconds`) is at most 30 s, so this leaves it room; streams have no
/// overall bound.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds a [`Client`]: `Client::builder(base_url).token(secret).build()`.
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    roots: Vec<Vec<u8>>,
    connect_timeout: Duration,
    request_timeout: Duration,
    user_agent: String,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("roots", &self.roots.len())
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl ClientBuilder {
    /// The bearer token's secret (a line of the gateway's token file, or what its
    /// authenticator takes as `Authorization: Bearer …`).
    pub fn token(mut self, secret: impl Into<String>) -> Self {
        self.token = Some(secret.into());
        self
    }

    /// A PEM certificate to trust besides the system's roots: a gateway with a self-signed
    /// certificate or a private CA. May be called more than once.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots.push(pem.into());
        self
    }

    /// How long a connection attempt may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one request may take, its answer included (default 60 s); streams are not
    /// bounded by it.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The `User-Agent` (default `switchyard-client/<version>`).
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }

    /// The client; [`Error::Setup`] for a base URL that is not `http(s)://`, a CA that is not
    /// PEM or a token that cannot be sent in a header.
    pub fn build(self) -> Result<Client, Error> {
        let base = self.base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Setup {
                reason: format!("the base URL {base:?} must start with http:// or https://"),
            });
        }
        let auth = match self.token {
            Some(secret) => {
                let mut value = header::HeaderValue::from_str(&format!("Bearer {secret}"))
                    .map_err(|_| Error::Setup {
                        // The secret itself is not shown: it must never reach a log.
                        reason: "the token holds characters a header cannot carry (a newline?): \
                                 pass the secret alone"
                            .into(),
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .user_agent(self.user_agent);
        for pem in &self.roots {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::Setup {
                reason: format!("the CA certificate is not PEM: {}", chain(&e)),
            })?;
            // Text without a certificate block would be accepted silently and trust nothing:
            // a misnamed file would only show as a TLS failure at the first request.
            if certs.is_empty() {
                return Err(Error::Setup {
                    reason: "the CA file holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
                        .into(),
                });
            }
            for cert in certs {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http.build().map_err(|e| Error::Setup {
            reason: format!(
                "cannot build the HTTP client (is the CA certificate PEM?): {}",
                chain(&e)
            ),
        })?;
        Ok(Client {
            http,
            base,
            auth,
            request_timeout: self.request_timeout,
        })
    }
}

/// What [`Client::claim_run`] answers: a started run, or one waiting in its session's line.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)] // one per claim, matched once
pub enum RunClaim {
    /// Started (201).
    Started(Started),
    /// Waiting in the session's line (202), at `position`.
    Queued(Queued),
}

/// A run's address on the gateway: its id, and the session and namespace of its log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRef {
    /// The run.
    pub run_id: String,
    /// Its session, if it has one.
    pub session: Option<String>,
    /// Its namespace, if it has one.
    pub namespace: Option<String>,
}

impl RunRef {
    /// The run `run_id` in its own log, without a namespace.
    pub fn new(run_id: impl Into<String>) -> Self {
        RunRef {
            run_id: run_id.into(),
            ..RunRef::default()
        }
    }

    /// In session `session`'s log.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// In namespace `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(s) = &self.session {
            query.push(("session", s.clone()));
        }
        if let Some(n) = &self.namespace {
            query.push(("namespace", n.clone()));
        }
        query
    }
}

impl From<&RunContext> for RunRef {
    fn from(ctx: &RunContext) -> Self {
        RunRef {
            run_id: ctx.run_id().to_string(),
            session: ctx.session_id().map(str::to_string),
            namespace: ctx.namespace().map(str::to_string),
        }
    }
}

/// The typed client of a switchyard gateway's HTTP API. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    auth: Option<header::HeaderValue>,
    request_timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// `/v1/<segments…>`, each segment percent-encoded (a run id or queue name may hold `/`).
fn path(segments: &[&str]) -> String {
    let mut path = String::from("/v1");
    for s in segments {
        path.push('/');
        path.push_str(&quote(s));
    }
    path
}

impl Client {
    /// A builder for the gateway at `base_url` (`http://host:port` or `https://…`, with the
    /// path it is mounted at if any, e.g. `https://example.com/switchyard`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            token: None,
            roots: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            user_agent: concat!("switchyard-client/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(auth) = &self.auth {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        request
    }

    fn unreachable(&self, e: &reqwest::Error) -> Error {
        Error::Unreachable {
            base: self.base.clone(),
            reason: chain(e),
        }
    }

    /// Sends; a non-2xx answer becomes [`Error::Refused`].
    async fn send(&self, request: RequestBuilder) -> Result<Response, Error> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(refusal(response).await)
    }

    async fn read<T: DeserializeOwned>(&self, response: Response) -> Result<T, Error> {
        let bytes = response.bytes().await.map_err(|e| Error::Unreachable {
            base: self.base.clone(),
            reason: format!("the answer broke off: {}", chain(&e)),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            reason: e.to_string(),
        })
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, Error> {
        let request = self
            .request(Method::GET, path)
            .query(query)
            .timeout(self.request_timeout);
        let response = self.send(request).await?;
        self.read(response).await
    }

    /// A write with a JSON body; the gateway takes writes only with a JSON content type, an
    /// empty body included.
    async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Duration,
    ) -> Result<T, Error> {
        let text = match body {
            Some(b) => serde_json::to_string(b).map_err(|e| Error::Setup {
                reason: format!("the request body cannot be written as JSON: {e}"),
            })?,
            None => "{}".to_string(),
        };
        let request = self
            .request(method, path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(text)
            .timeout(timeout);
        let response = self.send(request).await?;
        self.read(response).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, Error> {
        self.write(Method::POST, path, body, self.request_timeout)
            .await
    }

    // ---- runs ----

    /// `POST /v1/runs`: claims the session (or the run's own log) and starts the run. A session
    /// held by a fresh open run is [`Error::Refused`] 409 `session_busy`, its body's `held_by`
    /// naming the run.
    pub async fn start_run(
        &self,
        request: &StartRun,
    ) -> Result<switchyard_service::runs::Started, Error> {
        self.post("/v1/runs", Some(request)).await
    }

    /// `POST /v1/runs` with the request's `multitask_strategy` (ADR 0394): the started run
    /// (201), or, for `enqueue` on a busy session, the run waiting in the session's line with
    /// its place (202). `reject` on a busy session is [`Error::Refused`] 409 `session_busy`, as
    /// with [`start_run`](Self::start_run).
    pub async fn claim_run(&self, request: &StartRun) -> Result<RunClaim, Error> {
        self.post("/v1/runs", Some(request)).await
    }

    /// `POST /v1/runs/{run}/turn`: where an enqueued run stands, waiting up to `wait_secs` (at
    /// most 30) for it to start; 404 `not_waiting` ([`Error::is_not_found`]) when it neither
    /// waits nor has started.
    pub async fn run_turn(&self, run: &RunRef, wait_secs: u64) -> Result<RunTurn, Error> {
        let mut query = run.query();
        query.push(("wait_secs", wait_secs.to_string()));
        let path = with_query(&path(&["runs", &run.run_id, "turn"]), &query);
        self.post(&path, None::<&()>).await
    }

    /// `DELETE /v1/runs/{run}/turn`: takes an enqueued run out of its session's line before it
    /// starts; 404 `not_waiting` when it does not wait.
    pub async fn leave_line(&self, run: &RunRef) -> Result<(), Error> {
        let path = with_query(&path(&["runs", &run.run_id, "turn"]), &run.query());
        self.delete::<Value>(&path).await.map(|_| ())
    }

    /// `GET /v1/sessions/{session}/line`: the runs waiting for a session, the next to start
    /// first.
    pub async fn session_line(
        &self,
        session: &str,
        namespace: Option<&str>,
    ) -> Result<SessionLine, Error> {
        let query: Vec<(&str, String)> = namespace
            .map(|n| vec![("namespace", n.to_string())])
            .unwrap_or_default();
        self.get(&path(&["sessions", session, "line"]), &query)
            .await
    }

    /// `POST /v1/runs/{run}/cancel`: records the cancel (the worker learns it on the run's
    /// signals), cancels the named task, and ends the run after the grace period unless its
    /// worker ends it first; a waiting run leaves its line, a finished one is left as it is.
    pub async fn cancel_run(
        &self,
        run: &RunRef,
        request: &CancelRun,
    ) -> Result<CancelRunAnswer, Error> {
        let path = with_query(&path(&["runs", &run.run_id, "cancel"]), &run.query());
        self.post(&path, Some(request)).await
    }

    /// `POST /v1/runs/{run}/events`: appends payloads (at most 1000) while the run is open.
    pub async fn append_events(
        &self,
        run: &RunRef,
        payloads: &[Payload],
        origin: Option<&str>,
    ) -> Result<AppendedEvents, Error> {
        #[derive(Serialize)]
        struct Batch<'a> {
            events: &'a [Payload],
            #[serde(skip_serializing_if = "Option::is_none")]
            origin: Option<&'a str>,
        }
        let path = with_query(&path(&["runs", &run.run_id, "events"]), &run.query());
        self.post(
            &path,
            Some(&Batch {
                events: payloads,
                origin,
            }),
        )
        .await
    }

    /// `POST /v1/runs/{run}/resume`: resumes a run that waits for a human or is paused.
    pub async fn resume_run(&self, run: &RunRef, request: &ResumeRun) -> Result<Resumed, Error> {
        let path = with_query(&path(&["runs", &run.run_id, "resume"]), &run.query());
        self.post(&path, Some(request)).await
    }

    /// `GET /v1/runs/{run}`: the run's status and its events from `from_seq` on; 404
    /// ([`Error::is_not_found`]) when its log has no such run.
    pub async fn run(&self, run: &RunRef, from_seq: u64) -> Result<RunView, Error> {
        let mut query = vec![("from_seq", from_seq.to_string())];
        query.extend(run.query());
        self.get(&path(&["runs", &run.run_id]), &query).await
    }

    /// `GET /v1/runs`: the runs of `namespace` (none: the runs without one), of one status if
    /// given, sorted by log and run.
    pub async fn runs(
        &self,
        namespace: Option<&str>,
        status: Option<RunStatus>,
    ) -> Result<RunList, Error> {
        let mut query = Vec::new();
        if let Some(n) = namespace {
            query.push(("namespace", n.to_string()));
        }
        if let Some(s) = status {
            query.push(("status", s.to_string()));
        }
        self.get("/v1/runs", &query).await
    }

    /// `GET /v1/runs/{run}/stream`: the run's events as SSE frames, after `last_event_id` when
    /// given (replayed from the bridge's retention, else one `gap` frame). Only opening it is
    /// refused with a status: 404 for an unknown run or a finished run's released stream.
    pub async fn run_stream(
        &self,
        run: &RunRef,
        last_event_id: Option<&str>,
    ) -> Result<EventStream, Error> {
        let mut request = self
            .request(Method::GET, &path(&["runs", &run.run_id, "stream"]))
            .query(&run.query())
            .header(header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = self.send(request).await?;
        Ok(EventStream::new(response, self.base.clone()))
    }

    // ---- queues ----

    /// `GET /v1/queues`: the queues that hold tasks and those the gateway watches, sorted.
    pub async fn queues(&self) -> Result<QueueList, Error> {
        self.get("/v1/queues", &[]).await
    }

    /// `GET /v1/queues/{queue}`: every count of the queue, from one snapshot.
    pub async fn queue_stats(&self, queue: &str) -> Result<QueueStatsJson, Error> {
        self.get(&path(&["queues", queue]), &[]).await
    }

    /// `GET /v1/queues/{queue}/tasks`: the next waiting tasks (at most `limit`).
    pub async fn waiting_tasks(
        &self,
        queue: &str,
        limit: Option<u64>,
    ) -> Result<WaitingTasks, Error> {
        self.get(&path(&["queues", queue, "tasks"]), &limit_query(limit))
            .await
    }

    /// `POST /v1/queues/{queue}/tasks`: enqueues a task, now or later; a repeated idempotency
    /// key enqueues nothing and answers the first task's id with `duplicate`.
    pub async fn submit(&self, queue: &str, task: &SubmitBody) -> Result<Submitted, Error> {
        self.post(&path(&["queues", queue, "tasks"]), Some(task))
            .await
    }

    /// `POST /v1/queues/{queue}/reservations`: reserves up to `max` tasks, waiting up to
    /// `wait_seconds` (a long poll) while none is due. The request may take that long: the
    /// client's request timeout is stretched by the wait.
    pub async fn reserve(&self, queue: &str, request: &ReserveBody) -> Result<Reservations, Error> {
        let wait = request
            .wait_seconds
            .filter(|w| w.is_finite() && *w > 0.0)
            .map_or(Duration::ZERO, |w| Duration::from_secs_f64(w.min(3600.0)));
        self.write(
            Method::POST,
            &path(&["queues", queue, "reservations"]),
            Some(request),
            self.request_timeout + wait,
        )
        .await
    }

    async fn verb<T: DeserializeOwned>(
        &self,
        queue: &str,
        receipt: &str,
        verb: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, Error> {
        self.post(
            &path(&["queues", queue, "reservations", receipt, verb]),
            body,
        )
        .await
    }

    /// `…/reservations/{receipt}/ack`: the task is done. A receipt that is no longer the current
    /// delivery's is 409 `receipt_not_current`: the task was given to another worker.
    pub async fn ack(&self, queue: &str, receipt: &str) -> Result<(), Error> {
        let _: Value = self.verb(queue, receipt, "ack", None::<&Value>).await?;
        Ok(())
    }

    /// `…/reservations/{receipt}/ack` with the task's result (any JSON, at most the backend's
    /// `max_result_bytes` written compact): 413 `result_too_large` (its body's `limit` says how
    /// many bytes) when larger, 409 `cancelled` when the task was cancelled meanwhile (stop
    /// working on it; nothing was stored).
    pub async fn ack_with_result(
        &self,
        queue: &str,
        receipt: &str,
        result: &Value,
    ) -> Result<(), Error> {
        let body = AckBody {
            result: Some(result.clone()),
        };
        let _: Value = self.verb(queue, receipt, "ack", Some(&body)).await?;
        Ok(())
    }

    /// `POST /v1/queues/{queue}/reservations/ack`: ends many reservations in one request, each
    /// as [`ack`](Self::ack) (or [`ack_with_result`](Self::ack_with_result) when it carries a
    /// result) would, answered one by one in the order sent: a lost reservation is an outcome
    /// with `ok: false` and its `error` (`receipt_not_current`, `cancelled`, …), not a failed
    /// request. 1 to 1,000 acks; the results together within the ack route's body limit.
    pub async fn ack_many(&self, queue: &str, acks: Vec<AckItem>) -> Result<AckedMany, Error> {
        let body = AckManyBody { acks };
        self.post(
            &path(&["queues", queue, "reservations", "ack"]),
            Some(&body),
        )
        .await
    }

    // ---- tasks (ADR 0380) ----

    /// `GET /v1/queues/{queue}/tasks/{id}`: the task's record (state, attempts, times, progress,
    /// last error, result); 404 `no_task` ([`Error::is_not_found`]) when none has this id.
    /// With `wait`, the gateway answers once the task ends, or as it is after the wait (at most
    /// 60 s, and within the gateway's request deadline): check `state` to tell which.
    pub async fn task(
        &self,
        queue: &str,
        id: &str,
        wait: Option<Duration>,
    ) -> Result<TaskJson, Error> {
        let mut query = Vec::new();
        let mut timeout = self.request_timeout;
        if let Some(w) = wait.filter(|w| !w.is_zero()) {
            query.push(("wait_seconds", format!("{}", w.as_secs_f64())));
            timeout += w;
        }
        let request = self
            .request(Method::GET, &path(&["queues", queue, "tasks", id]))
            .query(&query)
            .timeout(timeout);
        let response = self.send(request).await?;
        self.read(response).await
    }

    /// `DELETE /v1/queues/{queue}/tasks/{id}`: cancels the task (`cancelled` when it had not
    /// started, `cancel_requested` when it runs, `finished` when it had ended); 404 `no_task`.
    pub async fn cancel_task(&self, queue: &str, id: &str) -> Result<Cancelled, Error> {
        self.delete(&path(&["queues", queue, "tasks", id])).await
    }

    /// `POST /v1/queues/{queue}/tasks/cancel` with `ids` (1 to 1000): one answer per id, in
    /// order, in `results`.
    pub async fn cancel_tasks(&self, queue: &str, ids: &[String]) -> Result<CancelAnswer, Error> {
        let body = CancelBody {
            ids: Some(ids.to_vec()),
            all_waiting: None,
        };
        self.post(&path(&["queues", queue, "tasks", "cancel"]), Some(&body))
            .await
    }

    /// `POST /v1/queues/{queue}/tasks/cancel` with `all_waiting`: cancels every scheduled and
    /// waiting task; how many were removed (`purged`).
    pub async fn cancel_all_waiting(&self, queue: &str) -> Result<CancelAnswer, Error> {
        let body = CancelBody {
            ids: None,
            all_waiting: Some(true),
        };
        self.post(&path(&["queues", queue, "tasks", "cancel"]), Some(&body))
            .await
    }

    /// `GET /v1/queues/{queue}/events`: the queue's task ends as SSE frames (`event` the end:
    /// `completed`, `failed`, `dead`, `cancelled`; `id` the cursor; `data` the event as JSON),
    /// after `after` when given, else only the ends from now on. A `gap` frame says the events
    /// after `after` were trimmed; the stream goes on from the oldest kept. Resume after a
    /// disconnect with the last frame's id.
    pub async fn queue_events(
        &self,
        queue: &str,
        after: Option<&str>,
    ) -> Result<EventStream, Error> {
        let mut request = self
            .request(Method::GET, &path(&["queues", queue, "events"]))
            .header(header::ACCEPT, "text/event-stream");
        if let Some(id) = after {
            request = request.header("last-event-id", id);
        }
        let response = self.send(request).await?;
        Ok(EventStream::new(response, self.base.clone()))
    }

    /// `GET /v1/queues/{queue}/events/page`: up to `limit` (1 to 1,000; `None`: 100) of the
    /// queue's task ends after `after` (`None`: from the oldest kept), read without waiting. Page
    /// forward with the answer's `cursor`; `gap` says ends after `after` were trimmed away.
    pub async fn queue_events_page(
        &self,
        queue: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<EventsPage, Error> {
        let mut query = Vec::new();
        if let Some(after) = after {
            query.push(("after", after.to_owned()));
        }
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        self.get(&path(&["queues", queue, "events", "page"]), &query)
            .await
    }

    /// `GET /v1/queues/{queue}/retention`: what the queue keeps of finished tasks and events.
    pub async fn retention(&self, queue: &str) -> Result<RetentionJson, Error> {
        self.get(&path(&["queues", queue, "retention"]), &[]).await
    }

    /// `PUT /v1/queues/{queue}/retention`: sets the kinds `body` names (the others stay); the
    /// retention now in force.
    pub async fn set_retention(
        &self,
        queue: &str,
        body: &RetentionBody,
    ) -> Result<RetentionJson, Error> {
        self.write(
            Method::PUT,
            &path(&["queues", queue, "retention"]),
            Some(body),
            self.request_timeout,
        )
        .await
    }

    /// `…/nack`: back into the queue (after `delay_seconds`), or to the dead letters at its last
    /// attempt (`dead_lettered`).
    pub async fn nack(&self, queue: &str, receipt: &str, body: &NackBody) -> Result<Nacked, Error> {
        self.verb(queue, receipt, "nack", Some(body)).await
    }

    /// `…/fail`: straight to the dead letters, with `reason` as its last error.
    pub async fn fail(&self, queue: &str, receipt: &str, body: &FailBody) -> Result<(), Error> {
        let _: Value = self.verb(queue, receipt, "fail", Some(body)).await?;
        Ok(())
    }

    /// `…/extend`: the reservation lasts `visibility_seconds` from now.
    pub async fn extend(&self, queue: &str, receipt: &str, body: &ExtendBody) -> Result<(), Error> {
        let _: Value = self.verb(queue, receipt, "extend", Some(body)).await?;
        Ok(())
    }

    /// `…/progress`: stores any JSON document (at most 64 KiB) as the delivery's progress, shown
    /// by [`in_flight`](Self::in_flight).
    pub async fn progress(
        &self,
        queue: &str,
        receipt: &str,
        progress: &Value,
    ) -> Result<(), Error> {
        let _: Value = self
            .verb(queue, receipt, "progress", Some(progress))
            .await?;
        Ok(())
    }

    /// `GET /v1/queues/{queue}/in-flight`: the reservations, soonest deadline first, without
    /// receipts.
    pub async fn in_flight(&self, queue: &str, limit: Option<u64>) -> Result<InFlightList, Error> {
        self.get(&path(&["queues", queue, "in-flight"]), &limit_query(limit))
            .await
    }

    /// `GET /v1/queues/{queue}/dead-letters`: the oldest dead letters (each with the `ref` that
    /// names it to [`requeue`](Self::requeue)) and how many there are.
    pub async fn dead_letters(
        &self,
        queue: &str,
        limit: Option<u64>,
    ) -> Result<DeadLetterList, Error> {
        self.get(
            &path(&["queues", queue, "dead-letters"]),
            &limit_query(limit),
        )
        .await
    }

    /// `POST /v1/queues/{queue}/dead-letters/requeue`: the oldest `limit`, or exactly the `refs`
    /// named, back into the queue at once; `missing` names the refs no longer dead.
    pub async fn requeue(&self, queue: &str, body: &RequeueBody) -> Result<Requeued, Error> {
        self.post(
            &path(&["queues", queue, "dead-letters", "requeue"]),
            Some(body),
        )
        .await
    }

    /// `POST /v1/queues/{queue}/pause`: no reservation until [`resume`](Self::resume).
    pub async fn pause(&self, queue: &str) -> Result<PauseState, Error> {
        self.post(&path(&["queues", queue, "pause"]), None::<&Value>)
            .await
    }

    /// `POST /v1/queues/{queue}/resume`.
    pub async fn resume(&self, queue: &str) -> Result<PauseState, Error> {
        self.post(&path(&["queues", queue, "resume"]), None::<&Value>)
            .await
    }

    /// `PUT /v1/queues/{queue}/rate-limit`: the queue's stats with the new limit.
    pub async fn set_rate_limit(
        &self,
        queue: &str,
        limit: &RateLimitBody,
    ) -> Result<QueueStatsJson, Error> {
        self.write(
            Method::PUT,
            &path(&["queues", queue, "rate-limit"]),
            Some(limit),
            self.request_timeout,
        )
        .await
    }

    /// `DELETE /v1/queues/{queue}/rate-limit`: the queue's stats without a limit.
    pub async fn clear_rate_limit(&self, queue: &str) -> Result<QueueStatsJson, Error> {
        self.delete(&path(&["queues", queue, "rate-limit"])).await
    }

    /// `GET /v1/workers`: the registered workers (of one automation type).
    pub async fn workers(&self, automation_type: Option<&str>) -> Result<WorkerList, Error> {
        let query: Vec<(&str, String)> = automation_type
            .map(|t| vec![("automation_type", t.to_string())])
            .unwrap_or_default();
        self.get("/v1/workers", &query).await
    }

    // ---- schedules ----

    /// `GET /v1/schedules`: every schedule, by name.
    pub async fn schedules(&self) -> Result<ScheduleList, Error> {
        self.get("/v1/schedules", &[]).await
    }

    /// `GET /v1/schedules/{name}`; 404 when there is none.
    pub async fn schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.get(&path(&["schedules", name]), &[]).await
    }

    /// `PUT /v1/schedules/{name}`: stores the document (`cron`, `queue`, `timezone`?,
    /// `payload`?, `priority`?, `catch_up`?, `enabled`?); the scheduler of any gateway fires it.
    pub async fn put_schedule(&self, name: &str, spec: &Value) -> Result<Schedule, Error> {
        self.write(
            Method::PUT,
            &path(&["schedules", name]),
            Some(spec),
            self.request_timeout,
        )
        .await
    }

    /// `DELETE /v1/schedules/{name}`: `deleted` is false when there was none.
    pub async fn delete_schedule(&self, name: &str) -> Result<Deleted, Error> {
        self.delete(&path(&["schedules", name])).await
    }

    /// `POST /v1/webhooks`: subscribes a URL to run and task ends (ADR 0395). The answer's
    /// `secret` is shown this once.
    pub async fn create_webhook(&self, request: &CreateWebhook) -> Result<CreatedWebhook, Error> {
        self.write(
            Method::POST,
            "/v1/webhooks",
            Some(request),
            self.request_timeout,
        )
        .await
    }

    /// `GET /v1/webhooks`: every subscription, oldest first, without secrets.
    pub async fn webhooks(&self) -> Result<WebhookList, Error> {
        self.get("/v1/webhooks", &[]).await
    }

    /// `GET /v1/webhooks/{id}`; 404 `unknown_webhook` when there is none.
    pub async fn webhook(&self, id: &str) -> Result<Webhook, Error> {
        self.get(&path(&["webhooks", id]), &[]).await
    }

    /// `DELETE /v1/webhooks/{id}`: `deleted` is false when there was none.
    pub async fn delete_webhook(&self, id: &str) -> Result<WebhookDeleted, Error> {
        self.delete(&path(&["webhooks", id])).await
    }

    /// `GET /v1/webhooks/{id}/deliveries`: the delivery log, newest first.
    pub async fn webhook_deliveries(&self, id: &str) -> Result<DeliveryLog, Error> {
        self.get(&path(&["webhooks", id, "deliveries"]), &[]).await
    }

    async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        let request = self
            .request(Method::DELETE, path)
            .header(header::CONTENT_TYPE, "application/json")
            .timeout(self.request_timeout);
        let response = self.send(request).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return serde_json::from_value(Value::Null).map_err(|e| Error::Decode {
                reason: e.to_string(),
            });
        }
        self.read(response).await
    }
}

fn limit_query(limit: Option<u64>) -> Vec<(&'static str, String)> {
    limit
        .map(|n| vec![("limit", n.to_string())])
        .unwrap_or_default()
}

/// `path?query`, encoded as reqwest encodes a `.query(…)` (the write helpers take a path only).
fn with_query(path: &str, query: &[(&str, String)]) -> String {
    if query.is_empty() {
        return path.to_string();
    }
    let pairs: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    format!("{path}?{}", pairs.join("&"))
}

/// A refused request: the status, the gateway's error body and headers.
async fn refusal(response: Response) -> Error {
    let status = response.status().as_u16();
    let headers = response.headers();
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let header_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body: Value = response
        .bytes()
        .await
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Error::Refused {
        status,
        error: text("error"),
        message: text("message"),
        request_id: text("request_id").or(header_id),
        retry_after,
        body,
    }
}
