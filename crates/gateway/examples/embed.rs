//! An axum application of one's own that mounts switchyard's run and queue routes under
//! `/switchyard`, behind the application's own API-key check, next to a route of its own.
//!
//! ```sh
//! cargo run -p switchyard-gateway --example embed
//! curl -s localhost:3000/hello
//! curl -s -X POST localhost:3000/switchyard/v1/runs -H 'x-api-key: dev-key' \
//!   -H 'content-type: application/json' -d '{"run_id": "r1", "invocable": "helper", "kind_of_invocable": "agent", "input": []}'
//! ```
//!
//! `tests/embed.rs` drives this same `app` in-process.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use switchyard_gateway::Gateway;

/// The application: `/hello` is its own, `/switchyard/…` is the gateway's, and only requests
/// carrying `x-api-key: <api_key>` reach the gateway.
pub fn app(gateway: &Gateway, api_key: &'static str) -> Router {
    let switchyard = gateway
        .router()
        .layer(middleware::from_fn_with_state(api_key, require_api_key));
    Router::new()
        .route("/hello", get(|| async { "hello from the application" }))
        .nest("/switchyard", switchyard)
}

/// The application's own auth, in front of the gateway (which runs without a token file).
async fn require_api_key(
    State(api_key): State<&'static str>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok());
    if given == Some(api_key) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "send x-api-key").into_response()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = switchyard_kit::open_event_store("sqlite://switchyard-embed.db").await?;
    let bridge = switchyard_kit::open_stream_bridge("memory://").await?;
    let fleet = switchyard_kit::open_fleet_backend("sqlite://switchyard-embed.db").await?;
    let gateway = Gateway::builder(store, bridge, fleet)
        .console(false)
        .build()?;
    let stop = gateway.stop_handle();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://127.0.0.1:3000");
    axum::serve(listener, app(&gateway, "dev-key"))
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            // Open SSE streams would otherwise hold axum's graceful shutdown forever.
            stop.stop();
        })
        .await?;
    gateway.shutdown().await;
    Ok(())
}
