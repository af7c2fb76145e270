//! The runs list and the run page, live.

use std::sync::Arc;

use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::json;

use crate::browser::Browser;
use crate::common::{Gateway, Http, delta, start_body};

pub async fn append(http: &Http, run: &str, session: &str, payload: serde_json::Value) {
    let r = http
        .post(
            &format!("/v1/runs/{run}/events?session={session}"),
            &payload.to_string(),
        )
        .await;
    assert_eq!(r.code(), 201, "{}", r.text);
}

fn tool_calls() -> [serde_json::Value; 2] {
    [
        json!({"kind": "tool.call.started", "call_id": "c1", "tool": "search",
               "args": {"q": "rust sse"}}),
        json!({"kind": "tool.call.completed", "call_id": "c1", "tool": "search",
               "result_preview": "3 hits", "result_size": 120,
               "result_sha256": "0".repeat(64), "artifact_id": null, "error": null}),
    ]
}

/// A run started and appended through the HTTP API appears in the list (which updates by
/// itself), and its page shows the text deltas merged into one message as they stream, the tool
/// call with its arguments and result, the usage and the final status, each event once.
pub async fn list_and_live_run_page(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-live", "s-live"))
            .await
            .code(),
        201
    );
    append(
        &http,
        "r-live",
        "s-live",
        serde_json::from_str(&delta("Hel")).expect("json"),
    )
    .await;

    b.goto(&format!("{}/", gw.base)).await;
    b.text_when("tr[data-run-id='r-live'] .status", |t| t == "running")
        .await;
    // Each run shows its session (the list's `session_id`).
    b.text_when("tr[data-run-id='r-live'] .session", |t| t == "s-live")
        .await;
    // The list follows new runs without a reload.
    assert_eq!(
        http.post("/v1/runs", &start_body("r-other", "s-other"))
            .await
            .code(),
        201
    );
    b.text_when("tr[data-run-id='r-other'] .run-link", |t| t == "r-other")
        .await;
    b.screenshots("runs-list").await;

    // Keyboard: the run's link opens with Enter.
    let link = b
        .client
        .find(Locator::Css("tr[data-run-id='r-live'] .run-link"))
        .await
        .expect("the run's link");
    link.send_keys(&Key::Enter.to_string())
        .await
        .expect("Enter");
    b.text_when("#run-id", |t| t == "r-live").await;
    b.text_when("#live", |t| t == "live").await;
    b.text_when("#timeline .message", |t| t == "Hel").await;

    for text in ["lo", ", world"] {
        append(
            &http,
            "r-live",
            "s-live",
            serde_json::from_str(&delta(text)).expect("json"),
        )
        .await;
    }
    b.text_when("#timeline .message", |t| t == "Hello, world")
        .await;
    assert_eq!(
        b.count("#timeline [data-kind='text.delta']").await,
        1,
        "one merged message"
    );
    for call in tool_calls() {
        append(&http, "r-live", "s-live", call).await;
    }
    b.text_when(".tool-preview", |t| t == "3 hits").await;
    b.text_when(".tool-args", |t| t.contains("rust sse")).await;
    append(
        &http,
        "r-live",
        "s-live",
        json!({"kind": "run.completed", "output": [{"type": "text", "text": "Hello, world"}],
               "usage": {"input_tokens": 3, "output_tokens": 5, "usd": null}}),
    )
    .await;
    b.text_when("#run-status", |t| t == "completed").await;
    b.text_when("#usage", |t| {
        t.contains("3 input tokens") && t.contains("5 output")
    })
    .await;
    // seq 0..=6, each once: the deltas share one entry, the result joins its call.
    let seqs = b
        .client
        .execute(
            "return [...document.querySelectorAll('#timeline > li')].map(li => +li.dataset.seq);",
            vec![],
        )
        .await
        .expect("seqs");
    assert_eq!(seqs, json!([0, 1, 4, 6]), "the result joins its call");
    b.screenshots("run-page").await;
    b.assert_clean_console(&[]).await;
}

/// Two tabs show the same interrupted run and both submit the resume form: one resumes it, the
/// other is told it was not resumable, and the run has exactly one `run.resumed`.
pub async fn resume_from_two_tabs_one_wins(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = Gateway::embedded(dir.path(), &[]);
    let http = gw.http();
    assert_eq!(
        http.post("/v1/runs", &start_body("r-ask", "s-ask"))
            .await
            .code(),
        201
    );
    append(
        &http,
        "r-ask",
        "s-ask",
        json!({"kind": "run.interrupted", "interrupt_id": "i1", "reason": "approval",
               "payload": {"question": "ship it?"}, "thread_id": null, "expected_resume": null}),
    )
    .await;
    let page = format!("{}/#/run/r-ask?session=s-ask", gw.base);
    let first = b.client.window().await.expect("window");
    b.goto(&page).await;
    b.text_when("#resume", |t| t.contains("ship it?")).await;
    b.screenshots("run-resume-form").await;
    let second = b.client.new_window(true).await.expect("new tab").handle;
    b.client
        .switch_to_window(second.clone())
        .await
        .expect("switch");
    b.goto(&page).await;
    b.text_when("#run-status", |t| t == "waiting_human").await;
    for tab in [&first, &second] {
        b.client
            .switch_to_window(tab.clone())
            .await
            .expect("switch");
        let value = b
            .client
            .find(Locator::Css("#resume-value"))
            .await
            .expect("answer field");
        value.send_keys("yes").await.expect("type");
    }
    for tab in [&first, &second] {
        b.client
            .switch_to_window(tab.clone())
            .await
            .expect("switch");
        // Keyboard: Enter in the reason field submits the form.
        let reason = b
            .client
            .find(Locator::Css("#resume-reason"))
            .await
            .expect("reason");
        reason
            .send_keys(&Key::Enter.to_string())
            .await
            .expect("submit");
        b.text_when("#resume-result", |t| !t.is_empty()).await;
    }
    b.client.switch_to_window(first).await.expect("switch");
    let a = b.text_when("#resume-result", |t| !t.is_empty()).await;
    b.client.switch_to_window(second).await.expect("switch");
    let c = b.text_when("#resume-result", |t| !t.is_empty()).await;
    let mut outcomes = [a.clone(), c.clone()];
    outcomes.sort();
    assert!(
        outcomes[0].starts_with("Not resumed") && outcomes[1] == "Resumed.",
        "one tab wins, the other is refused: {a:?} / {c:?}"
    );
    b.text_when("#run-status", |t| t == "running").await;
    let events = http.get("/v1/runs/r-ask?session=s-ask").await.json()["events"].clone();
    let resumed = events
        .as_array()
        .map(|e| e.iter().filter(|e| e["kind"] == "run.resumed").count());
    assert_eq!(resumed, Some(1));
    // The losing tab's 409 is logged by Chromium as a failed resource load; nothing else.
    b.assert_clean_console(&["409"]).await;
}
