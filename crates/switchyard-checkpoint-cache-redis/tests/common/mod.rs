//! What the Redis cache's test binaries share: a raw client for exact bytes and a collector of
//! the crate's warnings.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::{Arc, Mutex};

use fred::bytes::Bytes;
use fred::prelude::{ClientLike, Config, KeysInterface};
use fred::types::Builder;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

/// A plain fred client on `url`, for reading and writing stored values byte for byte.
pub async fn raw_client(url: &str) -> fred::clients::Client {
    let client = Builder::from_config(Config::from_url(url).expect("url"))
        .build()
        .expect("client");
    client.init().await.expect("connect");
    client
}

/// The stored value of `key`, as bytes.
pub async fn get_raw(url: &str, key: &str) -> Option<Vec<u8>> {
    let client = raw_client(url).await;
    let value: Option<Bytes> = client.get(key).await.expect("GET");
    let _ = client.quit().await;
    value.map(|b| b.to_vec())
}

/// Stores `value` under `key` as it is.
pub async fn set_raw(url: &str, key: &str, value: &[u8]) {
    let client = raw_client(url).await;
    let _: () = client
        .set(key, Bytes::copy_from_slice(value), None, None, false)
        .await
        .expect("SET");
    let _ = client.quit().await;
}

/// Collects this crate's WARN events (thread-local: install it on a current-thread test).
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(Registry::default().with(self.clone()))
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN
            && (meta
                .target()
                .starts_with("switchyard_checkpoint_cache_redis")
                || meta.target().starts_with("switchyard_core::cache"))
        {
            struct Message(String);
            impl tracing::field::Visit for Message {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0 = format!("{v:?}");
                    }
                }
            }
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().expect("lock").push(m.0);
        }
    }
}
