//! The gateway mounted in an application of one's own (`examples/embed.rs`), driven in-process:
//! the application's routes and API keys stay its own (the keys as the gateway's authenticator,
//! ADR 0368), the gateway's routes, admission, errors and `Location` headers work under the prefix
//! they are nested at.

#[path = "../examples/embed.rs"]
#[allow(dead_code)] // the example's `main` is not called here
mod embed;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use switchyard_core::RunContext;
use switchyard_core::store::EventStore;
use switchyard_gateway::Gateway;
use switchyard_gateway::auth::{Auth, AuthError, Authenticator, Principal, Right, digest_hex};
use tower::ServiceExt;

const KEY: &str = "k-123";
/// A key that may only read, and only the `shop` namespace.
const SHOP_READER: &str = "k-shop";

struct World {
    app: Router,
    gateway: Gateway,
    store: Arc<dyn EventStore>,
    keys: Arc<embed::ApiKeys>,
}

async fn world() -> World {
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let keys = Arc::new(embed::ApiKeys::default());
    keys.insert(KEY, embed::admin("app").expect("admin"));
    keys.insert(
        SHOP_READER,
        Principal::new("shop-reader")
            .with_rights([Right::Read])
            .with_namespaces(["shop"])
            .expect("glob"),
    );
    let gateway = Gateway::builder(store.clone(), bridge, fleet)
        .authenticator(keys.clone())
        .console(false)
        .build()
        .expect("gateway");
    World {
        app: embed::app(&gateway),
        gateway,
        store,
        keys,
    }
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(v) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    let response = app
        .clone()
        .oneshot(request.body(body).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, value)
}

#[tokio::test]
async fn runs_under_the_application_prefix_and_auth() {
    let w = world().await;
    let (status, _, body) = call(&w.app, "GET", "/hello", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!("hello from the application"));

    // The application's keys admit requests to the gateway: nothing is written without one.
    let start = json!({"run_id": "r1", "session_id": "s1", "invocable": "helper", "kind_of_invocable": "agent", "input": []});
    let (status, headers, body) = call(
        &w.app,
        "POST",
        "/switchyard/v1/runs",
        &[],
        Some(start.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "unauthenticated", "{body}");
    assert_eq!(body["message"], "send `x-api-key: <key>`", "{body}");
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    let (status, _, _) = call(
        &w.app,
        "POST",
        "/switchyard/v1/runs",
        &[("x-api-key", "k-unknown")],
        Some(start.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let ctx = RunContext::new("r1").with_session("s1");
    assert!(w.store.read_run(&ctx, 0).await.expect("read").is_empty());

    let key = [("x-api-key", KEY)];
    let (status, headers, body) =
        call(&w.app, "POST", "/switchyard/v1/runs", &key, Some(start)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "running");
    // The run's URL names the path the application mounted the gateway at.
    assert_eq!(
        headers[header::LOCATION],
        "/switchyard/v1/runs/r1?session=s1"
    );
    let delta = json!({"kind": "text.delta", "message_id": "m1", "text": "hi"});
    let (status, _, body) = call(
        &w.app,
        "POST",
        "/switchyard/v1/runs/r1/events?session=s1",
        &key,
        Some(delta),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["events"][0]["seq"], 1);
    let (status, _, body) = call(
        &w.app,
        "GET",
        "/switchyard/v1/runs/r1?session=s1",
        &key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let kinds: Vec<&str> = body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["run.started", "text.delta"]);
    assert_eq!(w.store.read_run(&ctx, 0).await.expect("read").len(), 2);

    // A path under the prefix that the gateway does not know gets its JSON 404.
    let (status, _, body) = call(&w.app, "GET", "/switchyard/v1/nope", &key, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "no_route");
    w.gateway.shutdown().await;
}

#[tokio::test]
async fn a_task_goes_through_the_mounted_worker_api() {
    let w = world().await;
    let key = [("x-api-key", KEY)];
    let (status, _, body) = call(
        &w.app,
        "POST",
        "/switchyard/v1/queues/jobs/tasks",
        &key,
        Some(json!({"payload": {"n": 1}, "id": "t1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = call(
        &w.app,
        "POST",
        "/switchyard/v1/queues/jobs/reservations",
        &key,
        Some(json!({"max": 5})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tasks = body["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["id"], "t1");
    assert_eq!(tasks[0]["payload"], json!({"n": 1}));
    let receipt = tasks[0]["receipt"].as_str().expect("receipt");
    let (status, _, body) = call(
        &w.app,
        "POST",
        &format!("/switchyard/v1/queues/jobs/reservations/{receipt}/ack"),
        &key,
        Some(json!({})),
    )
    .await;
    assert!(status.is_success(), "{status} {body}");
    let (_, _, body) = call(&w.app, "GET", "/switchyard/v1/queues/jobs", &key, None).await;
    assert_eq!(body["in_flight"], 0, "{body}");
    w.gateway.shutdown().await;
}

/// With the gateway's own token file, scopes are kept under a prefix too: admission names
/// routes without the prefix an application nested them under.
#[tokio::test]
async fn token_scopes_hold_when_nested() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nnamespaces = [\"t-a\"]\nqueues = []\nrights = [\"read\", \"write\"]\n",
            digest_hex("sy_a")
        ),
    )
    .expect("tokens");
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let gateway = Gateway::builder(store, bridge, fleet)
        .auth(Arc::new(Auth::load(tokens, false).expect("auth")))
        .build()
        .expect("gateway");
    let app = Router::new().nest("/tenants/acme", gateway.router());
    let bearer = [("authorization", "Bearer sy_a")];
    let (status, _, body) = call(
        &app,
        "GET",
        "/tenants/acme/v1/runs?namespace=t-a",
        &bearer,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = call(
        &app,
        "GET",
        "/tenants/acme/v1/runs?namespace=t-b",
        &bearer,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, _) = call(
        &app,
        "GET",
        "/tenants/acme/v1/runs?namespace=t-a",
        &[],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = call(&app, "GET", "/tenants/acme/v1/queues/other", &bearer, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    gateway.shutdown().await;
}

/// A principal of the application's authenticator gets the rights and scopes it was given, as a
/// token of the file would: the shop reader reads `shop` only and writes nothing.
#[tokio::test]
async fn an_application_principal_keeps_its_rights_and_scopes() {
    let w = world().await;
    let reader = [("x-api-key", SHOP_READER)];
    let (status, _, body) = call(
        &w.app,
        "GET",
        "/switchyard/v1/runs?namespace=shop",
        &reader,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = call(
        &w.app,
        "GET",
        "/switchyard/v1/runs?namespace=other",
        &reader,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("shop-reader")),
        "{body}"
    );
    let start = json!({"run_id": "r9", "namespace": "shop", "invocable": "helper", "kind_of_invocable": "agent", "input": []});
    let (status, _, body) = call(&w.app, "POST", "/switchyard/v1/runs", &reader, Some(start)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("`write`")),
        "{body}"
    );
    let (status, _, _) = call(&w.app, "GET", "/switchyard/v1/queues/jobs", &reader, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // `/metrics` needs the `metrics` right, which the admin key has.
    let (status, _, _) = call(&w.app, "GET", "/switchyard/metrics", &reader, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = call(
        &w.app,
        "GET",
        "/switchyard/metrics",
        &[("x-api-key", KEY)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    w.gateway.shutdown().await;
}

/// Revoking a key ends the stream it holds open with the `token_revoked` end frame, and the
/// stream tickets it asked for stop opening streams.
#[tokio::test]
async fn revoking_a_key_ends_its_streams_and_tickets() {
    let w = world().await;
    const DOOMED: &str = "k-doomed";
    w.keys
        .insert(DOOMED, embed::admin("doomed").expect("admin"));
    let doomed = [("x-api-key", DOOMED)];
    let start =
        json!({"run_id": "r3", "invocable": "helper", "kind_of_invocable": "agent", "input": []});
    let (status, _, _) = call(&w.app, "POST", "/switchyard/v1/runs", &doomed, Some(start)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, body) = call(
        &w.app,
        "POST",
        "/switchyard/v1/stream-tickets",
        &doomed,
        Some(json!({"run_id": "r3"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let ticket = body["ticket"].as_str().expect("ticket").to_string();
    let by_ticket = format!("/switchyard/v1/runs/r3/stream?ticket={ticket}");
    let request = Request::builder()
        .uri(&by_ticket)
        .body(Body::empty())
        .expect("request");
    let response = w.app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("first frame in time")
        .expect("a frame")
        .expect("ok");
    let text = String::from_utf8_lossy(first.data_ref().expect("data")).into_owned();
    assert!(text.contains("run.started"), "{text}");

    w.keys.revoke(DOOMED);
    let rest = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .expect("the stream ends once its key is revoked")
        .expect("ok")
        .to_bytes();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("event: end") && rest.contains("token_revoked"),
        "{rest}"
    );
    let (status, _, body) = call(&w.app, "GET", &by_ticket, &[], None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _, _) = call(&w.app, "GET", "/switchyard/v1/runs/r3", &doomed, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The other keys are untouched.
    let (status, _, _) = call(
        &w.app,
        "GET",
        "/switchyard/v1/runs/r3",
        &[("x-api-key", KEY)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    w.gateway.shutdown().await;
}

/// An application's authenticator counts as configured auth: `serve` takes a network listener.
#[tokio::test]
async fn serve_takes_a_network_listener_with_an_authenticator() {
    let w = world().await;
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    w.gateway
        .serve(listener, None, async {})
        .await
        .expect("served and stopped");
}

/// A served gateway keeps the binary's protected mode: no token file, no network listener.
#[tokio::test]
async fn serve_refuses_a_network_listener_without_tokens() {
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let gateway = Gateway::builder(store, bridge, fleet)
        .build()
        .expect("gateway");
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let err = gateway
        .serve(listener, None, std::future::pending())
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("no token file"), "{err}");
}

/// `stop_handle` ends open streams, so an application's own graceful shutdown is not held.
#[tokio::test]
async fn the_stop_handle_ends_open_streams() {
    let w = world().await;
    let key = [("x-api-key", KEY)];
    let start =
        json!({"run_id": "r2", "invocable": "helper", "kind_of_invocable": "agent", "input": []});
    let (status, _, _) = call(&w.app, "POST", "/switchyard/v1/runs", &key, Some(start)).await;
    assert_eq!(status, StatusCode::CREATED);
    let request = Request::builder()
        .uri("/switchyard/v1/runs/r2/stream")
        .header("x-api-key", KEY)
        .body(Body::empty())
        .expect("request");
    let response = w.app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("first frame in time")
        .expect("a frame")
        .expect("ok");
    let text = String::from_utf8_lossy(first.data_ref().expect("data")).into_owned();
    assert!(text.contains("run.started"), "{text}");
    w.gateway.stop_handle().stop();
    let rest = tokio::time::timeout(Duration::from_secs(5), body.collect())
        .await
        .expect("the stream ends after stop")
        .expect("ok")
        .to_bytes();
    assert!(!String::from_utf8_lossy(&rest).contains("event: end"));
    w.gateway.shutdown().await;
}

/// An authenticator that cannot decide (its identity service is down) gets a 503 with
/// `Retry-After`, and its message, never a 5xx of the gateway's own making or a 401.
#[tokio::test]
async fn an_authenticator_that_cannot_decide_is_a_503() {
    struct Down;

    #[switchyard_gateway::auth::async_trait]
    impl Authenticator for Down {
        async fn authenticate(
            &self,
            _: &axum::http::request::Parts,
        ) -> Result<Arc<Principal>, AuthError> {
            Err(AuthError::Unavailable(
                "the identity service does not answer; retry".into(),
            ))
        }
    }

    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let gateway = Gateway::builder(store, bridge, fleet)
        .authenticator(Arc::new(Down))
        .metrics_public(true)
        .build()
        .expect("gateway");
    let app = gateway.router();
    let (status, headers, body) = call(&app, "GET", "/v1/runs", &[], None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "auth_unavailable", "{body}");
    assert_eq!(
        body["message"],
        "the identity service does not answer; retry"
    );
    assert_eq!(headers[header::RETRY_AFTER], "1");
    // Routes that need no right are not asked about.
    let (status, _, _) = call(&app, "GET", "/healthz", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = call(&app, "GET", "/metrics", &[], None).await;
    assert_eq!(status, StatusCode::OK);
    gateway.shutdown().await;
}
