//! The in-process gateway of the task tests: memory backends, two tokens (every queue; the
//! `a-*` queues only), and calls through `oneshot`.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use switchyard_gateway::auth::{Auth, digest_hex};
use switchyard_gateway::{Gateway, GatewayBuilder};
use tower::ServiceExt;

pub const ALL: &str = "sy_all";
/// A token of the `a-*` queues only.
pub const A_ONLY: &str = "sy_a_only";

pub struct World {
    pub app: Router,
    _gateway: Gateway,
    _dir: tempfile::TempDir,
}

pub async fn world() -> World {
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    world_over(fleet, "[]", |b| b.heartbeat(Duration::from_secs(1))).await
}

/// A world over `fleet` and a memory store and bridge, with the two tokens (token `a` limited to
/// the namespaces of the TOML array `a_namespaces`), the gateway's builder finished by `finish`.
pub async fn world_over(
    fleet: Arc<dyn switchyard_core::fleet::FleetBackend>,
    a_namespaces: &str,
    finish: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[tokens]]\nname = \"all\"\nsha256 = \"{}\"\nnamespaces = [\"*\"]\nqueues = [\"*\"]\nrights = [\"read\", \"write\", \"metrics\"]\n\n\
             [[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nnamespaces = {a_namespaces}\nqueues = [\"a-*\"]\nrights = [\"read\", \"write\"]\n",
            digest_hex(ALL),
            digest_hex(A_ONLY)
        ),
    )
    .expect("tokens");
    let auth = Arc::new(Auth::load(tokens, false).expect("auth"));
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let builder = Gateway::builder(store, bridge, fleet)
        .auth(auth)
        .console(false);
    World::new(finish(builder).build().expect("gateway"), dir)
}

impl World {
    /// A world over a gateway built elsewhere (with settings of its own).
    pub fn new(gateway: Gateway, dir: tempfile::TempDir) -> World {
        World {
            app: gateway.router(),
            _gateway: gateway,
            _dir: dir,
        }
    }

    /// Shuts the gateway down (its scheduler, maintainer and webhook worker stop).
    pub async fn shutdown(self) {
        self._gateway.shutdown().await;
    }
}

pub fn request(method: &str, uri: &str, token: &str, body: Option<&Value>) -> Request<Body> {
    let mut r = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let body = match body {
        Some(v) => {
            r = r.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None if method != "GET" => {
            r = r.header(header::CONTENT_TYPE, "application/json");
            Body::empty()
        }
        None => Body::empty(),
    };
    r.body(body).expect("request")
}

pub async fn call_as(
    w: &World,
    token: &str,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let response = w
        .app
        .clone()
        .oneshot(request(method, uri, token, body.as_ref()))
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

pub async fn call(w: &World, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    call_as(w, ALL, method, uri, body).await
}

pub async fn submit(w: &World, queue: &str, id: &str) {
    let (status, body) = call(
        w,
        "POST",
        &format!("/v1/queues/{queue}/tasks"),
        Some(json!({"id": id, "payload": {"n": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// Reserves one task; its receipt, percent-encoded for a path.
pub async fn reserve(w: &World, queue: &str) -> String {
    let (status, body) = call(
        w,
        "POST",
        &format!("/v1/queues/{queue}/reservations"),
        Some(json!({"max": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let receipt = body["tasks"][0]["receipt"].as_str().expect("a task");
    switchyard_core::keys::quote(receipt)
}
