//! The console (ADR 0261): a web UI for runs, live streams, queues, dead letters, workers and
//! webhooks, served by `switchyard serve` at `/`.
//!
//! Plain HTML, CSS and JavaScript modules, embedded in the binary with `include_str!`: no
//! JavaScript toolchain builds it and nothing is fetched at run time. The page speaks only the
//! gateway's public `/v1` API, with the operator's bearer token kept in the tab's
//! `sessionStorage`, and opens run streams with stream tickets (ADR 0260) because `EventSource`
//! cannot send `Authorization`.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// Every embedded file: (name under `/console/`, content type, bytes).
const ASSETS: [(&str, &str, &str); 9] = [
    ("app.js", JS, include_str!("assets/app.js")),
    ("api.js", JS, include_str!("assets/api.js")),
    ("runs.js", JS, include_str!("assets/runs.js")),
    ("run.js", JS, include_str!("assets/run.js")),
    ("fleet.js", JS, include_str!("assets/fleet.js")),
    ("task.js", JS, include_str!("assets/task.js")),
    ("finished.js", JS, include_str!("assets/finished.js")),
    ("webhooks.js", JS, include_str!("assets/webhooks.js")),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

const INDEX: &str = include_str!("assets/index.html");

/// Scripts and styles only from the gateway itself, no inline script, no framing: the page holds
/// a bearer token, so nothing foreign may run next to it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The console's routes: `/` and `/console/{file}`. They need no token (the page holds none of
/// the data); every request the page then makes goes through the `/v1` admission.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/console/{file}", get(asset))
}

fn page(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => page(content_type, body),
        None => (
            StatusCode::NOT_FOUND,
            "no such console file; the console starts at /",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        for (_, _, body) in ASSETS.iter().chain([("index.html", "", INDEX)].iter()) {
            for part in body.split("/console/").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .collect();
                assert!(
                    ASSETS.iter().any(|(n, _, _)| *n == name),
                    "{name} is referenced but not embedded"
                );
            }
        }
    }
}
