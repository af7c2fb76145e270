//! In-process tests of the whole app (router and every layer) over fresh memory backends: generated
//! bodies, headers, ids and query strings on every route never get a 5xx, and a 4xx writes
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use serde_json::{Value, json};
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_kit::core::RunContext;
use tokio::sync::{RwLock, watch};
use tower::ServiceExt;

use super::auth::{Auth, digest_hex};
use super::metrics::Metrics;
use super::{AppState, Security, Shared, app};

const NAMESPACES: [&str; 3] = ["", "t-a", "t-b"];
const QUEUES: [&str; 2] = ["q", "jobs-1"];
const RUNS: [&str; 2] = ["r", "s"];
/// The token of the generated requests that may do everything in `t-a` and on `jobs-*`.
const SECRET: &str = "sy_proptest";

struct World {
    app: axum::Router,
    store: Arc<dyn EventStore>,
    fleet: Arc<dyn FleetBackend>,
    _dir: tempfile::TempDir,
    _stop: watch::Sender<bool>,
}

async fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[tokens]]\nname = \"p\"\nsha256 = \"{}\"\nnamespaces = [\"t-a\", \"\"]\nqueues = [\"jobs-*\", \"q\"]\nrights = [\"read\", \"write\", \"metrics\"]\n",
            digest_hex(SECRET)
        ),
    )
    .expect("tokens");
    let auth = Arc::new(Auth::load(tokens, false).expect("auth"));
    let store: Arc<dyn EventStore> = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let fleet: Arc<dyn FleetBackend> = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let bridge = switchyard_kit::open_stream_bridge_prefixed("memory://", None, 16)
        .await
        .expect("bridge");
    let (tx, rx) = watch::channel(false);
    let (runs, queues) = crate::services(
        &store,
        &bridge,
        &fleet,
        Duration::from_secs(3600),
        Duration::from_secs(60),
    );
    let state = AppState::new(Shared {
        store: store.clone(),
        bridge,
        fleet: fleet.clone(),
        runs,
        queues,
        webhooks: switchyard_service::webhooks::Webhooks::new(fleet.clone(), Default::default())
            .expect("the default webhook settings"),
        metrics: Arc::new(Metrics::default()),
        heartbeat: Duration::from_secs(15),
        ready_timeout: Duration::from_millis(500),
        shutdown: rx,
        writes: Arc::new(RwLock::new(())),
        backends: Arc::new(json!({})),
        tickets: Arc::default(),
        long_poll_cap: Duration::from_secs(4),
        worker_idle_ttl: None,
        unknown_kinds: switchyard_core::event::UnknownKinds::Refuse,
    });
    let security = Security {
        auth: Some(super::admit::Authn::new(auth, false)),
        limits: switchyard_kit::Limits {
            max_body_bytes: 4096,
            ..switchyard_kit::Limits::default()
        },
        loopback: true,
        cors_origins: vec!["https://app.example".into()],
    };
    World {
        app: app(state, &security, true).expect("app"),
        store,
        fleet,
        _dir: dir,
        _stop: tx,
    }
}

/// Everything a request could have written to the pooled names.
async fn snapshot(w: &World) -> Vec<String> {
    let mut out = Vec::new();
    for ns in NAMESPACES {
        let mut ctx = RunContext::new("list");
        if !ns.is_empty() {
            ctx = ctx.with_namespace(ns).expect("namespace");
        }
        let mut runs = w.store.list_runs(&ctx, None).await.expect("list");
        runs.sort_by(|a, b| (&a.log_key, &a.run_id).cmp(&(&b.log_key, &b.run_id)));
        for r in runs {
            let events = w.store.read_run(&r.context(&ctx), 0).await.expect("read");
            out.push(format!("{ns}/{}/{}: {}", r.log_key, r.run_id, events.len()));
        }
    }
    for q in QUEUES {
        let stats = w.fleet.queue_stats(q).await.expect("stats");
        out.push(format!("{q}: {} {}", stats.waiting(), stats.dead));
    }
    out
}

fn pct(s: &str) -> String {
    switchyard_core::keys::quote(s)
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(RUNS.to_vec()).prop_map(String::from),
        1 => any::<String>(),
        1 => "[a-z:{}%/ ]{0,8}",
        1 => Just("x".repeat(600)),
    ]
}

fn name(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(pool.to_vec()).prop_map(String::from),
        1 => any::<String>(),
    ]
}

fn query() -> impl Strategy<Value = String> {
    let pair = prop_oneof![
        name(&NAMESPACES).prop_map(|v| format!("namespace={}", pct(&v))),
        id().prop_map(|v| format!("session={}", pct(&v))),
        any::<i64>().prop_map(|v| format!("from_seq={v}")),
        "[a-z_]{0,12}".prop_map(|v| format!("status={v}")),
        any::<i64>().prop_map(|v| format!("limit={v}")),
        name(&QUEUES).prop_map(|v| format!("automation_type={}", pct(&v))),
        "[&=%a-z0-9]{0,12}",
    ];
    prop::collection::vec(pair, 0..4).prop_map(|pairs| pairs.join("&"))
}

/// A body that fits the route (method and template), or any body.
fn body_for(method: &str, template: &str) -> impl Strategy<Value = Vec<u8>> + use<> {
    let fitting = match (method, template) {
        ("POST", "/v1/runs") => (id(), id(), name(&NAMESPACES))
            .prop_map(|(run, session, ns)| {
                json!({"run_id": run, "session_id": session, "namespace": ns,
                       "invocable": "h", "kind_of_invocable": "agent", "input": []})
            })
            .boxed(),
        ("POST", "/v1/runs/{run_id}/events") => prop_oneof![
            Just(json!({"kind": "text.delta", "message_id": "m", "text": "x"})),
            Just(json!({"kind": "run.interrupted", "interrupt_id": "i", "reason": "r", "payload": {}, "thread_id": null, "expected_resume": null})),
            Just(json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})),
        ]
        .boxed(),
        ("POST", "/v1/runs/{run_id}/resume") => Just(json!({"reason": "ok"})).boxed(),
        ("POST", "/v1/stream-tickets") => (id(), name(&NAMESPACES))
            .prop_map(|(run, ns)| json!({"run_id": run, "namespace": ns}))
            .boxed(),
        ("POST", "/v1/queues/{queue}/tasks") => any::<i64>()
            .prop_map(|n| json!({"payload": n, "priority": n % 3, "ttl_seconds": n.unsigned_abs() % 100,
                                 "delay_seconds": (n.unsigned_abs() % 3) as f64 * 0.5}))
            .boxed(),
        ("POST", "/v1/queues/{queue}/reservations") => (0u64..120, 0u64..50_000)
            .prop_map(|(max, vis)| json!({"max": max, "visibility_seconds": vis, "wait_seconds": 0}))
            .boxed(),
        ("POST", "/v1/queues/{queue}/dead-letters/requeue") => any::<u8>()
            .prop_map(|n| json!({"refs": ["eyJhIjoxfQ", "!!", n.to_string()], "priority": "high"}))
            .boxed(),
        ("PUT", "/v1/schedules/{name}") => {
            Just(json!({"cron": "0 0 * * * *", "queue": "q", "payload": {"a": 1}})).boxed()
        }
        ("PUT", "/v1/queues/{queue}/rate-limit") => (0u32..5, 0u32..5)
            .prop_map(|(max, per)| json!({"max": max, "per_seconds": per}))
            .boxed(),
        _ => Just(json!({})).boxed(),
    };
    prop_oneof![
        3 => fitting.prop_map(|v| v.to_string().into_bytes()),
        2 => body(),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let start = (id(), id(), name(&NAMESPACES), any::<u64>()).prop_map(|(run, session, ns, stale)| {
        json!({"run_id": run, "session_id": session, "namespace": ns, "stale_after_secs": stale % 100_000,
               "invocable": "h", "kind_of_invocable": "agent", "input": [{"type": "text", "text": "x"}]})
    });
    let json_value = prop_oneof![
        start,
        Just(json!({"kind": "text.delta", "message_id": "m", "text": "x"})),
        Just(
            json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})
        ),
        Just(json!({"events": [{"kind": "text.delta", "message_id": "m", "text": "x"}]})),
        Just(json!({"payload": {"a": 1}, "priority": "high"})),
        Just(json!({"limit": 5})),
        any::<i64>().prop_map(|n| json!({"payload": n, "ttl_seconds": n, "max_attempts": n})),
        any::<String>().prop_map(Value::String),
    ];
    prop_oneof![
        4 => json_value.prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => Just(vec![b'[' ; 5000]),
    ]
}

#[derive(Debug, Clone)]
struct Generated {
    method: &'static str,
    path: String,
    query: String,
    body: Vec<u8>,
    content_type: Option<&'static str>,
    token: Option<&'static str>,
    host: Option<&'static str>,
    extra: Option<(String, String)>,
}

/// Every route of the route table (so a new route is generated as soon as it is declared), and
/// the console's page.
fn routes() -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = super::routes::declared()
        .into_iter()
        .map(|d| {
            let method = match d.method.as_str() {
                "GET" => "GET",
                "POST" => "POST",
                "PUT" => "PUT",
                "DELETE" => "DELETE",
                _ => "PATCH",
            };
            (method, d.path)
        })
        .collect();
    out.push(("GET", "/".to_string()));
    out
}

fn request() -> impl Strategy<Value = Generated> {
    let routes = routes();
    let route = (id(), name(&QUEUES), prop::sample::select(routes)).prop_flat_map(
        |(run, queue, (method, template))| {
            let (run, queue) = (pct(&run), pct(&queue));
            let path = template
                .replace("{run_id}", &run)
                .replace("{receipt}", &run)
                .replace("{name}", &run)
                .replace("{worker_id}", &run)
                .replace("{queue}", &queue)
                .replace("{automation_type}", &queue);
            (Just((method, path)), body_for(method, &template))
        },
    );
    (
        route,
        query(),
        prop_oneof![
            6 => Just(Some("application/json")),
            1 => Just(Some("text/plain")),
            1 => Just(None),
            1 => Just(Some("application/json; charset=utf-8")),
        ],
        prop_oneof![
            6 => Just(Some(SECRET)),
            1 => Just(Some("nope")),
            1 => Just(None),
            1 => Just(Some("")),
        ],
        prop_oneof![
            6 => Just(Some("localhost")),
            1 => Just(Some("127.0.0.1:1")),
            1 => Just(Some("evil.example")),
            1 => Just(None),
        ],
        prop::option::of((
            prop::sample::select(vec![
                "x-request-id",
                "last-event-id",
                "origin",
                "content-length",
            ]),
            "[ -~]{0,40}",
        )),
    )
        .prop_map(
            |(((method, path), body), query, content_type, token, host, extra)| Generated {
                method,
                path,
                query,
                body,
                content_type,
                token,
                host,
                extra: extra.map(|(k, v)| (k.to_string(), v)),
            },
        )
}

fn build(g: &Generated) -> Option<Request<Body>> {
    let uri = if g.query.is_empty() {
        g.path.clone()
    } else {
        format!("{}?{}", g.path, g.query)
    };
    let mut b = Request::builder().method(g.method).uri(uri);
    if let Some(c) = g.content_type {
        b = b.header("content-type", c);
    }
    if let Some(t) = g.token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    if let Some(h) = g.host {
        b = b.header("host", h);
    }
    if let Some((k, v)) = &g.extra {
        b = b.header(k.as_str(), v.as_str());
    }
    // A URI or header the HTTP layer itself would refuse never reaches the router.
    b.body(Body::from(g.body.clone())).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_requests_never_5xx_and_4xx_write_nothing(reqs in prop::collection::vec(request(), 1..6)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        rt.block_on(async {
            let w = world().await;
            for g in &reqs {
                let Some(req) = build(g) else { continue };
                let before = snapshot(&w).await;
                let resp = w.app.clone().oneshot(req).await.expect("infallible");
                let status = resp.status();
                prop_assert!(status.as_u16() < 500, "{status} for {g:?}");
                if status.is_client_error() {
                    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.expect("body");
                    let json: Value = serde_json::from_slice(&bytes).expect("error bodies are JSON");
                    prop_assert!(json["error"].is_string() && json["request_id"].is_string(), "{json}");
                    prop_assert_eq!(before, snapshot(&w).await, "a {} wrote for {:?}", status, g);
                }
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_panicking_handler_is_a_clean_500() {
    let router = axum::Router::new().route(
        "/v1/boom",
        axum::routing::get(|| async {
            let secret_key = "agentdeck:events:life::x";
            panic!("boom at {secret_key}");
            #[allow(unreachable_code)]
            ""
        }),
    );
    let edge = super::edge::Edge {
        loopback_only_host: true,
        cors_origins: Vec::new(),
        max_body_bytes: 10,
        request_secs: 5,
    };
    let app = super::edge::wrap(router, &edge);
    let resp = app
        .oneshot(
            Request::get("/v1/boom")
                .header("host", "localhost")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("boom") && !text.contains("agentdeck"),
        "{text}"
    );
    let json: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["error"], "internal");
    assert!(json["request_id"].is_string());
}

/// The router's own route table, read from its `Debug` output (axum lists each path once).
fn router_paths(router: &axum::Router) -> std::collections::BTreeSet<String> {
    let text = format!("{router:?}");
    let mut out = std::collections::BTreeSet::new();
    for piece in text.split("RouteId(").skip(1) {
        let Some(rest) = piece.split_once("): \"").map(|(_, r)| r) else {
            continue;
        };
        // axum's own catch-all of the fallback is not a route.
        if let Some((path, _)) = rest.split_once('"')
            && !path.contains("__private__axum")
        {
            out.insert(path.to_string());
        }
    }
    out
}

/// Every route the router serves is in `/openapi.json` with exactly the methods it answers
/// (ADR 0305); only the console's HTML pages are not API.
#[tokio::test]
async fn every_route_of_the_router_is_in_the_openapi_document() {
    let w = world().await;
    let doc: Value = {
        let req = Request::builder()
            .uri("/openapi.json")
            .header("host", "localhost")
            .body(Body::empty())
            .expect("request");
        let resp = w.app.clone().oneshot(req).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("JSON")
    };
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // The status schema is core's own `RunStatus`: its values are the answers' spellings.
    let statuses: Vec<Value> = switchyard_core::RunStatus::ALL
        .iter()
        .map(|s| Value::from(s.as_str()))
        .collect();
    assert_eq!(
        doc["components"]["schemas"]["RunStatus"]["enum"],
        Value::Array(statuses)
    );
    let (state, _stop) = plain_state().await;
    let router = super::router(state, true);
    let paths = router_paths(&router);
    assert!(
        paths.contains("/v1/queues/{queue}/reservations/{receipt}/ack"),
        "{paths:?}"
    );
    const NOT_API: [&str; 2] = ["/", "/console/{file}"];
    let documented = doc["paths"].as_object().expect("paths");
    for path in paths.iter().filter(|p| !NOT_API.contains(&p.as_str())) {
        let item = documented
            .get(path)
            .unwrap_or_else(|| panic!("{path} is served but not in /openapi.json"));
        let concrete = path.replace("{receipt}", "r").replace(['{', '}'], "");
        for method in ["get", "post", "put", "delete", "patch"] {
            let req = Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(&concrete)
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .expect("request");
            let resp = router.clone().oneshot(req).await.expect("infallible");
            let served = resp.status() != StatusCode::METHOD_NOT_ALLOWED;
            assert_eq!(
                served,
                item.get(method).is_some(),
                "{method} {path}: served {served}, documented {}",
                item.get(method).is_some()
            );
        }
    }
    for path in documented.keys() {
        assert!(paths.contains(path), "{path} is documented but not served");
    }
}

/// A state over fresh memory backends, for tests of the bare router.
async fn plain_state() -> (AppState, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge_prefixed("memory://", None, 16)
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    let (runs, queues) = crate::services(
        &store,
        &bridge,
        &fleet,
        Duration::from_secs(3600),
        Duration::from_secs(60),
    );
    let state = AppState::new(Shared {
        store,
        bridge,
        fleet: fleet.clone(),
        runs,
        queues,
        webhooks: switchyard_service::webhooks::Webhooks::new(fleet.clone(), Default::default())
            .expect("the default webhook settings"),
        metrics: Arc::new(Metrics::default()),
        heartbeat: Duration::from_secs(15),
        ready_timeout: Duration::from_millis(500),
        shutdown: rx,
        writes: Arc::new(RwLock::new(())),
        backends: Arc::new(json!({})),
        tickets: Arc::default(),
        long_poll_cap: Duration::from_secs(4),
        worker_idle_ttl: None,
        unknown_kinds: switchyard_core::event::UnknownKinds::Refuse,
    });
    (state, tx)
}

/// A `/v1` route that reaches admission without an entry in the route table is refused, even for
/// a principal that may touch everything: fail closed.
#[tokio::test]
async fn a_v1_route_outside_the_table_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[tokens]]\nname = \"all\"\nsha256 = \"{}\"\nnamespaces = [\"*\"]\nqueues = [\"*\"]\nrights = [\"read\", \"write\", \"metrics\"]\n",
            digest_hex(SECRET)
        ),
    )
    .expect("tokens");
    let auth = Arc::new(Auth::load(tokens, false).expect("auth"));
    let admit = Arc::new(super::admit::Admit {
        auth: Some(super::admit::Authn::new(auth, false)),
        max_body_bytes: 4096,
        ack_body_bytes: 4096,
        streams: Arc::new(tokio::sync::Semaphore::new(4)),
        max_streams: 4,
        streams_per_token: super::admit::PerToken::new(4),
        tickets: Arc::default(),
        rules: super::routes::Rules::new(),
    });
    let app = axum::Router::new()
        .route("/v1/extra", axum::routing::get(|| async { "served" }))
        .route("/v1/runs", axum::routing::get(|| async { "listed" }))
        .route_layer(axum::middleware::from_fn_with_state(
            admit,
            super::admit::admit,
        ));
    let get = |uri: &str| {
        Request::get(uri)
            .header("authorization", format!("Bearer {SECRET}"))
            .body(Body::empty())
            .expect("request")
    };
    let resp = app
        .clone()
        .oneshot(get("/v1/extra"))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .expect("body");
    let json: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert!(
        json["message"]
            .as_str()
            .is_some_and(|m| m.contains("no scope rule")),
        "{json}"
    );
    // The same principal on a route of the table is admitted.
    let resp = app
        .clone()
        .oneshot(get("/v1/runs"))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK);
    // A method the path does not serve is admitted as the path's routes are, then answered 405
    // by the router: 401 without credentials, 405 with them.
    let delete = |token: bool| {
        let mut b = Request::delete("/v1/runs").header("content-type", "application/json");
        if token {
            b = b.header("authorization", format!("Bearer {SECRET}"));
        }
        b.body(Body::empty()).expect("request")
    };
    let resp = app
        .clone()
        .oneshot(delete(false))
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let resp = app.oneshot(delete(true)).await.expect("infallible");
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
}
