//! The gateway's HTTP API as operator commands use it (`--server`): bearer token from
//! `--token-file` or `SWITCHYARD_TOKEN`, errors turned into the documented exit codes.

use std::path::Path;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use switchyard_core::keys::quote;

use super::{Failure, NOT_FOUND, REFUSED};

/// How long a connection attempt may take; reads of a stream are not bounded.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one non-streaming request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A gateway reached over HTTP(S).
#[derive(Debug, Clone)]
pub struct Gateway {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// The bearer secret: the first line of `--token-file`, else `SWITCHYARD_TOKEN`.
pub fn token(file: Option<&Path>) -> Result<Option<String>, Failure> {
    let secret = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    NOT_FOUND
                } else {
                    1
                };
                Failure::exit(
                    code,
                    format!("cannot read the token file {}: {e}", path.display()),
                )
            })?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        None => std::env::var("SWITCHYARD_TOKEN").ok(),
    };
    match secret {
        Some(s) if s.is_empty() => Err(Failure::exit(
            1,
            "the token is empty: put the secret `switchyard token new` printed in the token file \
             or SWITCHYARD_TOKEN",
        )),
        other => Ok(other),
    }
}

impl Gateway {
    /// A client of the gateway at `server` (`http://` or `https://`), trusting the system's
    /// roots plus `ca` (a PEM file) when given.
    pub fn new(server: &str, token: Option<String>, ca: Option<&Path>) -> Result<Self, Failure> {
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::exit(
                1,
                format!("--server {server:?} must start with http:// or https://"),
            ));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("switchyard/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = ca {
            let pem = std::fs::read(path).map_err(|e| {
                Failure::exit(
                    NOT_FOUND,
                    format!("cannot read --server-ca {}: {e}", path.display()),
                )
            })?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Failure::exit(
                    1,
                    format!(
                        "--server-ca {} is not a PEM certificate: {e}",
                        path.display()
                    ),
                )
            })?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder
            .build()
            .map_err(|e| Failure::exit(1, format!("cannot build the HTTP client: {e}")))?;
        Ok(Gateway { http, base, token })
    }

    /// `/v1/<segments…>` with every segment percent-encoded.
    pub fn path(segments: &[&str]) -> String {
        let mut path = String::from("/v1");
        for s in segments {
            path.push('/');
            path.push_str(&quote(s));
        }
        path
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// `GET path?query` → the JSON body.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Failure> {
        let request = self
            .request(Method::GET, path)
            .query(query)
            .timeout(REQUEST_TIMEOUT);
        json_of(self.send(request).await?).await
    }

    /// `POST path` with a JSON body → the JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        let request = self
            .request(Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(REQUEST_TIMEOUT);
        json_of(self.send(request).await?).await
    }

    /// `PUT path` with a JSON body → the JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        let request = self
            .request(Method::PUT, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(REQUEST_TIMEOUT);
        json_of(self.send(request).await?).await
    }

    /// `DELETE path` → the JSON body (`null` when the answer has none).
    pub async fn delete(&self, path: &str) -> Result<Value, Failure> {
        // The gateway takes writes only with a JSON content type, an empty body included.
        let request = self
            .request(Method::DELETE, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(REQUEST_TIMEOUT);
        let response = self.send(request).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        json_of(response).await
    }

    /// Opens an SSE stream (no overall timeout), resuming after `last_event_id`. The flag says
    /// whether trying again later may help: no connection, a 5xx (shutting down, too many
    /// streams) or 429; never a refused or invalid request.
    pub async fn stream(
        &self,
        path: &str,
        query: &[(&str, String)],
        last_event_id: Option<&str>,
    ) -> Result<Response, (Failure, bool)> {
        let mut request = self
            .request(Method::GET, path)
            .query(query)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request
            .send()
            .await
            .map_err(|e| (self.unreachable(&e), true))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry = status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS;
        Err((failure_of(response).await, retry))
    }

    fn unreachable(&self, e: &reqwest::Error) -> Failure {
        Failure::exit(
            1,
            format!(
                "cannot reach the gateway at {}: {}; is `switchyard serve` running there?",
                self.base,
                error_chain(e)
            ),
        )
    }

    /// Sends; a non-2xx answer becomes a [`Failure`] with the gateway's message.
    async fn send(&self, request: RequestBuilder) -> Result<Response, Failure> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(failure_of(response).await)
    }
}

/// The body as JSON.
async fn json_of(response: Response) -> Result<Value, Failure> {
    let bytes = response
        .bytes()
        .await
        .map_err(|e| Failure::exit(1, format!("the gateway's answer broke off: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::exit(
            1,
            format!("the gateway answered something else than JSON: {e}"),
        )
    })
}

/// A refused request as a failure: 404 → [`NOT_FOUND`], 401 and 403 → [`REFUSED`], else 1;
/// the message is the gateway's, with its request id for its log.
pub async fn failure_of(response: Response) -> Failure {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
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
            .unwrap_or("")
            .to_string()
    };
    let mut message = format!("the gateway answered {status}");
    if !text("error").is_empty() {
        message.push_str(&format!(" {}", text("error")));
    }
    if !text("message").is_empty() {
        message.push_str(&format!(": {}", text("message")));
    }
    if let Some(secs) = retry_after {
        message.push_str(&format!(" (retry after {secs} s)"));
    }
    if !text("request_id").is_empty() {
        message.push_str(&format!(" [request id {}]", text("request_id")));
    }
    let code = match status {
        StatusCode::NOT_FOUND => NOT_FOUND,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            message.push_str(
                "; pass a token of the gateway's token file with --token-file or SWITCHYARD_TOKEN",
            );
            REFUSED
        }
        _ => 1,
    };
    Failure::Exit { code, message }
}

/// An error and its sources, for a one-line message (reqwest's own text omits the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
