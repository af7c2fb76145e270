//! Webhooks (ADR 0395): `POST/GET /v1/webhooks`, `GET/DELETE /v1/webhooks/{id}`, `GET
//! /v1/webhooks/{id}/deliveries`. The webhook service checks, stores and delivers; these routes
//! only read the request and write the answer. A subscription sees ends of every namespace and
//! queue it names, so managing them needs a principal that covers every namespace and queue.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use switchyard_service::webhooks::{
    CreateWebhook, CreatedWebhook, DeliveryLog, Webhook, WebhookDeleted, WebhookList,
};

use super::AppState;
use super::error::{ApiError, ok_typed};
use super::input::JsonBody;
use super::openapi::ErrorBody;
use super::runs::path_id;

/// Subscribes a URL to run and task ends. The secret is in this answer only.
#[utoipa::path(
    post,
    path = "/v1/webhooks",
    operation_id = "create_webhook",
    tag = "webhooks",
    request_body(content = CreateWebhook, content_type = "application/json"),
    responses(
        (status = 201, description = "Subscribed; `secret` is shown this once", body = CreatedWebhook),
        (status = 422, description = "`invalid_input` naming the field (`url` for a refused target, `events`, `queues`, `namespaces`, `secret`), or `too_many_webhooks`", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn create(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<CreateWebhook>,
) -> Result<Response, ApiError> {
    let webhooks = state.webhooks.clone();
    state
        .write(async move {
            Ok(ok_typed(
                StatusCode::CREATED,
                webhooks.create(request).await?,
            ))
        })
        .await
}

/// Every subscription, oldest first, without secrets.
#[utoipa::path(
    get,
    path = "/v1/webhooks",
    operation_id = "list_webhooks",
    tag = "webhooks",
    responses(
        (status = 200, description = "Subscriptions", body = WebhookList),
        crate::openapi::Failures,
    )
)]
pub async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(ok_typed(StatusCode::OK, state.webhooks.list().await?))
}

/// One subscription, without its secret.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}",
    operation_id = "get_webhook",
    tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id")),
    responses(
        (status = 200, description = "The subscription", body = Webhook),
        (status = 404, description = "`unknown_webhook`", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn get(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = path_id(path, "id")?;
    Ok(ok_typed(StatusCode::OK, state.webhooks.get(&id).await?))
}

/// Deletes a subscription and its delivery log; deliveries still queued are dropped.
#[utoipa::path(
    delete,
    path = "/v1/webhooks/{id}",
    operation_id = "delete_webhook",
    tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id")),
    responses(
        (status = 200, description = "Deleted (or there was none)", body = WebhookDeleted),
        crate::openapi::Failures,
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = path_id(path, "id")?;
    let webhooks = state.webhooks.clone();
    state
        .write(async move { Ok(ok_typed(StatusCode::OK, webhooks.delete(&id).await?)) })
        .await
}

/// The subscription's delivery log, newest first: each attempt with its status code, latency
/// and error.
#[utoipa::path(
    get,
    path = "/v1/webhooks/{id}/deliveries",
    operation_id = "webhook_deliveries",
    tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id")),
    responses(
        (status = 200, description = "The delivery log", body = DeliveryLog),
        (status = 404, description = "`unknown_webhook`", body = ErrorBody),
        crate::openapi::Failures,
    )
)]
pub async fn deliveries(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = path_id(path, "id")?;
    Ok(ok_typed(
        StatusCode::OK,
        state.webhooks.deliveries(&id).await?,
    ))
}
