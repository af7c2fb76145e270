//! JSON errors and the mapping from `switchyard_core::Error` to HTTP statuses (ADR 0081).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use switchyard::core::Error;

/// An error response: `{"error": code, "message": …, "field"?: …, …extra}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    extra: Map<String, Value>,
    retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            extra: Map::new(),
            retry_after: None,
        }
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

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
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
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let message = error.to_string();
        match error {
            Error::InvalidInput { field, .. } => ApiError::invalid(field, message),
            Error::Unavailable { .. } => {
                tracing::warn!(%message, "backend unavailable");
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
                e.retry_after = Some(1);
                e
            }
            Error::Contended { .. } => {
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "contended", message);
                e.retry_after = Some(1);
                e
            }
            Error::Closed { .. } => {
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "closed", message);
                e.retry_after = Some(1);
                e
            }
            Error::Corrupt { .. } => {
                tracing::error!(%message, "corrupt stored data");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt", message)
            }
            Error::Rejected { .. } => {
                tracing::error!(%message, "backend rejected an operation");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "rejected", message)
            }
            Error::AlreadyExists { what: "run", .. } => ApiError::conflict("run_exists", message),
            Error::AlreadyExists { .. } => ApiError::conflict("already_exists", message),
            Error::Config { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "config", message)
            }
            _ => ApiError::internal(message),
        }
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

/// A `json!` shortcut for handlers.
pub fn ok_json(status: StatusCode, value: Value) -> Response {
    (status, axum::Json(value)).into_response()
}
