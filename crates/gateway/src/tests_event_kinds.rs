//! The events route and the event model's kinds (ADR 0373), in-process through
//! [`Gateway::router`]: an unknown kind is refused with 422 on its `kind` unless the gateway is
//! built with `lenient_event_kinds`, and `/openapi.json` documents one schema per known kind.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use switchyard_kit::core::event::KNOWN_KINDS;
use tower::ServiceExt;

use crate::Gateway;

async fn gateway(lenient: bool) -> Gateway {
    let store = switchyard_kit::open_event_store("memory://")
        .await
        .expect("store");
    let bridge = switchyard_kit::open_stream_bridge("memory://")
        .await
        .expect("bridge");
    let fleet = switchyard_kit::open_fleet_backend("memory://")
        .await
        .expect("fleet");
    Gateway::builder(store, bridge, fleet)
        .console(false)
        .scheduler(false)
        .maintainer(None)
        .lenient_event_kinds(lenient)
        .build()
        .expect("gateway")
}

async fn call(g: &Gateway, method: &str, uri: &str, body: Value) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let resp = g.router().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn started(g: &Gateway) {
    let (status, body) = call(
        g,
        "POST",
        "/v1/runs",
        json!({"run_id": "r", "invocable": "a", "kind_of_invocable": "agent", "input": []}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

async fn events(g: &Gateway) -> Vec<Value> {
    let (status, body) = call(g, "GET", "/v1/runs/r", Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn an_unknown_kind_is_refused_on_its_kind_and_nothing_is_stored() {
    let g = gateway(false).await;
    started(&g).await;
    let typo = json!({"kind": "tool.call", "call_id": "c", "tool": "t", "args": {}});
    let (status, body) = call(&g, "POST", "/v1/runs/r/events", typo.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"], "invalid_input");
    assert_eq!(body["field"], "kind");
    let message = body["message"].as_str().unwrap_or_default();
    for needle in [
        "\"tool.call\"",
        "tool.call.started",
        "/openapi.json",
        "--lenient-event-kinds",
    ] {
        assert!(message.contains(needle), "{needle} missing: {message}");
    }

    // In a batch the field names the event, and the batch stores nothing.
    let good = json!({"kind": "status.reported", "message": "working"});
    let batch = json!({"events": [good, typo]});
    let (status, body) = call(&g, "POST", "/v1/runs/r/events", batch).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "events[1].kind");
    assert_eq!(events(&g).await.len(), 1, "only run.started");

    // A kind that is not well formed keeps its own refusal, and a known kind is stored.
    let (status, body) = call(&g, "POST", "/v1/runs/r/events", json!({"kind": "Tool"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a valid kind") && !m.contains("lenient")),
        "{body}"
    );
    let (status, body) = call(&g, "POST", "/v1/runs/r/events", good).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["events"][0]["kind"], "status.reported");
}

#[tokio::test]
async fn a_lenient_gateway_stores_an_unknown_kind_as_raw_payload() {
    let g = gateway(true).await;
    started(&g).await;
    let typo = json!({"kind": "tool.call", "call_id": "c"});
    let (status, body) = call(&g, "POST", "/v1/runs/r/events", typo).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let stored = &body["events"][0];
    assert_eq!(stored["kind"], "tool.call");
    assert_eq!(
        stored["payload"],
        json!({"kind": "tool.call", "raw_payload": {"kind": "tool.call", "call_id": "c"}})
    );
    assert_eq!(events(&g).await.len(), 2);
    // The refusals of the lifecycle kinds that have their own routes stay.
    for kind in ["run.started", "run.resumed"] {
        let body =
            json!({"kind": kind, "invocable": "a", "kind_of_invocable": "agent", "input": []});
        let (status, answer) = call(&g, "POST", "/v1/runs/r/events", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{kind}: {answer}");
        assert_eq!(answer["field"], "kind");
    }
}

#[tokio::test]
async fn the_document_has_one_schema_per_known_kind() {
    let g = gateway(false).await;
    let (status, doc) = call(&g, "GET", "/openapi.json", Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    let schemas = &doc["components"]["schemas"];
    let payload = &schemas["Payload"];
    assert_eq!(
        payload["discriminator"]["propertyName"], "kind",
        "{payload}"
    );
    let mapping = payload["discriminator"]["mapping"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(mapping.len(), KNOWN_KINDS.len(), "{payload}");
    let items = payload["oneOf"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), KNOWN_KINDS.len());
    for kind in KNOWN_KINDS {
        let target = mapping[kind].as_str().unwrap_or_default();
        let name = target
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{kind} maps to {target}"));
        assert_eq!(
            schemas[name]["properties"]["kind"]["enum"],
            json!([kind]),
            "{name}"
        );
        let referenced = items.iter().filter(|i| i["$ref"] == target).count();
        assert_eq!(referenced, 1, "{kind}: one branch of the oneOf");
        // Exactly one schema of the document is this kind's.
        let claiming = schemas
            .as_object()
            .map(|all| {
                all.values()
                    .filter(|s| s["properties"]["kind"]["enum"] == json!([kind]))
                    .count()
            })
            .unwrap_or_default();
        assert_eq!(claiming, 1, "{kind}");
    }

    // The events route takes one payload or a batch of them, and answers with stored events.
    let route = &doc["paths"]["/v1/runs/{run_id}/events"]["post"];
    let body = &route["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(body["$ref"], "#/components/schemas/AppendBody", "{route}");
    let branches = schemas["AppendBody"]["oneOf"].to_string();
    assert!(
        branches.contains("#/components/schemas/Payload"),
        "{branches}"
    );
    let batch = &schemas["AppendBatch"]["properties"]["events"];
    assert_eq!(batch["items"]["$ref"], "#/components/schemas/Payload");
    assert_eq!(batch["maxItems"], 1000);
    let answer = &route["responses"]["201"]["content"]["application/json"]["schema"];
    assert_eq!(answer["$ref"], "#/components/schemas/AppendedEvents");
    assert_eq!(
        schemas["AppendedEvents"]["properties"]["events"]["items"]["$ref"],
        "#/components/schemas/Event"
    );
}
