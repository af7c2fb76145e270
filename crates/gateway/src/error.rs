//! JSON errors and the mapping from `switchyard_core::Error` to HTTP statuses (ADR 0081).
//!
//! A client sees the error kind and a message that says what to do; backend details (keys, SQL,
//! script ids, panic text) travel only in [`ErrorDetail`], which the request-id layer logs with the
//! request's id and strips (ADR 0184).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use switchyard_kit::core::Error;

/// An error response: `{"error": code, "message": …, "field"?: …, …extra}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    extra: Map<String, Value>,
    retry_after: Option<u64>,
    /// The full internal error: logged with the request id, never sent.
    detail: Option<String>,
}

/// The full text of a server-side error, carried in the response's extensions to the layer that
/// logs it with the request id.
#[derive(Debug, Clone)]
pub struct ErrorDetail(pub String);

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            extra: Map::new(),
            retry_after: None,
            detail: None,
        }
    }

    /// A server-side error: the client reads `message`, the log gets `detail`.
    fn hidden(status: StatusCode, code: &'static str, message: &str, detail: String) -> Self {
        let mut e = Self::new(status, code, message);
        e.detail = Some(detail);
        e
    }

    /// 400: the request itself cannot be read (query, path, malformed JSON).
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message).with_field(field)
    }

    /// 422: well-formed JSON that breaks the schema or the event model.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message).with_field(field)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 500: a bug or an impossible state; `detail` is logged, not sent.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::hidden(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            INTERNAL_MESSAGE,
            detail.into(),
        )
    }

    /// 503 + `Retry-After`: the gateway or a backend cannot take this now.
    pub fn busy(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
        e.retry_after = Some(retry_after);
        e
    }

    /// 429 + `Retry-After`: this client holds its share of a limit; other clients are not
    /// affected, and waiting `retry_after` seconds (or releasing what it holds) lets it in.
    pub fn too_many(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, code, message);
        e.retry_after = Some(retry_after);
        e
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The status, code and message a client reads, for one item of a batch answered item by
    /// item (the acks of `POST …/reservations/ack`). A server-side detail is logged here, in the
    /// request's span (so with its request id), and never sent.
    pub fn into_item(self) -> (StatusCode, &'static str, String) {
        if let Some(detail) = &self.detail {
            tracing::error!(error = self.code, detail = %detail, "one item of a batch failed");
        }
        (self.status, self.code, self.message)
    }
}

/// What a client reads for an unexpected server-side failure.
pub const INTERNAL_MESSAGE: &str =
    "the gateway failed unexpectedly; report the request_id to the operator";

/// The service's refusals keep the gateway's statuses and codes: a broken rule is a 422 naming
/// its field, a missing thing a 404, a refusing state a 409 with its details, and a backend
/// failure what the port's error maps to.
impl From<switchyard_service::Error> for ApiError {
    fn from(error: switchyard_service::Error) -> Self {
        use switchyard_service::Error as S;
        match error {
            S::Invalid {
                field,
                code,
                message,
                details,
            } => {
                let mut e = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
                    .with_field(field);
                e.extra = details;
                e
            }
            S::NotFound { code, message } => ApiError::not_found(code, message),
            S::Conflict {
                code,
                message,
                details,
            } => {
                let mut e = ApiError::conflict(code, message);
                e.extra = details;
                e
            }
            S::TooLarge {
                field,
                code,
                message,
                limit,
            } => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
                .with_field(field)
                .with("limit", limit),
            S::Backend(e) => e.into(),
            // `Error` is non-exhaustive: a refusal added later is at least not a success.
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let detail = error.to_string();
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        let internal = StatusCode::INTERNAL_SERVER_ERROR;
        let mut e = match error {
            Error::InvalidInput { field, .. } => return ApiError::invalid(field, detail),
            Error::Unavailable { .. } => ApiError::hidden(
                unavailable,
                "unavailable",
                "a backend did not answer; retry later",
                detail,
            ),
            Error::Contended { .. } => ApiError::hidden(
                unavailable,
                "contended",
                "too many writers on the same data; retry later",
                detail,
            ),
            Error::Closed { .. } => ApiError::hidden(
                unavailable,
                "closed",
                "the gateway is shutting down; retry on another instance or later",
                detail,
            ),
            Error::Corrupt { .. } => ApiError::hidden(
                internal,
                "corrupt",
                "stored data could not be read; report the request_id to the operator",
                detail,
            ),
            Error::Rejected { .. } => ApiError::hidden(
                internal,
                "rejected",
                "a backend refused the operation; report the request_id to the operator",
                detail,
            ),
            Error::Config { .. } => ApiError::hidden(
                internal,
                "config",
                "the gateway is misconfigured; report the request_id to the operator",
                detail,
            ),
            Error::AlreadyExists { what: "run", .. } => {
                return ApiError::conflict("run_exists", detail);
            }
            Error::AlreadyExists { what: "task", .. } => {
                return ApiError::conflict("task_exists", detail);
            }
            Error::AlreadyExists { .. } => return ApiError::conflict("already_exists", detail),
            // The holder of a delivery whose task was cancelled (ADR 0380): stop, do not retry.
            Error::Cancelled { .. } => return ApiError::conflict("cancelled", detail),
            _ => ApiError::internal(detail),
        };
        if e.status == unavailable {
            e.retry_after = Some(1);
        }
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), self.code.into());
        body.insert("message".into(), self.message.into());
        if let Some(field) = self.field {
            body.insert("field".into(), field.into());
        }
        body.extend(self.extra);
        let mut response = (self.status, axum::Json(Value::Object(body))).into_response();
        if let Some(detail) = self.detail {
            response.extensions_mut().insert(ErrorDetail(detail));
        }
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The JSON 404 of unknown routes.
pub async fn no_route() -> ApiError {
    ApiError::not_found("no_route", "no such route; see the README for the API")
}

/// The JSON 405 of known routes with another method.
pub async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// A typed response body (the types the OpenAPI document describes).
pub fn ok_typed<T: serde::Serialize>(status: StatusCode, value: T) -> Response {
    (status, axum::Json(value)).into_response()
}
