//! The console with `--auth`: the token form, a wrong token, a scoped one, stream tickets.

use std::sync::Arc;

use fantoccini::Locator;
use fantoccini::key::Key;

use crate::browser::Browser;
use crate::common::{Gateway, delta};

const SECRET: &str = "tenant-a-secret-0123456789";

/// A wrong token is refused and the form says so; the right one is kept for the tab, lists the
/// runs of its namespace, is refused another namespace, and follows a run live through a stream
/// ticket (the secret itself never goes into a URL).
pub async fn wrong_token_refused_right_one_scoped(b: Arc<Browser>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[tokens]]\nname = \"tenant-a\"\nsha256 = \"{}\"\nnamespaces = [\"tenant-a\"]\nqueues = [\"a-*\"]\nrights = [\"read\", \"write\"]\n\
             [[tokens]]\nname = \"admin\"\nsha256 = \"{}\"\nnamespaces = [\"*\"]\nqueues = [\"*\"]\nrights = [\"read\", \"write\"]\n",
            sha256_hex(SECRET),
            sha256_hex("admin-secret")
        ),
    )
    .expect("token file");
    let auth = tokens.to_str().expect("utf-8").to_string();
    let gw = Gateway::embedded(dir.path(), &["--auth", &auth]);
    let admin = gw.http().with_token("admin-secret");
    for (run, ns) in [("r-a", "tenant-a"), ("r-b", "tenant-b")] {
        let body = serde_json::json!({"run_id": run, "session_id": run, "namespace": ns,
            "invocable": "helper", "kind_of_invocable": "agent", "input": []});
        let r = admin.post("/v1/runs", &body.to_string()).await;
        assert_eq!(r.code(), 201, "{}", r.text);
    }

    b.goto(&format!("{}/#/runs?namespace=tenant-a", gw.base))
        .await;
    b.text_when("h1", |t| t.contains("needs a token")).await;
    // A first visit has no error to show: nothing stands where the notice would be.
    let form = b.text_when("#main", |t| t.contains("Bearer token")).await;
    assert!(!form.contains("null"), "the token form: {form:?}");
    b.screenshots("token-form").await;
    let field = b
        .client
        .find(Locator::Css("#token"))
        .await
        .expect("token field");
    field.send_keys("not-a-token").await.expect("type");
    field
        .send_keys(&Key::Enter.to_string())
        .await
        .expect("submit");
    b.text_when("#token-error", |t| t.contains("refused")).await;

    let field = b
        .client
        .find(Locator::Css("#token"))
        .await
        .expect("token field");
    field.send_keys(SECRET).await.expect("type");
    field
        .send_keys(&Key::Enter.to_string())
        .await
        .expect("submit");
    b.text_when("tr[data-run-id='r-a'] .run-link", |t| t == "r-a")
        .await;
    assert_eq!(b.count("tr[data-run-id='r-b']").await, 0);
    // Kept for the tab's session only, never in local storage.
    let stored = b
        .client
        .execute(
            "return [sessionStorage.getItem('switchyard.token'), localStorage.length];",
            vec![],
        )
        .await
        .expect("storage");
    assert_eq!(stored, serde_json::json!([SECRET, 0]));

    b.goto(&format!("{}/#/runs?namespace=tenant-b", gw.base))
        .await;
    b.text_when("#runs", |t| t.contains("Not allowed with this token"))
        .await;

    // Live through a stream ticket: EventSource cannot send the bearer header.
    b.goto(&format!(
        "{}/#/run/r-a?session=r-a&namespace=tenant-a",
        gw.base
    ))
    .await;
    b.text_when("#live", |t| t == "live").await;
    let http = gw.http().with_token(SECRET);
    for text in ["tick", "et"] {
        let r = http
            .post(
                "/v1/runs/r-a/events?session=r-a&namespace=tenant-a",
                &delta(text),
            )
            .await;
        assert_eq!(r.code(), 201, "{}", r.text);
    }
    b.text_when("#timeline .message", |t| t == "ticket").await;
    let urls = b
        .client
        .execute(
            "return performance.getEntriesByType('resource').map(e => e.name).join(' ');",
            vec![],
        )
        .await
        .expect("resource urls");
    let urls = urls.as_str().unwrap_or_default().to_string();
    assert!(!urls.contains(SECRET), "the secret went into a URL: {urls}");
    // A ticket opens only the run it was issued for, and the bearer secret is no ticket.
    let ticket = http
        .post(
            "/v1/stream-tickets",
            r#"{"run_id": "r-a", "session": "r-a", "namespace": "tenant-a"}"#,
        )
        .await;
    assert_eq!(ticket.code(), 201, "{}", ticket.text);
    let t = ticket.json()["ticket"]
        .as_str()
        .expect("ticket")
        .to_string();
    let plain = gw.http();
    let other = plain
        .get(&format!(
            "/v1/runs/r-b/stream?session=r-b&namespace=tenant-b&ticket={t}"
        ))
        .await;
    assert_eq!(other.code(), 401, "{}", other.text);
    let secret_as_ticket = plain
        .get(&format!(
            "/v1/runs/r-a/stream?session=r-a&namespace=tenant-a&ticket={SECRET}"
        ))
        .await;
    assert_eq!(secret_as_ticket.code(), 401);
    let refused = http
        .post(
            "/v1/stream-tickets",
            r#"{"run_id": "r-b", "session": "r-b", "namespace": "tenant-b"}"#,
        )
        .await;
    assert_eq!(refused.code(), 403, "{}", refused.text);
    b.screenshots("run-page-with-token").await;
    // The wrong token's 401 and the other namespace's 403 are logged as failed loads.
    b.assert_clean_console(&["401", "403"]).await;
}

fn sha256_hex(secret: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}
