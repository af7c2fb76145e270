//! An axum application of one's own that mounts switchyard's run and queue routes under
//! `/switchyard`, next to a route of its own, with its own API keys as the gateway's
//! authenticator (ADR 0368): each key is a principal with rights and namespace and queue scopes,
//! and revoking a key ends the streams it holds open.
//!
//! ```sh
//! cargo run -p switchyard-gateway --example embed
//! curl -s localhost:3000/hello
//! curl -s -X POST localhost:3000/switchyard/v1/runs -H 'x-api-key: dev-key' \
//!   -H 'content-type: application/json' -d '{"run_id": "r1", "invocable": "helper", "kind_of_invocable": "agent", "input": []}'
//! ```
//!
//! `tests/embed.rs` drives this same `app` in-process.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::http::request::Parts;
use axum::routing::get;
use switchyard_gateway::Gateway;
use switchyard_gateway::auth::{
    AuthError, Authenticator, Principal, Revocations, Right, async_trait, digest_hex,
};

/// The application's API keys, kept by their SHA-256 (a key itself is never stored): each opens
/// the gateway as one principal. [`revoke`](Self::revoke) takes a key away at once, open SSE
/// streams and long polls included.
#[derive(Debug, Default)]
pub struct ApiKeys {
    by_digest: RwLock<HashMap<String, Arc<Principal>>>,
    revocations: Revocations,
}

impl ApiKeys {
    /// Lets `key` in as `principal`.
    pub fn insert(&self, key: &str, principal: Principal) {
        let digest = digest_hex(key);
        let principal = Arc::new(principal.with_credential(digest.as_str()));
        self.keys().insert(digest, principal);
    }

    /// Takes `key` away: its requests are refused, and the gateway ends those it holds open.
    pub fn revoke(&self, key: &str) {
        self.keys().remove(&digest_hex(key));
        self.revocations.notify();
    }

    fn keys(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Principal>>> {
        self.by_digest.write().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, digest: &str) -> Option<Arc<Principal>> {
        let keys = self.by_digest.read().unwrap_or_else(|p| p.into_inner());
        keys.get(digest).cloned()
    }
}

#[async_trait]
impl Authenticator for ApiKeys {
    async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, AuthError> {
        let key = request
            .headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| AuthError::Unauthenticated("send `x-api-key: <key>`".into()))?;
        self.get(&digest_hex(key))
            .ok_or_else(|| AuthError::Unauthenticated("the API key is not known".into()))
    }

    /// The key is still there: held requests and stream tickets stand as long as their key.
    async fn current(&self, principal: &Arc<Principal>) -> Option<Arc<Principal>> {
        self.get(principal.credential()?)
    }

    fn revocations(&self) -> Option<&Revocations> {
        Some(&self.revocations)
    }
}

/// A principal that may do everything, in every namespace and on every queue.
pub fn admin(name: &str) -> switchyard_kit::core::Result<Principal> {
    Principal::new(name)
        .with_rights([Right::Read, Right::Write, Right::Metrics])
        .with_namespaces(["*"])?
        .with_queues(["*"])
}

/// The application: `/hello` is its own, `/switchyard/…` is the gateway's, admitted by the
/// gateway's authenticator (the `ApiKeys` it was built with).
pub fn app(gateway: &Gateway) -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello from the application" }))
        .nest("/switchyard", gateway.router())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = switchyard_kit::open_event_store("sqlite://switchyard-embed.db").await?;
    let bridge = switchyard_kit::open_stream_bridge("memory://").await?;
    let fleet = switchyard_kit::open_fleet_backend("sqlite://switchyard-embed.db").await?;
    let keys = Arc::new(ApiKeys::default());
    keys.insert("dev-key", admin("dev")?);
    let gateway = Gateway::builder(store, bridge, fleet)
        .authenticator(keys.clone())
        .console(false)
        .build()?;
    let stop = gateway.stop_handle();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://127.0.0.1:3000");
    axum::serve(listener, app(&gateway))
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            // Open SSE streams would otherwise hold axum's graceful shutdown forever.
            stop.stop();
        })
        .await?;
    gateway.shutdown().await;
    Ok(())
}
