//! `GET /openapi.json` (ADR 0305): the OpenAPI 3.1 document of every route, generated from the
//! route definitions: each handler carries `#[utoipa::path]`, and the router is built by
//! `utoipa_axum`'s `OpenApiRouter` from the `routes!` of each entry of the route table
//! (`routes`, ADR 0369), so a route and its description are registered together and cannot drift
//! apart.

use std::sync::Arc;

use axum::Extension;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

/// The error shape of every route (ADR 0081): a code, a message that says what to do next, the
/// field at fault, and route-specific extras.
#[derive(Debug, Serialize, ToSchema)]
#[allow(dead_code)] // the schema of `ApiError`'s body; `ApiError` writes it
pub struct ErrorBody {
    /// A stable code (`invalid_input`, `receipt_not_current`, `unavailable`, …).
    error: String,
    /// What went wrong and what to do next.
    message: String,
    /// The dotted path of the field at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

/// The answers every `/v1` route may give besides its own: a refusal (4XX) or a backend failure
/// (5XX), both with [`ErrorBody`]. One definition, listed in each route's `responses(…)`.
#[derive(Debug, IntoResponses)]
#[allow(dead_code)] // a description for the document; `ApiError` writes the responses
pub enum Failures {
    #[response(status = "4XX", description = "Refused")]
    Refused(ErrorBody),
    #[response(status = "5XX", description = "Backend failure")]
    Failed(ErrorBody),
}

/// A refusal (4XX) with [`ErrorBody`], for the routes that call no backend.
#[derive(Debug, IntoResponses)]
#[allow(dead_code)] // a description for the document; `ApiError` writes the responses
pub enum Refusal {
    #[response(status = "4XX", description = "Refused")]
    Refused(ErrorBody),
}

/// `{"ok": true}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ok {
    pub ok: bool,
}

/// The document's fixed parts; the paths come from the router.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "switchyard gateway",
        description = "The reference HTTP + SSE gateway over switchyard's event store, stream \
                       bridge and fleet backend. With a token file every `/v1` route needs \
                       `Authorization: Bearer <secret>`.",
        license(name = "MIT OR Apache-2.0"),
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "runs", description = "Runs, their events and live streams"),
        (name = "queues", description = "Queues: submit, inspect, control"),
        (name = "tasks", description = "A task by id: its record and result, cancel, end events, retention"),
        (name = "worker", description = "The HTTP worker API: reserve, then end each reservation by its receipt"),
        (name = "workers", description = "The worker registry: register, heartbeat, deregister, list"),
        (name = "dead-letters", description = "Dead letters and requeues"),
        (name = "schedules", description = "Recurring schedules"),
        (name = "webhooks", description = "Webhook subscriptions to run and task ends, and their delivery logs"),
        (name = "ops", description = "Health, readiness, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// The bearer-token scheme of ADR 0180.
#[derive(Debug)]
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A secret of the gateway's token file (`switchyard token new`); the \
                         token's rights and scopes decide what it may touch",
                    ))
                    .build(),
            ),
        );
    }
}

/// The rendered document, built once with the router and handed to the route as an extension.
#[derive(Debug, Clone)]
pub struct Document(pub Arc<str>);

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "ops",
    security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"))
)]
pub async fn document(Extension(doc): Extension<Document>) -> Response {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
        .into_response()
}
