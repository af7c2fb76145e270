//! Many acks in one request (`POST /v1/queues/{queue}/reservations/ack`), in-process on the memory
//! backends: each ack is what the ack route does for its receipt and is answered on its own (a
//! result stored, a cancelled task's `cancelled`, a lost receipt's `receipt_not_current`), the
//! batch's bounds are 422s naming the field, and a token of other queues is refused.

mod common;

use axum::http::StatusCode;
use common::{A_ONLY, call, call_as, submit, world};
use serde_json::{Value, json};

#[tokio::test]
async fn many_acks_in_one_request_are_each_answered_on_their_own() {
    let w = world().await;
    for id in ["t-1", "t-2", "t-3", "t-4"] {
        submit(&w, "jobs", id).await;
    }
    let (status, reserved) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations",
        Some(json!({"max": 4})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reserved}");
    let receipt = |id: &str| -> String {
        reserved["tasks"]
            .as_array()
            .and_then(|tasks| tasks.iter().find(|t| t["id"] == id))
            .and_then(|t| t["receipt"].as_str())
            .unwrap_or_else(|| panic!("{id} reserved: {reserved}"))
            .to_string()
    };
    // t-2 is cancelled while its worker holds it.
    let (status, body) = call(&w, "DELETE", "/v1/queues/jobs/tasks/t-2", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations/ack",
        Some(json!({"acks": [
            {"receipt": receipt("t-1"), "result": {"answer": 42}},
            {"receipt": receipt("t-2")},
            {"receipt": "not-a-live-receipt"},
            {"receipt": receipt("t-3")},
            {"receipt": receipt("t-3")},
        ]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["results"].as_array().expect("results");
    let outcome = |i: usize| {
        (
            results[i]["ok"].clone(),
            results[i]["status"].clone(),
            results[i]["error"].clone(),
        )
    };
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["receipt"], json!(receipt("t-1")));
    assert_eq!(outcome(0), (json!(true), Value::Null, Value::Null));
    assert_eq!(outcome(1), (json!(false), json!(409), json!("cancelled")));
    assert_eq!(
        outcome(2),
        (json!(false), json!(409), json!("receipt_not_current"))
    );
    assert_eq!(outcome(3), (json!(true), Value::Null, Value::Null));
    // The same receipt twice: the second ack finds the task already ended.
    assert_eq!(
        outcome(4),
        (json!(false), json!(409), json!("receipt_not_current"))
    );
    assert!(
        results[2]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );

    let state = |body: &Value| body["state"].clone();
    let (_, t1) = call(&w, "GET", "/v1/queues/jobs/tasks/t-1", None).await;
    assert_eq!(
        (state(&t1), t1["result"].clone()),
        (json!("completed"), json!({"answer": 42}))
    );
    let (_, t2) = call(&w, "GET", "/v1/queues/jobs/tasks/t-2", None).await;
    assert_eq!(state(&t2), json!("cancelled"));
    let (_, t3) = call(&w, "GET", "/v1/queues/jobs/tasks/t-3", None).await;
    assert_eq!(state(&t3), json!("completed"));
    // t-4 was not in the batch: still held by its worker.
    let (_, t4) = call(&w, "GET", "/v1/queues/jobs/tasks/t-4", None).await;
    assert_eq!(state(&t4), json!("running"));
}

#[tokio::test]
async fn a_batch_of_acks_is_bounded_and_scoped() {
    let w = world().await;
    submit(&w, "jobs", "t-1").await;
    let (_, reserved) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations",
        Some(json!({"max": 1})),
    )
    .await;
    let receipt = reserved["tasks"][0]["receipt"].clone();
    let refused = |body: &Value| (body["error"].clone(), body["field"].clone());

    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations/ack",
        Some(json!({"acks": []})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(refused(&body), (json!("invalid_input"), json!("acks")));

    let many: Vec<Value> = (0..1001).map(|_| json!({"receipt": receipt})).collect();
    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations/ack",
        Some(json!({"acks": many})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(refused(&body), (json!("invalid_input"), json!("acks")));

    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/reservations/ack",
        Some(json!({"acks": [{"receipt": receipt, "extra": 1}]})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // A token of the a-* queues cannot ack on this one.
    let (status, _) = call_as(
        &w,
        A_ONLY,
        "POST",
        "/v1/queues/jobs/reservations/ack",
        Some(json!({"acks": [{"receipt": receipt}]})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // None of the refused requests acked anything.
    let (_, t1) = call(&w, "GET", "/v1/queues/jobs/tasks/t-1", None).await;
    assert_eq!(t1["state"], "running");
}
