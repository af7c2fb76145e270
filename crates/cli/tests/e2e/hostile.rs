//! A smoke run of generated hostile requests against the real binary with tokens on (the full
//! property test runs in-process: `gateway::tests`): never a 5xx, every error JSON with a request
//! id.

use hyper::Method;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::Gateway;
use crate::security::token_file;

/// Every route the binary documents, from its own `/openapi.json` (built from the gateway's route
/// table), with each path parameter as `ID`: a new route is exercised as soon as it is declared.
async fn routes(gw: &Gateway) -> Vec<(Method, String)> {
    let doc = gw.http().get("/openapi.json").await.json();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let mut concrete = String::new();
        let mut in_param = false;
        for c in path.chars() {
            match c {
                '{' => in_param = true,
                '}' => {
                    in_param = false;
                    concrete.push_str("ID");
                }
                _ if in_param => {}
                _ => concrete.push(c),
            }
        }
        for method in item.as_object().expect("path item").keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            out.push((method, concrete.clone()));
        }
    }
    assert!(out.len() > 30, "{out:?}");
    out
}

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

#[tokio::test]
async fn generated_hostile_requests_never_get_a_5xx() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, [a, _, _]) = token_file(dir.path());
    let gw = Gateway::embedded(dir.path(), &["--auth", file.to_str().expect("path")]);
    let routes = routes(&gw).await;
    let mut rng = StdRng::seed_from_u64(14);
    let ids = [
        "r",
        "tenant-a",
        "jobs-1",
        "%00",
        "%F0%9F%95%B4",
        "a%2Fb",
        "%7B%7D",
        "x%20y",
    ];
    let queries = [
        "",
        "?namespace=tenant-a",
        "?namespace=tenant-b",
        "?namespace=tenant-a&namespace=x",
        "?session=%0A&from_seq=-1",
        "?limit=99999999999999999999",
        "?status=nope&automation_type=jobs-1",
        "?%zz=1",
    ];
    let bodies = [
        "",
        "{}",
        "[1]",
        "{\"kind\": \"text.delta\", \"message_id\": \"m\", \"text\": \"x\"}",
        "{\"run_id\": \"r\", \"namespace\": \"tenant-a\", \"invocable\": \"h\", \"kind_of_invocable\": \"agent\", \"input\": [], \"stale_after_secs\": 4000000000}",
        "{\"payload\": 1, \"ttl_seconds\": 18446744073709551615, \"max_attempts\": -1}",
        "{\"limit\": 18446744073709551615, \"priority\": 99999999999999999999}",
        "\u{0}\u{1}garbage",
    ];
    let content_types = ["application/json", "text/plain", "application/json;;", ""];
    for _ in 0..150 {
        let (method, route) = &routes[rng.random_range(0..routes.len())];
        let path = format!(
            "{}{}",
            route.replace("ID", pick(&mut rng, &ids)),
            pick(&mut rng, &queries)
        );
        let body = pick(&mut rng, &bodies);
        let http = if rng.random_bool(0.8) {
            gw.http().with_token(&a)
        } else {
            gw.http()
        };
        let mut headers = Vec::new();
        let ct = pick(&mut rng, &content_types);
        if !ct.is_empty() {
            headers.push(("content-type", ct));
        }
        if rng.random_bool(0.2) {
            headers.push(("last-event-id", "9999999999999999999999-0"));
        }
        // The queue's end events are an endless stream once admitted: its head is the answer.
        let r = http
            .request_unless_stream(method.clone(), &path, Some(body), &headers)
            .await;
        assert!(
            r.code() < 500,
            "{method} {path} {body:?}: {} {}",
            r.code(),
            r.text
        );
        if r.code() >= 400 {
            let json = r.json();
            assert!(
                json["error"].is_string() && json["request_id"].is_string(),
                "{}",
                r.text
            );
        }
    }
}
