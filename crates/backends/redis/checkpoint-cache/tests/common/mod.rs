//! What the Redis cache's test binaries share: a raw client for exact bytes and a collector of
//! the crate's warnings.

#![allow(dead_code)] // each test binary uses part of it

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Once};

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

/// Collects this crate's WARN events emitted on the thread that [`install`](Self::install)ed it
/// (install it on a current-thread test).
///
/// The events reach it through one process-wide (global) subscriber that hands each event to the
/// collector installed on the emitting thread, not through a thread-local (`set_default`)
/// subscriber: tracing caches whether a callsite is wanted once for the whole process, and while
/// only one subscriber exists it asks the *current thread's* one. With a thread-local collector,
/// another test reaching a warning first (on its own thread, with no subscriber) cached "never"
/// for that callsite, and this test's later warning from the same line was dropped before any
/// subscriber saw it: the "mget failed" warning went missing whenever the stalled-Redis test's
/// first `mget` failure came after this test had installed its collector and before it logged
/// its own (tokio-rs/tracing#3611). A global subscriber is every thread's subscriber, so
/// whichever thread registers a callsite first sees it wanted.
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

thread_local! {
    static COLLECTOR: RefCell<Option<Warnings>> = const { RefCell::new(None) };
}

/// While alive, this thread's warnings go to the installed [`Warnings`].
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        COLLECTOR.with(|c| c.borrow_mut().take());
    }
}

impl Warnings {
    pub fn install(&self) -> Installed {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            tracing::subscriber::set_global_default(Registry::default().with(ToThreadCollector))
                .expect("no other global subscriber in a test binary");
        });
        COLLECTOR.with(|c| *c.borrow_mut() = Some(self.clone()));
        Installed(())
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

/// The global subscriber's layer: each WARN event of this crate (or of `switchyard_core::cache`)
/// goes to the collector installed on the emitting thread, if any.
struct ToThreadCollector;

impl<S: tracing::Subscriber> Layer<S> for ToThreadCollector {
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
            COLLECTOR.with(|c| {
                if let Some(w) = c.borrow().as_ref() {
                    w.0.lock().expect("lock").push(m.0);
                }
            });
        }
    }
}
