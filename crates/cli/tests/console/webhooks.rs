//! The Webhooks page (ADR 0395), and a run page's session line and cancel (ADR 0394, ADR 0396).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fantoccini::Locator;
use serde_json::json;

use crate::browser::Browser;
use crate::common::{Gateway, eventually, start_body};

/// A receiver on a free loopback port that answers every request 200 and counts them. Its
/// thread ends with the test binary.
fn receiver() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    let received = Arc::new(AtomicUsize::new(0));
    let count = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut length = 0usize;
            let mut line = String::new();
            // The head, then exactly the body, so the answer never races the request's end.
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (base, received)
}

/// A subscription created through the API to a loopback receiver (the gateway's `[webhooks]`
/// allows 127.0.0.1) is listed on the Webhooks page; a run's end is delivered and the chosen
/// subscription's log shows it with its status. A second subscription created from the page
/// shows its secret once; deleting the first asks first, then it leaves the list.
pub async fn webhooks_page_lists_subscriptions_and_deliveries(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (receiver, received) = receiver();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, "[webhooks]\nallowed_cidrs = [\"127.0.0.1\"]\n").expect("config");
    let gw = Gateway::embedded(dir.path(), &["--config", config.to_str().expect("path")]);
    let http = gw.http();
    let url = format!("{receiver}/hook");
    let created = http
        .post(
            "/v1/webhooks",
            &json!({"url": url, "events": ["run.completed"]}).to_string(),
        )
        .await;
    assert_eq!(created.code(), 201, "{}", created.text);
    let id = created.json()["id"].as_str().expect("an id").to_string();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-hook", "s-hook"))
            .await
            .code(),
        201
    );
    let ended = http
        .post(
            "/v1/runs/r-hook/events?session=s-hook",
            &json!({"kind": "run.completed", "output": [],
                    "usage": {"input_tokens": 1, "output_tokens": 1, "usd": null}})
            .to_string(),
        )
        .await;
    assert_eq!(ended.code(), 201, "{}", ended.text);
    eventually("the receiver got the run's end", || {
        let n = received.load(Ordering::SeqCst);
        async move { n >= 1 }
    })
    .await;

    b.goto(&format!("{}/#/webhooks", gw.base)).await;
    let row = format!("tr[data-webhook='{id}']");
    b.text_when(&format!("{row} .url"), |t| t == url).await;
    b.text_when(&format!("{row} .events"), |t| t == "run.completed")
        .await;
    b.text_when(&format!("{row} .namespaces"), |t| t == "every")
        .await;
    b.client
        .find(Locator::Css(&format!("{row} .webhook-link")))
        .await
        .expect("the subscription's link")
        .click()
        .await
        .expect("choose it");
    b.text_when("#webhook-id", |t| t == id).await;
    let delivery = "#deliveries tr[data-event='run.completed']";
    b.text_when(&format!("{delivery} .outcome"), |t| t == "HTTP 200")
        .await;
    b.text_when(&format!("{delivery} .attempt"), |t| t == "1")
        .await;
    b.text_when(&format!("{delivery} .latency"), |t| t.ends_with(" ms"))
        .await;
    b.screenshots("webhooks").await;

    // A second subscription from the page: its secret is shown once, and it joins the list.
    b.client
        .find(Locator::Css("details.create summary"))
        .await
        .expect("the form's toggle")
        .click()
        .await
        .expect("open the form");
    b.client
        .find(Locator::Css("#wh-url"))
        .await
        .expect("the URL field")
        .send_keys(&format!("{receiver}/second"))
        .await
        .expect("type");
    b.client
        .find(Locator::Css("#wh-create"))
        .await
        .expect("the subscribe button")
        .click()
        .await
        .expect("subscribe");
    b.text_when("#wh-secret", |t| t.starts_with("whsec_")).await;
    b.text_when("#webhooks", |t| t.contains("/second")).await;
    assert_eq!(b.count("tr[data-webhook]").await, 2);

    // Deleting asks first; "Yes, delete" deletes it, and only the second is left.
    b.client
        .find(Locator::Css("#delete-webhook"))
        .await
        .expect("the delete button")
        .click()
        .await
        .expect("delete");
    b.text_when("#delete-confirm", |t| t.contains(&id)).await;
    b.client
        .find(Locator::Css("#delete-yes"))
        .await
        .expect("the confirmation")
        .click()
        .await
        .expect("confirm");
    b.text_when("#webhook-result", |t| t == format!("Deleted {id}."))
        .await;
    b.text_when("#webhooks", |t| !t.contains(&id)).await;
    let left = http.get("/v1/webhooks").await.json();
    let urls: Vec<&str> = left["webhooks"]
        .as_array()
        .map(|l| l.iter().filter_map(|w| w["url"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(urls, [format!("{receiver}/second")]);
    // A refresh of the log already under way when the delete lands is answered 404, which
    // Chromium logs as a failed load; the page says the subscription is gone.
    b.assert_clean_console(&["404"]).await;
}

fn enqueue_body(run: &str, session: &str) -> String {
    json!({"run_id": run, "session_id": session, "invocable": "helper",
           "kind_of_invocable": "agent", "input": [{"type": "text", "text": "next"}],
           "multitask_strategy": "enqueue"})
    .to_string()
}

/// Two runs enqueued behind an open run show in its page's session line in order; removing the
/// first from the page takes it out of the line, and cancelling the holder from the page (grace
/// 0, with a reason) ends it cancelled, which starts the run left in the line.
pub async fn session_line_and_cancel_from_run_page(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-hold", "s-line"))
            .await
            .code(),
        201
    );
    for run in ["r-wait-1", "r-wait-2"] {
        let queued = http.post("/v1/runs", &enqueue_body(run, "s-line")).await;
        assert_eq!(queued.code(), 202, "{}", queued.text);
    }

    b.goto(&format!("{}/#/run/r-hold?session=s-line", gw.base))
        .await;
    b.text_when("#run-status", |t| t == "running").await;
    b.text_when("tr[data-line-run='r-wait-1'] .position", |t| t == "1")
        .await;
    b.text_when("tr[data-line-run='r-wait-2'] .position", |t| t == "2")
        .await;
    b.text_when("tr[data-line-run='r-wait-2'] .invocable", |t| t == "helper")
        .await;
    b.screenshots("run-line").await;

    b.client
        .find(Locator::Css("tr[data-line-run='r-wait-1'] .leave-line"))
        .await
        .expect("the remove button")
        .click()
        .await
        .expect("remove");
    b.text_when("#line-result", |t| t.starts_with("Removed r-wait-1"))
        .await;
    b.text_when("tr[data-line-run='r-wait-2'] .position", |t| t == "1")
        .await;
    assert_eq!(b.count("tr[data-line-run]").await, 1);
    let line = http.get("/v1/sessions/s-line/line").await.json();
    assert_eq!(line["runs"].as_array().map(Vec::len), Some(1), "{line}");

    b.client
        .find(Locator::Css("#cancel-reason"))
        .await
        .expect("the reason field")
        .send_keys("operator stop")
        .await
        .expect("type");
    b.client
        .find(Locator::Css("#cancel-grace"))
        .await
        .expect("the grace field")
        .send_keys("0")
        .await
        .expect("type");
    b.client
        .find(Locator::Css("#cancel-run"))
        .await
        .expect("the cancel button")
        .click()
        .await
        .expect("cancel");
    b.text_when("#cancel-result", |t| t == "Cancelled: the run ended now.")
        .await;
    b.text_when("#run-status", |t| t == "cancelled").await;
    let form_shown = b
        .client
        .find(Locator::Css("#cancel-form"))
        .await
        .expect("the cancel form")
        .is_displayed()
        .await
        .expect("displayed");
    assert!(!form_shown, "an ended run offers no cancel");
    let events = http.get("/v1/runs/r-hold?session=s-line").await.json()["events"].clone();
    let cancelled = events.as_array().and_then(|e| {
        e.iter()
            .find(|e| e["kind"] == "run.cancelled")
            .map(|e| e["payload"].to_string())
    });
    assert!(
        cancelled.is_some_and(|p| p.contains("operator stop")),
        "the reason is stored: {events}"
    );
    // The holder's end hands the session to the run left in the line.
    b.text_when("#line-runs", |t| t == "No run waits for this session.")
        .await;
    let next = http.get("/v1/runs/r-wait-2?session=s-line").await.json();
    assert_eq!(next["status"], "running", "{next}");
    b.screenshots("run-cancelled").await;
    b.assert_clean_console(&[]).await;
}
