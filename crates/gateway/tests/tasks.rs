//! Control of a task over HTTP (ADR 0380, section 9), in-process on the memory backends: a
//! task's record and result by id, the long poll for its end, cancel of a waiting and of a
//! running task (and what its worker then meets), bulk cancel and purge, the end events as SSE,
//! retention, the 409 of a known id, the end counts, and the queue scope of a token.

mod common;

use std::time::Duration;

use axum::http::{StatusCode, header};
use common::{A_ONLY, ALL, call, call_as, request, reserve, submit, world};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use switchyard_gateway::Gateway;
use tower::ServiceExt;

/// The SSE frames of a stream until `want` frames with an `event:` arrived (or 3 s passed).
async fn frames(response: axum::response::Response, want: usize) -> Vec<(String, String, Value)> {
    let mut body = response.into_body();
    let mut text = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while out.len() < want {
        let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await else {
            break;
        };
        if let Ok(data) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&data));
        }
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let mut event = String::new();
            let mut id = String::new();
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_string();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap_or(Value::Null);
                }
            }
            if !event.is_empty() {
                out.push((event, id, data));
            }
        }
    }
    out
}

#[tokio::test]
async fn a_task_is_read_by_id_with_its_progress_and_result() {
    let w = world().await;
    submit(&w, "jobs", "t-1").await;
    let (status, task) = call(&w, "GET", "/v1/queues/jobs/tasks/t-1", None).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!(task["state"], "waiting");
    assert_eq!(task["attempt"], 0);
    assert_eq!(task["priority"], "normal");
    assert_eq!(task["result"], Value::Null);
    assert!(task["events_cursor"].is_string());
    let receipt = reserve(&w, "jobs").await;
    let (_, running) = call(&w, "GET", "/v1/queues/jobs/tasks/t-1", None).await;
    assert_eq!(running["state"], "running");
    assert_eq!(running["attempt"], 1);
    assert!(running["visible_until"].is_number());
    let (status, _) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/progress"),
        Some(json!({"done": 3})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": {"answer": 42, "text": "é"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, done) = call(&w, "GET", "/v1/queues/jobs/tasks/t-1", None).await;
    assert_eq!(done["state"], "completed");
    assert_eq!(done["result"], json!({"answer": 42, "text": "é"}));
    assert_eq!(done["progress"], json!({"done": 3}));
    assert!(done.get("result_base64").is_none());
    let started = done["started_at"].as_f64().expect("started");
    let finished = done["finished_at"].as_f64().expect("finished");
    assert!(done["submitted_at"].as_f64().expect("submitted") <= started && started <= finished);

    // An ack without a body still works and stores nothing.
    submit(&w, "jobs", "t-2").await;
    let receipt = reserve(&w, "jobs").await;
    let (status, _) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, done) = call(&w, "GET", "/v1/queues/jobs/tasks/t-2", None).await;
    assert_eq!(
        (done["state"].clone(), done["result"].clone()),
        (json!("completed"), Value::Null)
    );

    let (status, body) = call(&w, "GET", "/v1/queues/jobs/tasks/nope", None).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::NOT_FOUND, json!("no_task"))
    );
    // An id spelled like the bulk route is read with its id percent-encoded.
    submit(&w, "jobs", "cancel").await;
    let (status, body) = call(&w, "GET", "/v1/queues/jobs/tasks/%63ancel", None).await;
    assert_eq!(
        (status, body["id"].clone()),
        (StatusCode::OK, json!("cancel")),
        "{body}"
    );
    let (_, stats) = call(&w, "GET", "/v1/queues/jobs", None).await;
    assert_eq!(stats["completed"], 2, "{stats}");
    assert_eq!(stats["cancelled"], 0);
    let (_, metrics) = call(&w, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().expect("text").to_string();
    assert!(
        metrics
            .contains("switchyard_queue_tasks_ended_total{queue=\"jobs\",state=\"completed\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_known_id_is_refused_and_a_result_over_the_limit_is_413() {
    let w = world().await;
    submit(&w, "jobs", "dup").await;
    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/tasks",
        Some(json!({"id": "dup", "payload": {}})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "task_exists");

    let receipt = reserve(&w, "jobs").await;
    let limit = switchyard_core::fleet::DEFAULT_MAX_RESULT_BYTES;
    let big = "x".repeat(limit);
    let (status, body) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": big})),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"], "result_too_large");
    assert_eq!(body["limit"], limit);
    let (_, task) = call(&w, "GET", "/v1/queues/jobs/tasks/dup", None).await;
    assert_eq!(task["state"], "running", "nothing changed");
    let (status, body) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": 1, "extra": true})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": "x".repeat(limit - 2)})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a result of exactly the limit is stored"
    );
}

#[tokio::test]
async fn cancel_removes_a_waiting_task_and_stops_a_running_one() {
    let w = world().await;
    submit(&w, "jobs", "w").await;
    let (status, body) = call(&w, "DELETE", "/v1/queues/jobs/tasks/w", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"outcome": "cancelled", "state": "cancelled"}));
    let (_, body) = call(&w, "DELETE", "/v1/queues/jobs/tasks/w", None).await;
    assert_eq!(body, json!({"outcome": "finished", "state": "cancelled"}));
    let (status, body) = call(&w, "DELETE", "/v1/queues/jobs/tasks/nope", None).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::NOT_FOUND, json!("no_task"))
    );
    let (_, stats) = call(&w, "GET", "/v1/queues/jobs", None).await;
    assert_eq!(
        (stats["waiting"].clone(), stats["cancelled"].clone()),
        (json!(0), json!(1))
    );

    submit(&w, "jobs", "r").await;
    let receipt = reserve(&w, "jobs").await;
    let (_, body) = call(&w, "DELETE", "/v1/queues/jobs/tasks/r", None).await;
    assert_eq!(
        body,
        json!({"outcome": "cancel_requested", "state": "running"})
    );
    let (_, task) = call(&w, "GET", "/v1/queues/jobs/tasks/r", None).await;
    assert_eq!(
        (task["state"].clone(), task["cancel_requested"].clone()),
        (json!("running"), json!(true))
    );
    for (verb, body) in [
        ("extend", json!({"visibility_seconds": 30})),
        ("progress", json!({"done": 1})),
    ] {
        let (status, answer) = call(
            &w,
            "POST",
            &format!("/v1/queues/jobs/reservations/{receipt}/{verb}"),
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::CONFLICT, "{verb}: {answer}");
        assert_eq!(answer["error"], "cancelled", "{verb}");
    }
    let (status, answer) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": "late"})),
    )
    .await;
    assert_eq!(
        (status, answer["error"].clone()),
        (StatusCode::CONFLICT, json!("cancelled"))
    );
    let (_, task) = call(&w, "GET", "/v1/queues/jobs/tasks/r", None).await;
    assert_eq!(
        (task["state"].clone(), task["result"].clone()),
        (json!("cancelled"), Value::Null)
    );

    // nack and fail of a cancelled delivery answer alike.
    for verb in ["nack", "fail"] {
        let id = format!("n-{verb}");
        submit(&w, "jobs", &id).await;
        let receipt = reserve(&w, "jobs").await;
        call(&w, "DELETE", &format!("/v1/queues/jobs/tasks/{id}"), None).await;
        let (status, answer) = call(
            &w,
            "POST",
            &format!("/v1/queues/jobs/reservations/{receipt}/{verb}"),
            Some(json!({"reason": "no"})),
        )
        .await;
        assert_eq!(
            (status, answer["error"].clone()),
            (StatusCode::CONFLICT, json!("cancelled")),
            "{verb}"
        );
    }
    let (_, stats) = call(&w, "GET", "/v1/queues/jobs", None).await;
    assert_eq!(
        (
            stats["dead"].clone(),
            stats["waiting"].clone(),
            stats["cancelled"].clone()
        ),
        (json!(0), json!(0), json!(4))
    );
}

#[tokio::test]
async fn bulk_cancel_answers_per_id_and_purges_the_waiting() {
    let w = world().await;
    for id in ["a", "b", "c"] {
        submit(&w, "jobs", id).await;
    }
    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/tasks/cancel",
        Some(json!({"ids": ["a", "zz", "a"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"results": [
            {"id": "a", "outcome": "cancelled", "state": "cancelled"},
            {"id": "zz", "outcome": "unknown", "state": null},
            {"id": "a", "outcome": "cancelled", "state": "cancelled"},
        ]})
    );
    let (_, body) = call(
        &w,
        "POST",
        "/v1/queues/jobs/tasks/cancel",
        Some(json!({"all_waiting": true})),
    )
    .await;
    assert_eq!(body, json!({"purged": 2}));
    let (_, stats) = call(&w, "GET", "/v1/queues/jobs", None).await;
    assert_eq!(stats["waiting"], 0);
    let ids: Vec<String> = (0..1001).map(|i| format!("t{i}")).collect();
    for (body, field) in [
        (json!({"ids": ["a"], "all_waiting": true}), "all_waiting"),
        (json!({}), "ids"),
        (json!({"all_waiting": false}), "ids"),
        (json!({"ids": []}), "ids"),
        (json!({"ids": ids}), "ids"),
        (json!({"ids": [""]}), "ids[0]"),
    ] {
        let (status, answer) = call(
            &w,
            "POST",
            "/v1/queues/jobs/tasks/cancel",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["field"], field, "{body}");
    }
}

#[tokio::test]
async fn a_read_with_wait_seconds_answers_when_the_task_ends() {
    let w = world().await;
    submit(&w, "jobs", "slow").await;
    let receipt = reserve(&w, "jobs").await;
    let app = w.app.clone();
    let acker = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let uri = format!("/v1/queues/jobs/reservations/{receipt}/ack");
        let body = json!({"result": {"ok": true}});
        app.oneshot(request("POST", &uri, ALL, Some(&body)))
            .await
            .expect("ack")
            .status()
    });
    let started = std::time::Instant::now();
    let (status, task) = call(
        &w,
        "GET",
        "/v1/queues/jobs/tasks/slow?wait_seconds=10",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{task}");
    assert_eq!(task["state"], "completed");
    assert_eq!(task["result"], json!({"ok": true}));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(acker.await.expect("acker"), StatusCode::OK);

    // A wait that runs out answers the record as it is.
    submit(&w, "jobs", "idle").await;
    let (_, task) = call(
        &w,
        "GET",
        "/v1/queues/jobs/tasks/idle?wait_seconds=0.3",
        None,
    )
    .await;
    assert_eq!(task["state"], "waiting");
    for q in ["wait_seconds=61", "wait_seconds=-1", "wait_seconds=nan"] {
        let (status, body) =
            call(&w, "GET", &format!("/v1/queues/jobs/tasks/idle?{q}"), None).await;
        assert!(status.is_client_error(), "{q}: {status} {body}");
        if status == StatusCode::UNPROCESSABLE_ENTITY {
            assert_eq!(body["field"], "wait_seconds", "{q}");
        }
    }
}

#[tokio::test]
async fn the_events_stream_sends_each_end_and_resumes_from_a_cursor() {
    let w = world().await;
    submit(&w, "jobs", "before").await;
    call(&w, "DELETE", "/v1/queues/jobs/tasks/before", None).await;
    // Without a cursor only new ends come.
    let live = w
        .app
        .clone()
        .oneshot(request("GET", "/v1/queues/jobs/events", ALL, None))
        .await
        .expect("stream");
    assert_eq!(live.status(), StatusCode::OK);
    assert_eq!(live.headers()[header::CONTENT_TYPE], "text/event-stream");
    submit(&w, "jobs", "after").await;
    let receipt = reserve(&w, "jobs").await;
    call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": [1, 2]})),
    )
    .await;
    let got = frames(live, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let (event, id, data) = &got[0];
    assert_eq!(event, "completed");
    assert_eq!(data["task_id"], "after");
    assert_eq!(data["result"], json!([1, 2]));
    assert_eq!(&data["cursor"], id);

    // From the start (`?after=0`), both ends in order; from the first's id, the second only.
    let from_start = w
        .app
        .clone()
        .oneshot(request("GET", "/v1/queues/jobs/events?after=0", ALL, None))
        .await
        .expect("stream");
    let all = frames(from_start, 2).await;
    let kinds: Vec<&str> = all.iter().map(|(e, _, _)| e.as_str()).collect();
    assert_eq!(kinds, ["cancelled", "completed"], "{all:?}");
    let mut resume = request("GET", "/v1/queues/jobs/events?after=0", ALL, None);
    resume
        .headers_mut()
        .insert("last-event-id", all[0].1.parse().expect("header"));
    let rest = frames(w.app.clone().oneshot(resume).await.expect("stream"), 1).await;
    assert_eq!(
        rest[0].2["task_id"], "after",
        "Last-Event-ID wins over ?after="
    );

    // A cursor that is not one of this log's: a gap frame, then the oldest kept.
    let gap = w
        .app
        .clone()
        .oneshot(request(
            "GET",
            "/v1/queues/jobs/events?after=nonsense",
            ALL,
            None,
        ))
        .await
        .expect("stream");
    let got = frames(gap, 2).await;
    assert_eq!(got[0].0, "gap", "{got:?}");
    assert_eq!(got[1].2["task_id"], "before");
    let long = "9".repeat(65);
    let (status, body) = call(
        &w,
        "GET",
        &format!("/v1/queues/jobs/events?after={long}"),
        None,
    )
    .await;
    assert_eq!(
        (status, body["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("after"))
    );
}

#[tokio::test]
async fn retention_is_read_set_and_bounded() {
    let w = world().await;
    let (status, r) = call(&w, "GET", "/v1/queues/jobs/retention", None).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(
        r["completed"],
        json!({"count": 1000, "age_seconds": 86400.0})
    );
    assert_eq!(r["events"]["count"], 10000);
    let (status, r) = call(
        &w,
        "PUT",
        "/v1/queues/jobs/retention",
        Some(json!({"completed": {"count": 0, "age_seconds": 60}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["completed"], json!({"count": 0, "age_seconds": 60.0}));
    assert_eq!(r["failed"]["count"], 1000, "the other kinds stay");
    for (body, field) in [
        (
            json!({"events": {"count": 99, "age_seconds": 60}}),
            "events.count",
        ),
        (
            json!({"completed": {"count": 1_000_001, "age_seconds": 60}}),
            "completed.count",
        ),
        (
            json!({"failed": {"count": 1, "age_seconds": 2_592_001}}),
            "failed.age_seconds",
        ),
        (
            json!({"failed": {"count": 1, "age_seconds": -1}}),
            "failed.age_seconds",
        ),
        (json!({"failed": {"count": 1}}), "failed.age_seconds"),
        (json!({"other": {}}), "other"),
    ] {
        let (status, answer) =
            call(&w, "PUT", "/v1/queues/jobs/retention", Some(body.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["field"], field, "{body}: {answer}");
    }
    // Count 0: a completed task's record is gone at its end, and its id is free again.
    submit(&w, "jobs", "gone").await;
    let receipt = reserve(&w, "jobs").await;
    call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        None,
    )
    .await;
    let (status, _) = call(&w, "GET", "/v1/queues/jobs/tasks/gone", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    submit(&w, "jobs", "gone").await;
}

#[tokio::test]
async fn a_token_of_one_queue_cannot_read_or_cancel_another_queues_task() {
    let w = world().await;
    submit(&w, "b-1", "secret").await;
    submit(&w, "a-1", "mine").await;
    for (method, uri, body) in [
        ("GET", "/v1/queues/b-1/tasks/secret", None),
        ("GET", "/v1/queues/b-1/tasks/secret?wait_seconds=1", None),
        ("DELETE", "/v1/queues/b-1/tasks/secret", None),
        (
            "POST",
            "/v1/queues/b-1/tasks/cancel",
            Some(json!({"ids": ["secret"]})),
        ),
        (
            "POST",
            "/v1/queues/b-1/tasks/cancel",
            Some(json!({"all_waiting": true})),
        ),
        ("GET", "/v1/queues/b-1/events", None),
        ("GET", "/v1/queues/b-1/retention", None),
        ("PUT", "/v1/queues/b-1/retention", Some(json!({}))),
    ] {
        let (status, answer) = call_as(&w, A_ONLY, method, uri, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {answer}");
    }
    let (_, task) = call(&w, "GET", "/v1/queues/b-1/tasks/secret", None).await;
    assert_eq!(task["state"], "waiting", "untouched");
    let (status, task) = call_as(&w, A_ONLY, "GET", "/v1/queues/a-1/tasks/mine", None).await;
    assert_eq!(
        (status, task["state"].clone()),
        (StatusCode::OK, json!("waiting"))
    );
    // The same id in another queue is another task: the scoped token's own queue has none.
    let (status, _) = call_as(&w, A_ONLY, "DELETE", "/v1/queues/a-1/tasks/secret", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = call_as(&w, A_ONLY, "DELETE", "/v1/queues/a-1/tasks/mine", None).await;
    assert_eq!(
        (status, body["outcome"].clone()),
        (StatusCode::OK, json!("cancelled"))
    );
}

/// `GET …/events/page` (ADR 0384): the same log as the SSE route, as bounded JSON pages read
/// from the oldest kept without waiting, each page's `cursor` starting the next; bounds on
/// `limit` name it; a cursor not of this log is a gap; the queue scope guards it.
#[tokio::test]
async fn the_events_log_reads_as_json_pages_from_a_cursor() {
    let w = world().await;
    for id in ["a", "b", "c"] {
        submit(&w, "jobs", id).await;
    }
    call(&w, "DELETE", "/v1/queues/jobs/tasks/c", None).await;
    let receipt = reserve(&w, "jobs").await;
    let (status, _) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/ack"),
        Some(json!({"result": {"ok": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let receipt = reserve(&w, "jobs").await;
    let (status, _) = call(
        &w,
        "POST",
        &format!("/v1/queues/jobs/reservations/{receipt}/fail"),
        Some(json!({"reason": "boom"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    let (status, first) = call(&w, "GET", "/v1/queues/jobs/events/page?limit=2", None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // Each event as `task:state`.
    let ends = |page: &Value| -> Vec<String> {
        page["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["task_id"].as_str().unwrap_or("?"),
                    e["state"].as_str().unwrap_or("?")
                )
            })
            .collect()
    };
    assert_eq!(ends(&first), ["c:cancelled", "a:completed"]);
    assert_eq!(first["gap"], false);
    assert_eq!(first["events"][1]["result"], json!({"ok": 1}));
    assert_eq!(first["cursor"], first["events"][1]["cursor"]);
    let after = first["cursor"].as_str().expect("cursor");
    let (_, second) = call(
        &w,
        "GET",
        &format!("/v1/queues/jobs/events/page?after={after}"),
        None,
    )
    .await;
    assert_eq!(ends(&second), ["b:dead"]);
    let after = second["cursor"].as_str().expect("cursor");
    let (_, end) = call(
        &w,
        "GET",
        &format!("/v1/queues/jobs/events/page?after={after}"),
        None,
    )
    .await;
    assert_eq!(end["events"], json!([]), "the log's end: {end}");
    assert_eq!(end["cursor"], second["cursor"]);

    for bad in ["limit=0", "limit=1001"] {
        let (status, body) = call(
            &w,
            "GET",
            &format!("/v1/queues/jobs/events/page?{bad}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert_eq!(body["field"], "limit", "{bad}");
    }
    let (status, gap) = call(
        &w,
        "GET",
        "/v1/queues/jobs/events/page?after=nonsense",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{gap}");
    assert_eq!((gap["gap"].clone(), ends(&gap).len()), (json!(true), 3));
    let (status, _) = call_as(&w, A_ONLY, "GET", "/v1/queues/jobs/events/page", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_openapi_document_describes_the_task_routes() {
    let doc: Value = serde_json::from_str(&Gateway::openapi_json()).expect("json");
    let paths = &doc["paths"];
    for (path, method) in [
        ("/v1/queues/{queue}/tasks/{id}", "get"),
        ("/v1/queues/{queue}/tasks/{id}", "delete"),
        ("/v1/queues/{queue}/tasks/cancel", "post"),
        ("/v1/queues/{queue}/events", "get"),
        ("/v1/queues/{queue}/events/page", "get"),
        ("/v1/queues/{queue}/retention", "get"),
        ("/v1/queues/{queue}/retention", "put"),
        ("/v1/queues/{queue}/reservations/{receipt}/ack", "post"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path}");
    }
    let schemas = &doc["components"]["schemas"];
    for name in [
        "TaskJson",
        "Cancelled",
        "CancelBody",
        "CancelAnswer",
        "RetentionJson",
        "RetentionBody",
        "AckBody",
        "TaskState",
        "EventsPage",
        "TaskEventJson",
    ] {
        assert!(schemas[name].is_object(), "{name}");
    }
    assert!(
        paths["/v1/queues/{queue}/reservations/{receipt}/ack"]["post"]["responses"]["413"]
            .is_object()
    );
}

/// ADR 0380, section 8, on the worker API: a reserved task carries its `deadline` and `retry`;
/// an extend past the deadline ends the attempt as a timeout (409 `timed_out`, the task back
/// with its `last_error`); a nack without `delay_seconds` waits what the task's `retry` says.
#[tokio::test]
async fn a_worker_meets_the_tasks_timeout_and_retry_policy() {
    let w = world().await;
    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/slow/tasks",
        Some(
            json!({"id": "t-slow", "payload": {}, "timeout_seconds": 0.3,
                    "retry": {"backoff": "fixed", "base_seconds": 30}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    submit(&w, "slow", "t-plain").await;

    let (status, body) = call(
        &w,
        "POST",
        "/v1/queues/slow/reservations",
        Some(json!({"max": 2, "visibility_seconds": 60})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let slow = &body["tasks"][0];
    let plain = &body["tasks"][1];
    assert_eq!(slow["id"], "t-slow");
    let deadline = slow["deadline"].as_f64().expect("a deadline");
    let until = slow["visible_until"].as_f64().expect("visible_until");
    assert!(
        (deadline - (until - 60.0 + 0.3)).abs() < 0.01,
        "{deadline} vs {until}"
    );
    assert_eq!(slow["retry"]["backoff"], "fixed");
    assert_eq!(slow["retry"]["base_seconds"].as_f64(), Some(30.0));
    assert!(plain.get("deadline").is_none() && plain.get("retry").is_none());

    // Within the deadline an extend is fine; past it, the attempt ends as a timeout.
    let receipt = switchyard_core::keys::quote(slow["receipt"].as_str().expect("receipt"));
    let extend = format!("/v1/queues/slow/reservations/{receipt}/extend");
    let (status, _) = call(&w, "POST", &extend, Some(json!({"visibility_seconds": 60}))).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(450)).await;
    let (status, body) = call(&w, "POST", &extend, Some(json!({"visibility_seconds": 60}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "timed_out", "{body}");
    let (status, body) = call(&w, "GET", "/v1/queues/slow/tasks/t-slow", None).await;
    assert_eq!(status, StatusCode::OK);
    // Its own policy (fixed, 30 s) scheduled it, and its error says why.
    assert_eq!(body["state"], "scheduled", "{body}");
    assert_eq!(body["last_error"], "timed out after 0.3 s", "{body}");

    // A nack without a delay: a task without a policy comes back at once.
    let receipt = switchyard_core::keys::quote(plain["receipt"].as_str().expect("receipt"));
    let (status, body) = call(
        &w,
        "POST",
        &format!("/v1/queues/slow/reservations/{receipt}/nack"),
        Some(json!({"reason": "again"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = call(&w, "GET", "/v1/queues/slow/tasks/t-plain", None).await;
    assert_eq!(body["state"], "waiting", "{body}");
}
