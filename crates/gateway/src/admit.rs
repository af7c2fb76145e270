//! Admission of a matched route, before its handler runs: the principal the authenticator finds
//! (the token file's bearer token, or an application's own, ADR 0368) and its right (ADR 0180), `Content-Type: application/json` on writes and the body limit (ADR 0182), the
//! token's namespace or queue scope (ADR 0181), the cap on open SSE streams (ADR 0183), and
//! stream tickets in place of the bearer header on the stream route (ADR 0260), per-token stream
//! quotas, and the cut of a held request (SSE stream, long poll) whose principal was revoked
//! (ADR 0354).
//!
//! Which right and scope each route needs is declared once, in the route table (`routes`); the
//! rules are applied here, so handlers stay free of policy, and a `/v1` route without an entry in
//! the table is refused (fail closed).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use axum::RequestExt;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::auth::{AuthError, Authenticator, Principal, Right};
use super::error::ApiError;
use super::metrics::AuthLabels;
use super::routes::{Route, Rules, Touches};
use super::tickets::{TICKET_PARAM, Tickets};

/// The authenticator in force and what admission keeps of its outcomes.
#[derive(Clone)]
pub struct Authn {
    pub authenticator: Arc<dyn Authenticator>,
    /// `/metrics` without credentials.
    pub metrics_public: bool,
    /// (principal name or "-", outcome) → requests. A token file bounds the label set by its
    /// names; an application's authenticator is asked to keep its names few (ADR 0368).
    pub counts: Family<AuthLabels, Counter>,
}

impl std::fmt::Debug for Authn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authn")
            .field("metrics_public", &self.metrics_public)
            .finish_non_exhaustive()
    }
}

impl Authn {
    pub fn new(authenticator: Arc<dyn Authenticator>, metrics_public: bool) -> Authn {
        Authn {
            authenticator,
            metrics_public,
            counts: Family::default(),
        }
    }

    fn count(&self, principal: Option<&str>, outcome: &'static str) {
        self.counts
            .get_or_create(&AuthLabels {
                token: principal.unwrap_or("-").into(),
                outcome: outcome.into(),
            })
            .inc();
    }
}

/// The route whose body may carry a task's result.
pub const ACK_ROUTE: &str = "/v1/queues/{queue}/reservations/{receipt}/ack";
/// The route whose body carries many acks, their results together under the ack route's limit.
pub const ACK_MANY_ROUTE: &str = "/v1/queues/{queue}/reservations/ack";

/// Room for the JSON around a result in an ack's body (ADR 0380: `max_result_bytes` + 64 KiB).
pub const ACK_BODY_SLACK: usize = 64 * 1024;

/// What admission needs.
#[derive(Debug)]
pub struct Admit {
    /// `None`: no authenticator, every route open (loopback only, or `--insecure-no-auth`).
    pub auth: Option<Authn>,
    pub max_body_bytes: usize,
    /// The body limit of the ack route, which carries a task's result (ADR 0380): the
    /// backend's `max_result_bytes` plus room for the JSON around it, and never less than
    /// `max_body_bytes`.
    pub ack_body_bytes: usize,
    pub streams: Arc<Semaphore>,
    pub max_streams: usize,
    /// Open SSE streams per token: one token cannot take the whole `streams` cap.
    pub streams_per_token: Arc<PerToken>,
    /// Live stream tickets (ADR 0260).
    pub tickets: Arc<Tickets>,
    /// The right and scope of each route, from the route table.
    pub rules: Rules,
}

/// The token a request was admitted with, in the response's extensions for the request log.
#[derive(Debug, Clone)]
pub struct TokenName(pub String);

/// The principal's scope, in the request's extensions, for routes that filter what they list by
/// it (`GET /v1/queues`). Absent without an authenticator: everything is visible.
#[derive(Debug, Clone)]
pub struct Scope(pub Arc<Principal>);

impl Scope {
    /// May the token touch `queue`?
    pub fn queue_allowed(&self, queue: &str) -> bool {
        self.0.queue_allowed(queue)
    }
}

/// What a route touches, for the scope check.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// Open to everyone (`/healthz`, `/readyz`).
    Open,
    /// `/metrics`: the `metrics` right unless `--metrics-public`.
    Metrics,
    /// Runs and streams of these namespaces (`""`: the default one).
    Namespaces(Vec<String>),
    /// A queue, its dead letters, or the workers of that automation type.
    Queue(String),
    /// Lists that span every queue (workers without `automation_type`).
    AllQueues,
    /// The queue listing: any reader, filtered to the token's queues by the handler.
    QueueList,
    /// Every namespace and every queue (webhook subscriptions).
    Everything,
    /// A `/v1` route with no rule: refused.
    Unknown,
}

pub async fn admit(State(admit): State<Arc<Admit>>, request: Request, next: Next) -> Response {
    match admit_inner(&admit, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

async fn admit_inner(
    admit: &Admit,
    mut request: Request,
    next: Next,
) -> Result<Response, Response> {
    let route = crate::route_of(&request).unwrap_or_default();
    let write = !matches!(*request.method(), Method::GET | Method::HEAD);
    let rule = admit.rules.get(request.method(), &route);
    // Subscribed before the principal is found, so a revocation between the two is still seen
    // by the wait (it asks the authenticator again when it starts).
    let changes = admit.auth.as_ref().map(|auth| {
        auth.authenticator
            .revocations()
            .map(crate::auth::Revocations::subscribe)
    });
    let token = match &admit.auth {
        Some(auth) => match ticket_of(&request, rule.as_ref()) {
            Some(ticket) => Some((
                redeem(auth, &admit.tickets, &ticket, &mut request).await?,
                Right::Read,
            )),
            None => {
                let (parts, body) = request.into_parts();
                let found = authenticate(auth, &parts, &route, rule.as_ref(), write).await;
                request = Request::from_parts(parts, body);
                found?
            }
        },
        None => None,
    };
    let mut body = Bytes::new();
    if write {
        check_content_type(&request)?;
        let limit = if route == ACK_ROUTE || route == ACK_MANY_ROUTE {
            admit.ack_body_bytes
        } else {
            admit.max_body_bytes
        };
        body = read_body(&mut request, limit).await?;
    }
    let mut standing = None;
    if let (Some(auth), Some((token, right)), Some(changes)) = (&admit.auth, &token, changes) {
        let target = target(rule.as_ref(), &mut request, &body).await?;
        if let Err(e) = authorize(token, &target) {
            auth.count(Some(token.name()), "forbidden");
            return Err(e.into_response());
        }
        auth.count(Some(token.name()), "allowed");
        tracing::debug!(token = %token.name(), %route, "admitted");
        request.extensions_mut().insert(Scope(token.clone()));
        let held = Standing {
            authenticator: auth.authenticator.clone(),
            changes,
            principal: token.clone(),
            right: *right,
            target: Arc::new(target),
        };
        request.extensions_mut().insert(Revocation(held.clone()));
        standing = Some(held);
    }
    let token = token.map(|(token, _)| token);
    let streaming = rule.is_some_and(|rule| rule.stream);
    let quota = match (&token, streaming) {
        (Some(token), true) => match admit.streams_per_token.try_take(token.name()) {
            Some(held) => Some(held),
            None => {
                return Err(ApiError::too_many(
                    "stream_quota_exceeded",
                    format!(
                        "token {:?} already holds {} open SSE streams \
                         (limits.max_streams_per_token); close one or retry later",
                        token.name(),
                        admit.streams_per_token.limit()
                    ),
                    1,
                )
                .with("limit", admit.streams_per_token.limit())
                .into_response());
            }
        },
        _ => None,
    };
    let permit = if streaming {
        match admit.streams.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                return Err(ApiError::busy(
                    "too_many_streams",
                    format!(
                        "this gateway already serves {} SSE streams (limits.max_streams); retry later",
                        admit.max_streams
                    ),
                    1,
                )
                .into_response());
            }
        }
    } else {
        None
    };
    if write {
        *request.body_mut() = Body::from(body);
    }
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        // A handler's 401 (a long poll whose token was revoked) asks for a bearer token like
        // admission's own.
        response
            .headers_mut()
            .entry(header::WWW_AUTHENTICATE)
            .or_insert(HeaderValue::from_static("Bearer"));
    }
    if let Some(held) = standing.filter(|_| streaming && is_event_stream(&response)) {
        response = cut_when_revoked(response, held);
    }
    if let Some(permit) = permit {
        // The stream counts until its body is dropped: ended, shut down or disconnected.
        response = response.map(|b| {
            Body::new(b.map_frame(move |frame| {
                let _ = (&permit, &quota);
                frame
            }))
        });
    }
    if let Some(token) = token {
        response
            .extensions_mut()
            .insert(TokenName(token.name().to_string()));
    }
    Ok(response)
}

/// The principal of the request if the route needs one; 401 without credentials or with unknown
/// ones, 503 when the authenticator cannot decide, 403 without the route's right.
async fn authenticate(
    auth: &Authn,
    request: &axum::http::request::Parts,
    route: &str,
    rule: Option<&Route>,
    write: bool,
) -> Result<Option<(Arc<Principal>, Right)>, Response> {
    let right = match rule {
        Some(Route {
            right: Some(Right::Metrics),
            ..
        }) if auth.metrics_public => return Ok(None),
        Some(rule) => match rule.right {
            Some(right) => right,
            None => return Ok(None),
        },
        // A `/v1` route without a rule still needs credentials, and is then refused by its
        // scope; anything else outside the table (the console's pages) is open.
        None if route.starts_with("/v1") => {
            if write {
                Right::Write
            } else {
                Right::Read
            }
        }
        None => return Ok(None),
    };
    let principal = match auth.authenticator.authenticate(request).await {
        Ok(principal) => principal,
        Err(AuthError::Unauthenticated(message)) => {
            auth.count(None, "unauthenticated");
            return Err(unauthenticated(&message));
        }
        Err(AuthError::Unavailable(message)) => {
            auth.count(None, "unavailable");
            return Err(ApiError::busy("auth_unavailable", message, 1).into_response());
        }
    };
    if !principal.has(right) {
        auth.count(Some(principal.name()), "forbidden");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "token {:?} lacks the `{}` right this route needs",
                principal.name(),
                right.as_str()
            ),
        )
        .into_response());
    }
    Ok(Some((principal, right)))
}

/// The stream ticket of a stream request that has no `Authorization` header.
fn ticket_of(request: &Request, rule: Option<&Route>) -> Option<String> {
    if !rule.is_some_and(|rule| rule.stream)
        || request.headers().contains_key(header::AUTHORIZATION)
    {
        return None;
    }
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(request.uri()).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == TICKET_PARAM)
        .map(|(_, v)| v)
}

/// The principal behind a live ticket, if the request addresses the run the ticket was issued for
/// and the authenticator still vouches for the principal, with its `read` right. Every refusal is
/// a 401: the page answers it by asking for a new ticket.
async fn redeem(
    auth: &Authn,
    tickets: &Tickets,
    ticket: &str,
    request: &mut Request,
) -> Result<Arc<Principal>, Response> {
    let refuse = |message: &str| {
        auth.count(None, "unauthenticated");
        unauthenticated(message)
    };
    let Some(grant) = tickets.check(ticket, std::time::Instant::now()) else {
        return Err(refuse(
            "the stream ticket is unknown or expired: POST /v1/stream-tickets for a new one",
        ));
    };
    let run_id = request
        .extract_parts::<Path<HashMap<String, String>>>()
        .await
        .ok()
        .and_then(|Path(p)| p.get("run_id").cloned());
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(request.uri())
        .map_err(|e| ApiError::bad_request("query", e.body_text()).into_response())?;
    let one = |name: &str| {
        let mut found = pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone());
        let first = found.next();
        (first, found.next().is_none())
    };
    let (session, single_session) = one("session");
    let (namespace, single_namespace) = one("namespace");
    let same = run_id.as_deref() == Some(grant.run_id.as_str())
        && single_session
        && single_namespace
        && session == grant.session
        && namespace == grant.namespace;
    if !same {
        return Err(refuse(
            "the stream ticket was issued for another run (run id, ?session= and ?namespace= \
             must be those it was asked for)",
        ));
    }
    // The ticket keeps the principal that asked for it, and the authenticator says whether it
    // still stands: a token file's token that kept its name but got a new secret (rotation after
    // a leak) does not vouch for the old secret's tickets.
    match auth.authenticator.current(&grant.principal).await {
        Some(token) if token.has(Right::Read) => Ok(token),
        _ => Err(refuse(
            "the token that asked for this stream ticket is no longer valid (not in the token \
             file, or revoked)",
        )),
    }
}

/// What a held request knows of its admission, to tell after a revocation whether its principal
/// still admits it: the principal, the right the route needed and what it touches. A principal
/// the authenticator no longer vouches for (a token removed from the file or given another
/// secret), or whose rights or scopes no longer cover the request, counts as revoked.
#[derive(Clone)]
pub struct Standing {
    authenticator: Arc<dyn Authenticator>,
    /// `None`: the authenticator never revokes.
    changes: Option<watch::Receiver<()>>,
    principal: Arc<Principal>,
    right: Right,
    target: Arc<Target>,
}

impl std::fmt::Debug for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standing")
            .field("principal", &self.principal.name())
            .field("right", &self.right)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Standing {
    async fn still_admitted(&self) -> bool {
        self.authenticator
            .current(&self.principal)
            .await
            .is_some_and(|now| now.has(self.right) && authorize(&now, &self.target).is_ok())
    }

    /// Resolves when the authenticator revokes the request's principal; never for one that
    /// offers no revocations.
    async fn revoked(mut self) {
        let Some(mut changes) = self.changes.take() else {
            return std::future::pending::<()>().await;
        };
        // The credentials in force now first: a change may have come between admission and
        // this wait.
        loop {
            changes.borrow_and_update();
            if !self.still_admitted().await {
                tracing::info!(token = %self.principal.name(), "token revoked: ending its held request");
                return;
            }
            if changes.changed().await.is_err() {
                // The credentials can no longer change: nothing will revoke this request.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// In the request's extensions when it was admitted with a token: handlers that hold a request
/// open (the long poll) wait on [`until_revoked`] next to their own work.
#[derive(Debug, Clone)]
pub struct Revocation(Standing);

/// Resolves, with the 401 to answer, when the principal that admitted the request is revoked (a
/// reload of the token file); never without an authenticator (no `--auth`).
pub async fn until_revoked(revocation: Option<axum::Extension<Revocation>>) -> ApiError {
    match revocation {
        Some(axum::Extension(Revocation(standing))) => standing.revoked().await,
        None => std::future::pending::<()>().await,
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        "the token was revoked while the request waited (the token file was re-read, or the \
         authenticator withdrew it); nothing was reserved: retry with current credentials",
    )
}

fn is_event_stream(response: &Response) -> bool {
    response.status().is_success()
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// The frame that ends a stream whose token was revoked: the end frame every stream ends with,
/// with the reason as its data, so a client knows not to reconnect with the same credentials.
fn revoked_end_frame() -> Bytes {
    Bytes::from(switchyard_core::stream::sse::event_frame(
        "end",
        &json!({ "reason": "token_revoked" }),
        None,
    ))
}

type Cut = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Ends an SSE response with [`revoked_end_frame`] as soon as its token is revoked; until then
/// its frames pass unchanged. One wrapper for every streaming route, applied here so no handler
/// has to remember it.
fn cut_when_revoked(response: Response, standing: Standing) -> Response {
    let (parts, body) = response.into_parts();
    let start: (axum::body::BodyDataStream, Cut) =
        (body.into_data_stream(), Box::pin(standing.revoked()));
    let frames = futures::stream::unfold(Some(start), |state| async move {
        let (mut frames, mut cut) = state?;
        tokio::select! {
            // Revocation first: once revoked, not one more event is sent.
            biased;
            () = &mut cut => Some((Ok(revoked_end_frame()), None)),
            frame = frames.next() => frame.map(|frame| (frame, Some((frames, cut)))),
        }
    });
    Response::from_parts(parts, Body::from_stream(frames))
}

/// Counts what each token holds of a shared cap (open SSE streams), so one token cannot take it
/// all. Keyed by token name: the names come from the token file, so the table is bounded by it,
/// and an entry leaves the table when its count falls to zero.
#[derive(Debug)]
pub struct PerToken {
    limit: usize,
    held: Mutex<HashMap<String, usize>>,
}

impl PerToken {
    pub fn new(limit: usize) -> Arc<PerToken> {
        Arc::new(PerToken {
            limit,
            held: Mutex::new(HashMap::new()),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        match self.held.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// One more for `name`, or `None` when it holds its limit already.
    fn try_take(self: &Arc<Self>, name: &str) -> Option<Held> {
        let mut table = self.table();
        let count = table.entry(name.to_string()).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Held {
            table: self.clone(),
            name: name.to_string(),
        })
    }
}

/// One unit of a token's quota, given back on drop.
#[derive(Debug)]
struct Held {
    table: Arc<PerToken>,
    name: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut table = self.table.table();
        if let Some(count) = table.get_mut(&self.name) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                table.remove(&self.name);
            }
        }
    }
}

fn unauthenticated(message: &str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Writes must say `Content-Type: application/json`: a browser sends that cross-site only after a
/// CORS preflight, so plain form posts and `text/plain` beacons are refused.
fn check_content_type(request: &Request) -> Result<(), Response> {
    let ok = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "writes need `Content-Type: application/json` (an empty body too)",
    )
    .with_field("content-type")
    .into_response())
}

fn too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {limit} bytes (limits.max_body_bytes)"),
    )
    .with("limit", limit)
    .into_response()
}

/// Reads the whole body, at most `limit` bytes. A larger body is refused (by its
/// `Content-Length` before a byte is kept); the rest of it is read and dropped, up to
/// [`DRAIN_FACTOR`] times the limit, so the client is still reading when the 413 arrives instead of
/// having its connection reset mid-upload. The whole-request timeout bounds a slow sender.
async fn read_body(request: &mut Request, limit: usize) -> Result<Bytes, Response> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = std::mem::take(request.body_mut());
    let drain_cap = limit.saturating_mul(DRAIN_FACTOR);
    if declared.is_some_and(|n| n > limit as u64) {
        drain(body, drain_cap).await;
        return Err(too_large(limit));
    }
    let mut kept = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            ApiError::bad_request("body", format!("cannot read the body: {e}")).into_response()
        })?;
        if let Ok(data) = frame.into_data() {
            if kept.len().saturating_add(data.len()) > limit {
                drain(body, drain_cap.saturating_sub(kept.len())).await;
                return Err(too_large(limit));
            }
            kept.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(kept))
}

/// How many times the body limit a refused body is still read (and dropped) before the 413.
const DRAIN_FACTOR: usize = 4;

/// Reads and drops up to `cap` bytes of `body`.
async fn drain(mut body: Body, cap: usize) {
    let mut seen = 0usize;
    while seen <= cap {
        match body.frame().await {
            Some(Ok(frame)) => {
                seen = seen.saturating_add(frame.data_ref().map_or(0, |d| d.len()));
            }
            _ => return,
        }
    }
}

/// What the request touches, by its route's rule: the namespace from the query or the body, the
/// queue from the path, the automation type of a worker listing.
async fn target(
    rule: Option<&Route>,
    request: &mut Request,
    body: &Bytes,
) -> Result<Target, Response> {
    let query = |request: &Request, name: &str| -> Result<Vec<String>, Response> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(request.uri())
            .map_err(|e| ApiError::bad_request("query", e.body_text()).into_response())?;
        Ok(pairs
            .into_iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .collect())
    };
    let namespaces = |mut found: Vec<String>| {
        if found.is_empty() {
            found.push(String::new());
        }
        Target::Namespaces(found)
    };
    let Some(rule) = rule else {
        return Ok(Target::Unknown);
    };
    Ok(match rule.touches {
        Touches::Nothing if rule.right == Some(Right::Metrics) => Target::Metrics,
        Touches::Nothing => Target::Open,
        Touches::NamespaceInQuery => namespaces(query(request, "namespace")?),
        Touches::NamespaceInBody => {
            // An unreadable body is the handler's 400; it is checked against the default
            // namespace meanwhile.
            let named = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("namespace").and_then(Value::as_str).map(String::from));
            namespaces(named.into_iter().collect())
        }
        Touches::QueueInPath(param) => {
            let Path(params) = request
                .extract_parts::<Path<HashMap<String, String>>>()
                .await
                .map_err(|e| ApiError::bad_request(param, e.body_text()).into_response())?;
            Target::Queue(params.get(param).cloned().unwrap_or_default())
        }
        Touches::QueueList => Target::QueueList,
        Touches::AllQueues => Target::AllQueues,
        Touches::Everything => Target::Everything,
        Touches::WorkersInQuery => match query(request, "automation_type")?.pop() {
            Some(t) => Target::Queue(t),
            None => Target::AllQueues,
        },
    })
}

fn authorize(token: &Principal, target: &Target) -> Result<(), ApiError> {
    let forbidden = |what: String| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("token {:?} may not touch {what}", token.name()),
        )
    };
    match target {
        Target::Open | Target::Metrics | Target::QueueList => Ok(()),
        Target::Namespaces(list) => match list.iter().find(|n| !token.namespace_allowed(n)) {
            None => Ok(()),
            Some(n) if n.is_empty() => Err(forbidden(
                "the default namespace; pass ?namespace= (or \"namespace\") within its scope"
                    .into(),
            )),
            Some(n) => Err(forbidden(format!("namespace {n:?}"))),
        },
        Target::Queue(q) if token.queue_allowed(q) => Ok(()),
        Target::Queue(q) => Err(forbidden(format!("queue {q:?}"))),
        Target::AllQueues if token.all_queues() => Ok(()),
        Target::AllQueues => Err(forbidden(
            "every queue (workers without ?automation_type= within its queues, or schedules)"
                .into(),
        )),
        Target::Everything if token.all_queues() && token.all_namespaces() => Ok(()),
        Target::Everything => Err(forbidden(
            "webhooks (they need a token covering every namespace and every queue)".into(),
        )),
        Target::Unknown => Err(forbidden("this route (no scope rule)".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{TokenSet, digest_hex};

    #[test]
    fn scopes_decide() {
        let text = format!(
            "[[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nnamespaces = [\"a-*\"]\nqueues = [\"jobs\"]\nrights = [\"read\"]\n",
            digest_hex("s")
        );
        let set = TokenSet::parse(&text, "t").expect("parse");
        let t = set.find("s").expect("token");
        assert!(authorize(&t, &Target::Namespaces(vec!["a-1".into()])).is_ok());
        assert!(authorize(&t, &Target::Namespaces(vec!["a-1".into(), "b".into()])).is_err());
        assert!(authorize(&t, &Target::Namespaces(vec![String::new()])).is_err());
        assert!(authorize(&t, &Target::Queue("jobs".into())).is_ok());
        assert!(authorize(&t, &Target::Queue("mail".into())).is_err());
        assert!(authorize(&t, &Target::AllQueues).is_err());
        assert!(authorize(&t, &Target::Unknown).is_err());
        assert!(authorize(&t, &Target::Open).is_ok());
    }
}
