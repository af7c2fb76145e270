//! The layers around every route, outermost first: the request id (`x-request-id`, echoed when
//! sane, else generated), the error finisher (every error JSON with that id; server-side details
//! logged with it, never sent — ADR 0184), panic to clean 500, the loopback `Host` check against
//! DNS rebinding and the CORS allow-list (ADR 0182), and the whole-request timeout (ADR 0183).
//! Requests on a connection of the listener's health reserve are let through to `/healthz` and
//! `/readyz` only (ADR 0354).

use std::any::Any;
use std::net::IpAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;

use super::admit::TokenName;
use super::error::{ApiError, ErrorDetail};

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest error body the finisher rewrites; handlers' errors are far smaller.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Settings of the outer layers.
#[derive(Debug, Clone)]
pub struct Edge {
    /// Refuse a `Host` that is not a loopback name or address (the listener is on loopback).
    pub loopback_only_host: bool,
    /// Browser origins allowed cross-origin calls; empty: CORS off.
    pub cors_origins: Vec<HeaderValue>,
    /// For the message of a 413 raised below the admission layer.
    pub max_body_bytes: usize,
    /// The whole-request deadline of every route but SSE streams.
    pub request_secs: u64,
}

/// Wraps the router in the outer layers.
pub fn wrap(router: Router, edge: &Edge) -> Router {
    let cors = (!edge.cors_origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(edge.cors_origins.clone()))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("last-event-id"),
                X_REQUEST_ID,
            ])
            .expose_headers([X_REQUEST_ID, header::RETRY_AFTER, header::LOCATION])
            .max_age(Duration::from_secs(600))
    });
    router.layer(
        ServiceBuilder::new()
            .layer(from_fn(drop_odd_request_id))
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(from_fn_with_state(edge.clone(), finish))
            .layer(from_fn(health_only))
            .layer(CatchPanicLayer::custom(panic_response))
            .layer(from_fn_with_state(edge.loopback_only_host, check_host))
            .option_layer(cors)
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_secs(edge.request_secs),
            )),
    )
}

/// An incoming `x-request-id` is echoed and logged only if it is short and plain; anything else
/// is replaced by a fresh id (no log injection, no huge headers echoed).
async fn drop_odd_request_id(mut request: Request, next: Next) -> Response {
    let sane = request
        .headers()
        .get(X_REQUEST_ID)
        .map(|v| {
            let b = v.as_bytes();
            !b.is_empty()
                && b.len() <= 128
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.:".contains(c))
        })
        .unwrap_or(true);
    if !sane {
        request.headers_mut().remove(X_REQUEST_ID);
    }
    next.run(request).await
}

/// A connection accepted past `limits.max_connections` (from `limits.health_connections`) serves
/// the probes only: they must answer while the gateway is full, and anything else would take the
/// place kept for them.
async fn health_only(request: Request, next: Next) -> Response {
    let reserved = request
        .extensions()
        .get::<super::server::HealthOnly>()
        .is_some();
    if reserved && !matches!(request.uri().path(), "/healthz" | "/readyz") {
        return ApiError::busy(
            "too_many_connections",
            "the gateway is at limits.max_connections; retry later",
            1,
        )
        .into_response();
    }
    next.run(request).await
}

fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response {
    let text = err
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    ApiError::internal(format!("a handler panicked: {text}")).into_response()
}

/// Every error response leaves as ADR 0081 JSON with the request id; its server-side detail is
/// logged with the id and the token name.
async fn finish(State(edge): State<Edge>, request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let detail = parts.extensions.remove::<ErrorDetail>();
    let token = parts.extensions.get::<TokenName>().map(|t| t.0.clone());
    let token = token.as_deref().unwrap_or("-");
    match &detail {
        Some(ErrorDetail(detail)) => tracing::error!(
            request_id = %id, %method, %path, token, status = status.as_u16(), %detail,
            "request failed"
        ),
        None if status.is_server_error() => tracing::warn!(
            request_id = %id, %method, %path, token, status = status.as_u16(), "request failed"
        ),
        None => tracing::debug!(
            request_id = %id, %method, %path, token, status = status.as_u16(), "request refused"
        ),
    }
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let bytes = axum::body::to_bytes(body, MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
    let mut object = is_json
        .then(|| serde_json::from_slice::<Map<String, Value>>(&bytes).ok())
        .flatten()
        .filter(|o| o.contains_key("error"))
        .unwrap_or_else(|| generic(status, &edge, &mut parts.headers));
    object.insert("request_id".into(), id.into());
    let text = serde_json::to_vec(&Value::Object(object)).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(text))
}

/// The JSON of an error some layer answered without one (axum's extractors, the timeout).
fn generic(
    status: StatusCode,
    edge: &Edge,
    headers: &mut axum::http::HeaderMap,
) -> Map<String, Value> {
    let (code, message) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            "body_too_large",
            format!(
                "the body is larger than {} bytes (limits.max_body_bytes)",
                edge.max_body_bytes
            ),
        ),
        StatusCode::SERVICE_UNAVAILABLE => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(1));
            (
                "timed_out",
                format!(
                    "the request did not finish within {} s (limits.request_secs); a write may \
                     still complete: read before retrying it",
                    edge.request_secs
                ),
            )
        }
        StatusCode::INTERNAL_SERVER_ERROR => ("internal", super::error::INTERNAL_MESSAGE.into()),
        StatusCode::BAD_REQUEST => ("bad_request", "the request cannot be read".into()),
        StatusCode::NOT_FOUND => (
            "no_route",
            "no such route; see the README for the API".into(),
        ),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this route does not take that method".into(),
        ),
        other => (
            "http_error",
            other
                .canonical_reason()
                .unwrap_or("the request was refused")
                .to_string(),
        ),
    };
    let mut object = Map::new();
    object.insert("error".into(), code.into());
    object.insert("message".into(), message.into());
    object
}

/// True for `localhost`, `*.localhost` and loopback addresses, with or without a port.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// On a loopback listener, a request naming another host came through a name that resolves to
/// 127.0.0.1 but is not ours: a DNS-rebinding page. 421 tells an honest client it reached the
/// wrong server.
async fn check_host(State(enabled): State<bool>, request: Request, next: Next) -> Response {
    if enabled {
        let host = request
            .headers()
            .get(header::HOST)
            .map(|v| v.to_str().unwrap_or("\u{0}").to_string())
            .or_else(|| request.uri().authority().map(|a| a.as_str().to_string()));
        if let Some(host) = host
            && !loopback_host(&host)
        {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                "this gateway listens on loopback and answers only Host: localhost or a loopback \
                 address; to serve other hosts, listen on them with --auth",
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.1.2.3:9",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:80",
            "[::2]:80",
            "",
            "127.0.0.1.evil",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
