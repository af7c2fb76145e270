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
