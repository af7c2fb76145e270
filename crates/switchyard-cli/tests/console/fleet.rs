//! The queue pages and the workers page.

use std::sync::Arc;

use fantoccini::Locator;
use serde_json::json;

use crate::browser::Browser;
use crate::common::Gateway;

/// Dead letters written to the gateway's fleet show on the queue page; replaying two of them
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

    b.goto(&format!("{}/#/queues", gw.base)).await;
    b.text_when("tr[data-queue='jobs'] .dead", |t| t == "3")
        .await;
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
    b.text_when("#replay-result", |t| t == "Replayed 2.").await;
    b.text_when("#c-dead", |t| t == "1").await;
    b.text_when("#c-normal", |t| t == "2").await;
    let stats = gw.http().get("/v1/queues/jobs").await.json();
    assert_eq!((&stats["dead"], &stats["waiting"]), (&json!(1), &json!(2)));
    b.text_when("#tasks", |t| t.contains("d0")).await;
    b.screenshots("queue-page").await;

    b.goto(&format!("{}/#/workers", gw.base)).await;
    b.text_when("tr[data-worker='w1']", |t| t.contains("jobs"))
        .await;
    b.screenshots("workers").await;
    b.assert_clean_console(&[]).await;
}
