//! The queue pages and the workers page.

use std::sync::Arc;

use std::time::Duration;

use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::json;
use switchyard_kit::core::Receipt;

use crate::browser::Browser;
use crate::common::Gateway;

/// Dead letters written to the gateway's fleet show on the queue page; requeueing the oldest two
/// from the page moves them back to the queue and the counts change. The queue list and the
/// workers page show the queue and a registered worker.
pub async fn dead_letter_replayed(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("the gateway's fleet");
    for i in 0..3 {
        fleet
            .queue_dead("jobs", format!("{{\"id\": \"d{i}\"}}").as_bytes())
            .await
            .expect("dead letter");
    }
    fleet
        .worker_register("jobs", "w1", &json!({"cpu": 4}))
        .await
        .expect("register");
    // A queue another writer filled under a name no queue route accepts is not listed, so the
    // page still shows the others.
    fleet
        .queue_dead("bad\nname", b"{\"id\": \"x\"}")
        .await
        .expect("dead letter under a bad name");

    b.goto(&format!("{}/#/queues", gw.base)).await;
    b.text_when("tr[data-queue='jobs'] .dead", |t| t == "3")
        .await;
    assert_eq!(b.count("tr[data-queue]").await, 1, "only `jobs` is listed");
    b.screenshots("queues").await;
    b.client
        .find(Locator::Css("tr[data-queue='jobs'] a"))
        .await
        .expect("the queue's link")
        .click()
        .await
        .expect("open the queue");
    b.text_when("#c-dead", |t| t == "3").await;
    b.text_when("#dead-letters", |t| t.contains("d0") && t.contains("d2"))
        .await;
    let limit = b
        .client
        .find(Locator::Css("#replay-limit"))
        .await
        .expect("limit");
    limit.send_keys("2").await.expect("type");
    b.client
        .find(Locator::Css("#replay"))
        .await
        .expect("replay button")
        .click()
        .await
        .expect("replay");
    b.text_when("#replay-result", |t| t == "Requeued 2.").await;
    b.text_when("#c-dead", |t| t == "1").await;
    b.text_when("#c-normal", |t| t == "2").await;
    let stats = gw.http().get("/v1/queues/jobs").await.json();
    assert_eq!((&stats["dead"], &stats["waiting"]), (&json!(1), &json!(2)));
    b.text_when("#tasks", |t| t.contains("d0")).await;
    b.screenshots("queue-page").await;

    // An HTTP worker (ADR 0352) shows beside the one the library registered, with its tasks.
    let http = gw.http();
    let reg = http
        .request(hyper::Method::PUT, "/v1/workers/jobs/http-w", Some("{}"))
        .await;
    assert_eq!(reg.code(), 200, "{}", reg.text);
    let beat = http
        .post(
            "/v1/workers/jobs/http-w/heartbeat",
            &json!({"state": "RUNNING", "tasks": ["t-7", "t-8"]}).to_string(),
        )
        .await;
    assert_eq!(beat.code(), 200, "{}", beat.text);
    b.goto(&format!("{}/#/workers", gw.base)).await;
    b.text_when("tr[data-worker='w1']", |t| t.contains("jobs"))
        .await;
    b.text_when("tr[data-worker='http-w'] .held", |t| t == "t-7, t-8")
        .await;
    b.text_when("tr[data-worker='http-w']", |t| t.contains("RUNNING"))
        .await;
    b.screenshots("workers").await;
    b.assert_clean_console(&[]).await;
}

/// Two of three dead letters picked with their checkboxes (one by mouse, one by keyboard) and
/// requeued with "Requeue selected": exactly those two are back in the queue, the third stays
/// dead, the counts change. A reserved task shows in the in-flight list with its progress. Pause
/// from the page (by keyboard): the gateway's stats say paused; resume clears it.
pub async fn dead_letters_chosen_and_queue_paused(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("the gateway's fleet");
    for i in 0..3 {
        fleet
            .queue_dead(
                "jobs",
                format!("{{\"id\": \"d{i}\", \"payload\": {{\"n\": {i}}}}}").as_bytes(),
            )
            .await
            .expect("dead letter");
    }

    b.goto(&format!("{}/#/queue/jobs", gw.base)).await;
    b.text_when("#c-dead", |t| t == "3").await;
    b.text_when("#dead-letters", |t| t.contains("d0") && t.contains("d2"))
        .await;
    assert_eq!(b.count("#dead-letters .dl-pick").await, 3);
    let picks = b
        .client
        .find_all(Locator::Css("#dead-letters .dl-pick"))
        .await
        .expect("checkboxes");
    // The first by mouse, the third by keyboard (space toggles a focused checkbox).
    picks[0].clone().click().await.expect("pick d0");
    picks[2]
        .clone()
        .send_keys(" ")
        .await
        .expect("pick d2 with the keyboard");
    b.text_when("#requeue-selected", |t| t.contains("(2)"))
        .await;
    b.screenshots("dead-letters-chosen").await;
    b.client
        .find(Locator::Css("#requeue-selected"))
        .await
        .expect("requeue selected")
        .click()
        .await
        .expect("requeue");
    b.text_when("#replay-result", |t| t == "Requeued 2.").await;
    b.text_when("#c-dead", |t| t == "1").await;
    b.text_when("#c-normal", |t| t == "2").await;
    b.text_when("#dead-letters", |t| {
        t.contains("d1") && !t.contains("d0") && !t.contains("d2")
    })
    .await;
    let stats = http.get("/v1/queues/jobs").await.json();
    assert_eq!((&stats["dead"], &stats["waiting"]), (&json!(1), &json!(2)));
    let waiting = http.get("/v1/queues/jobs/tasks").await.json();
    let ids: Vec<&str> = waiting["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, ["d0", "d2"], "exactly the chosen letters are back");
    let dead = http.get("/v1/queues/jobs/dead-letters").await.json();
    assert_eq!(dead["dead_letters"][0]["id"], "d1");
    assert_eq!(dead["total"], 1);

    // A worker holds d0 and reports progress: the in-flight list shows it.
    let delivery = fleet
        .queue_reserve("jobs", Duration::ZERO, Duration::from_secs(600))
        .await
        .expect("reserve")
        .expect("a task");
    let receipt: Receipt = delivery.receipt.clone();
    assert!(
        fleet
            .queue_progress("jobs", &receipt, br#"{"done": 7, "of": 10}"#)
            .await
            .expect("progress")
    );
    b.text_when("#in-flight", |t| {
        t.contains("d0") && t.contains("\"done\":7")
    })
    .await;

    // Pause with the keyboard: focus the button, press Enter.
    b.text_when("#q-state", |t| t == "Running").await;
    let toggle = b
        .client
        .find(Locator::Css("#pause-toggle"))
        .await
        .expect("pause button");
    toggle
        .send_keys(&String::from(char::from(Key::Enter)))
        .await
        .expect("press pause");
    b.text_when("#q-state", |t| t == "Paused").await;
    b.text_when("#pause-toggle", |t| t == "Resume").await;
    let stats = http.get("/v1/queues/jobs").await.json();
    assert_eq!(stats["paused"], json!(true), "{stats}");
    b.screenshots("queue-paused").await;
    b.client
        .find(Locator::Css("#pause-toggle"))
        .await
        .expect("resume button")
        .click()
        .await
        .expect("resume");
    b.text_when("#q-state", |t| t == "Running").await;
    assert_eq!(
        http.get("/v1/queues/jobs").await.json()["paused"],
        json!(false)
    );
    b.assert_clean_console(&[]).await;
}

/// A task by id (ADR 0380): the queue page's form opens a waiting task's page, whose button
/// cancels it; the in-flight table's Cancel button reaches a running task, whose page then says
/// cancel requested, and cancelled once its worker's ack meets 409 `cancelled`.
pub async fn task_page_and_cancel(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    for id in ["t-run", "t-wait"] {
        let body = json!({"id": id, "payload": {"n": 1}}).to_string();
        assert_eq!(http.post("/v1/queues/jobs/tasks", &body).await.code(), 201);
    }
    let reserved = http
        .post("/v1/queues/jobs/reservations", r#"{"max": 1}"#)
        .await
        .json();
    assert_eq!(reserved["tasks"][0]["id"], "t-run");
    let receipt = reserved["tasks"][0]["receipt"]
        .as_str()
        .expect("receipt")
        .to_string();
    let verb = |v: &str| format!("/v1/queues/jobs/reservations/{receipt}/{v}");
    assert_eq!(
        http.post(&verb("progress"), r#"{"done": 1}"#).await.code(),
        200
    );

    b.goto(&format!("{}/#/queue/jobs", gw.base)).await;
    b.text_when("#in-flight", |t| t.contains("t-run")).await;
    let find = b
        .client
        .find(Locator::Css("#find-task"))
        .await
        .expect("the task id field");
    find.send_keys("t-wait").await.expect("type");
    find.send_keys(&Key::Enter.to_string())
        .await
        .expect("submit");
    b.text_when("#t-state", |t| t == "waiting").await;
    b.client
        .find(Locator::Css("#cancel-task"))
        .await
        .expect("the cancel button")
        .click()
        .await
        .expect("cancel");
    b.text_when("#cancel-result", |t| t.starts_with("Cancelled"))
        .await;
    b.text_when("#t-state", |t| t == "cancelled").await;
    b.screenshots("task-page").await;

    b.goto(&format!("{}/#/queue/jobs", gw.base)).await;
    b.text_when("#c-cancelled", |t| t == "1").await;
    b.client
        .find(Locator::Css("tr[data-task='t-run'] button.cancel-task"))
        .await
        .expect("the in-flight cancel button")
        .click()
        .await
        .expect("cancel");
    b.text_when("#in-flight-result", |t| t.contains("requested"))
        .await;
    b.client
        .find(Locator::Css("tr[data-task='t-run'] a"))
        .await
        .expect("the task's link")
        .click()
        .await
        .expect("open the task");
    b.text_when("#t-state", |t| t == "running (cancel requested)")
        .await;
    b.text_when("#t-progress", |t| t.contains("\"done\": 1"))
        .await;
    let refused = http.post(&verb("ack"), r#"{"result": 1}"#).await;
    assert_eq!(
        (refused.code(), refused.json()["error"].clone()),
        (409, json!("cancelled"))
    );
    b.text_when("#t-state", |t| t == "cancelled").await;
    b.text_when("#t-result", |t| t == "—").await;
    b.assert_clean_console(&[]).await;
    drop(gw);
}

/// Finished tasks and readable dead letters (ADR 0384). The queue page lists the tasks that
/// ended (completed with its result, cancelled, dead); the state filter narrows the rows, is
/// kept in the address, and a row's link opens the task page. Each dead letter shows its task id
/// (a link), attempts, last error and payload, the raw envelope only once "raw" is opened; a
/// letter that is not JSON says it has no id and shows its bytes as its payload.
pub async fn finished_tasks_filtered_and_dead_letters_readable(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    let submit = |id: &str, extra: serde_json::Value| {
        let mut body = json!({"id": id, "payload": {"image": format!("{id}.png")}});
        if let (Some(o), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        body.to_string()
    };
    let reserve = || async {
        let r = http
            .post("/v1/queues/jobs/reservations", r#"{"max": 1}"#)
            .await
            .json();
        let id = r["tasks"][0]["id"].as_str().expect("a task").to_string();
        let receipt = r["tasks"][0]["receipt"]
            .as_str()
            .expect("receipt")
            .to_string();
        (id, format!("/v1/queues/jobs/reservations/{receipt}"))
    };
    for id in ["ok-1", "ok-2", "gone"] {
        assert_eq!(
            http.post("/v1/queues/jobs/tasks", &submit(id, json!({})))
                .await
                .code(),
            201
        );
    }
    assert_eq!(
        http.post(
            "/v1/queues/jobs/tasks",
            &submit("bad", json!({"max_attempts": 2}))
        )
        .await
        .code(),
        201
    );
    let cancel = http
        .request(hyper::Method::DELETE, "/v1/queues/jobs/tasks/gone", None)
        .await;
    assert_eq!(cancel.code(), 200, "{}", cancel.text);
    for (want, result) in [("ok-1", r#"{"result": {"rows": 3}}"#), ("ok-2", "{}")] {
        let (id, at) = reserve().await;
        assert_eq!(id, want);
        assert_eq!(http.post(&format!("{at}/ack"), result).await.code(), 200);
    }
    // "bad" fails twice, the second time its last attempt: dead, with that error.
    for reason in ["flaky", "disk full"] {
        let (id, at) = reserve().await;
        assert_eq!(id, "bad");
        let nack = http
            .post(
                &format!("{at}/nack"),
                &json!({ "reason": reason }).to_string(),
            )
            .await;
        assert_eq!(nack.code(), 200, "{}", nack.text);
    }
    let url = format!("sqlite://{}", dir.path().join("switchyard.db").display());
    let fleet = switchyard_kit::open_fleet_backend(&url)
        .await
        .expect("the gateway's fleet");
    fleet
        .queue_dead("jobs", b"not json at all")
        .await
        .expect("a letter without an id");

    b.goto(&format!("{}/#/queue/jobs", gw.base)).await;
    b.text_when("tr[data-task='ok-1'] .state", |t| t == "completed")
        .await;
    b.text_when("tr[data-task='ok-1'] .detail", |t| {
        t.contains(r#"{"rows":3}"#)
    })
    .await;
    b.text_when("tr[data-task='gone'] .state", |t| t == "cancelled")
        .await;
    b.text_when("tr[data-task='bad'] .state", |t| t == "dead")
        .await;
    b.text_when("tr[data-task='bad'] .detail", |t| t == "disk full")
        .await;
    assert_eq!(b.count("#finished tr[data-task]").await, 4);

    // The dead letter, read: id, attempts, the last error, the payload; raw hidden.
    let letter = "#dead-letters li[data-task='bad']";
    b.text_when(&format!("{letter} .letter-task"), |t| t == "bad")
        .await;
    b.text_when(&format!("{letter} [data-field='attempts']"), |t| {
        t == "2 of 2"
    })
    .await;
    b.text_when(&format!("{letter} [data-field='error']"), |t| {
        t == "disk full"
    })
    .await;
    b.text_when(&format!("{letter} [data-field='error-attempt']"), |t| {
        t == "2"
    })
    .await;
    b.text_when(&format!("{letter} [data-field='error-at']"), |t| {
        !t.is_empty() && t != "—"
    })
    .await;
    b.text_when(&format!("{letter} [data-field='payload']"), |t| {
        t.contains("\"image\": \"bad.png\"")
    })
    .await;
    let shown = b.text_when(letter, |t| t.contains("raw")).await;
    assert!(
        !shown.contains("last_error") && !shown.contains("\"attempt\""),
        "the raw envelope is hidden: {shown}"
    );
    b.text_when("#dead-letters li[data-task='']", |t| {
        t.contains("Task without an id") && t.contains("(not JSON) not json at all")
    })
    .await;
    b.client
        .find(Locator::Css(&format!("{letter} details.raw summary")))
        .await
        .expect("the raw toggle")
        .click()
        .await
        .expect("open raw");
    b.text_when(&format!("{letter} details.raw pre"), |t| {
        t.contains("\"last_error\"") && t.contains("\"message\": \"disk full\"")
    })
    .await;
    b.screenshots("finished-and-letters").await;

    // The filter: only the cancelled one, then only the dead one; kept in the address.
    let filter = b
        .client
        .find(Locator::Css("#finished-filter"))
        .await
        .expect("the state filter");
    filter
        .select_by_value("cancelled")
        .await
        .expect("choose cancelled");
    b.text_when("#finished", |t| t.contains("gone") && !t.contains("ok-1"))
        .await;
    assert_eq!(b.count("#finished tr[data-task]").await, 1);
    filter.select_by_value("dead").await.expect("choose dead");
    b.text_when("#finished", |t| t.contains("bad") && !t.contains("gone"))
        .await;
    assert_eq!(b.count("#finished tr[data-task]").await, 1);
    b.text_when("#finished-summary", |t| t.starts_with("1 dead of 4 tasks"))
        .await;
    let address = b.client.current_url().await.expect("url");
    assert!(
        address.as_str().ends_with("#/queue/jobs?finished=dead"),
        "{address}"
    );
    b.client
        .find(Locator::Css("#finished tr[data-task='bad'] a"))
        .await
        .expect("the task's link")
        .click()
        .await
        .expect("open the task");
    b.text_when("#t-state", |t| t == "dead").await;
    b.text_when("[data-field='last_error']", |t| t == "disk full")
        .await;
    // Back on the queue page, the filter is still `dead`.
    b.client.back().await.expect("back");
    b.text_when("#finished", |t| t.contains("bad") && !t.contains("ok-1"))
        .await;
    assert_eq!(b.count("#finished tr[data-task]").await, 1);
    b.assert_clean_console(&[]).await;
    drop(gw);
}
