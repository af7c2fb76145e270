//! The backends the facade opens, registered in one place (ADR 0361).
//!
//! A backend is one value implementing [`Backend`]: the URL schemes it answers, how it checks a
//! URL, and an opener for each port it has an adapter for. The built-in backends (memory, SQLite,
//! Redis, PostgreSQL) are the list in [`builtin`], one file each in this folder; a crate of its
//! own adds one with [`register`]. [`BackendUrl::parse`](crate::BackendUrl::parse), the
//! `open_*` functions and [`Switchyard::open`](crate::Switchyard::open) look the scheme up here
//! and never name a backend themselves, so adding one touches its own file and the list.
//!
//! A built-in backend's URL is understood in every build; only its openers need its Cargo
//! feature, so a `redis://` URL in a build without `redis` says which feature to turn on rather
//! than "unknown scheme".
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> switchyard_kit::core::Result<()> {
//! use std::sync::Arc;
//! use switchyard_kit::backend::{Backend, register};
//! use switchyard_kit::core::{EventStore, MemoryEventStore, Result};
//! use switchyard_kit::{BackendUrl, OpenOptions};
//!
//! /// A backend of this application's own: `scratch://NAME`, an event store in memory.
//! #[derive(Debug)]
//! struct Scratch;
//!
//! #[switchyard_kit::backend::async_trait]
//! impl Backend for Scratch {
//!     fn name(&self) -> &'static str {
//!         "scratch"
//!     }
//!     fn schemes(&self) -> &'static [&'static str] {
//!         &["scratch"]
//!     }
//!     async fn event_store(&self, _: &BackendUrl, _: &str, _: &OpenOptions) -> Result<Arc<dyn EventStore>> {
//!         Ok(Arc::new(MemoryEventStore::new()))
//!     }
//! }
//!
//! register(Scratch)?;
//! let store = switchyard_kit::open_event_store("scratch://tests").await?;
//! # let _ = store;
//! // The fleet has no scratch adapter: the error says so.
//! assert!(switchyard_kit::open_fleet_backend("scratch://tests").await.is_err());
//! # Ok(())
//! # }
//! ```

mod memory;
mod postgres;
mod redis;
mod sqlite;

use std::sync::{Arc, PoisonError, RwLock};

use switchyard_core::cache::CheckpointCache;
use switchyard_core::fleet::FleetBackend;
use switchyard_core::store::EventStore;
use switchyard_core::stream::StreamBridge;
use switchyard_core::{Error, Result};

use crate::cache::CacheSettings;
use crate::options::OpenOptions;
use crate::url::{BackendUrl, redact};

/// The `async_trait` attribute [`Backend`] is written with, so an implementation needs no
/// dependency of its own.
pub use async_trait::async_trait;

/// One backend: its schemes, its URL check, and an opener per port it serves.
///
/// Every opener has a default body that refuses with [`Error::Config`] naming the port and the
/// backend, so a backend implements only the ports it has adapters for. `key` names the setting
/// the URL came from (`event_store`, `SWITCHYARD_FLEET_URL`, …) for messages.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// The backend's name, as [`BackendUrl::kind`] reports it (`"redis"`).
    fn name(&self) -> &'static str;

    /// The URL schemes it answers, lower case (`["redis", "rediss", …]`).
    fn schemes(&self) -> &'static [&'static str];

    /// Checks `url` (whose scheme is one of [`schemes`](Backend::schemes)) and returns what the
    /// openers get. `rest` is the URL after `scheme://`. The default keeps the URL as given and
    /// asks only for a host.
    fn parse(&self, key: &str, url: &str, rest: &str) -> Result<BackendUrl> {
        require_host(key, url, rest)?;
        Ok(BackendUrl::new(self.name(), url))
    }

    /// True when the backend also answers `scheme:REST` without `//`, as sqlx's `sqlite:PATH`
    /// form; [`parse`](Backend::parse) then gets `REST`.
    fn accepts_opaque_form(&self) -> bool {
        false
    }

    /// True when the backend reads the facade's options (`prefix=`, `pool_size=`, …) from the
    /// query of a URL given in the configuration file, as the Redis backend does; the others get
    /// their options from `[options.<port>]` only.
    fn reads_url_options(&self) -> bool {
        false
    }

    /// Opens the event store at `url`.
    async fn event_store(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn EventStore>> {
        let _ = (url, opts);
        Err(no_adapter(key, "event store", self.name()))
    }

    /// Opens the stream bridge at `url`.
    async fn stream_bridge(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn StreamBridge>> {
        let _ = (url, opts);
        Err(no_adapter(key, "stream bridge", self.name()))
    }

    /// Opens the fleet backend at `url`.
    async fn fleet(
        &self,
        url: &BackendUrl,
        key: &str,
        opts: &OpenOptions,
    ) -> Result<Arc<dyn FleetBackend>> {
        let _ = (url, opts);
        Err(no_adapter(key, "fleet backend", self.name()))
    }

    /// Opens the checkpoint cache at `url` (its serializer is the facade's business).
    async fn checkpoint_cache(
        &self,
        url: &BackendUrl,
        key: &str,
        settings: &CacheSettings,
    ) -> Result<Arc<dyn CheckpointCache>> {
        let _ = (url, settings);
        Err(no_adapter(key, "checkpoint cache", self.name()))
    }
}

/// The built-in backends, in the order their schemes are looked up.
pub fn builtin() -> [&'static dyn Backend; 4] {
    [
        &memory::Memory,
        &sqlite::Sqlite,
        &redis::Redis,
        &postgres::Postgres,
    ]
}

/// Backends added with [`register`]. A registration lasts as long as the process (the value is
/// leaked), so a lookup hands out `&'static` references and never holds the lock across an open.
static REGISTERED: RwLock<Vec<&'static dyn Backend>> = RwLock::new(Vec::new());

/// Adds a backend for every later `open_*` call and [`BackendUrl::parse`] in this process.
///
/// A name or a scheme already taken by another backend (built-in or registered) is refused with
/// [`Error::Config`]: one scheme, one backend.
pub fn register(backend: impl Backend) -> Result<()> {
    let mut registered = REGISTERED.write().unwrap_or_else(PoisonError::into_inner);
    let clash = all(&registered).find(|b| {
        b.name() == backend.name() || b.schemes().iter().any(|s| backend.schemes().contains(s))
    });
    if let Some(owner) = clash {
        return Err(Error::config(
            "backend",
            format!(
                "cannot register backend {:?} ({}): backend {:?} already has that name or one of \
                 those schemes; give it a name and schemes of its own",
                backend.name(),
                backend.schemes().join(", "),
                owner.name()
            ),
        ));
    }
    registered.push(Box::leak(Box::new(backend)));
    Ok(())
}

/// The registered backends, then the built-in ones.
fn all<'a>(
    registered: &'a [&'static dyn Backend],
) -> impl Iterator<Item = &'static dyn Backend> + 'a {
    registered.iter().copied().chain(builtin())
}

/// The backend answering `scheme` (any case).
pub(crate) fn for_scheme(scheme: &str) -> Option<&'static dyn Backend> {
    let scheme = scheme.to_ascii_lowercase();
    let registered = REGISTERED.read().unwrap_or_else(PoisonError::into_inner);
    all(&registered).find(|b| b.schemes().contains(&scheme.as_str()))
}

/// The backend that parsed `url`.
pub(crate) fn of(url: &BackendUrl) -> Result<&'static dyn Backend> {
    let registered = REGISTERED.read().unwrap_or_else(PoisonError::into_inner);
    all(&registered)
        .find(|b| b.name() == url.kind())
        .ok_or_else(|| {
            Error::config(
                "backend",
                format!(
                    "no backend named {:?} is registered in this process",
                    url.kind()
                ),
            )
        })
}

/// Every scheme known to this process, for the message of an unknown one.
pub(crate) fn known_schemes() -> String {
    let registered = REGISTERED.read().unwrap_or_else(PoisonError::into_inner);
    all(&registered)
        .flat_map(|b| b.schemes().iter())
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses a URL with no host (`redis://`, `postgres:///db`).
pub fn require_host(key: &str, url: &str, rest: &str) -> Result<()> {
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    if host.split(['/', '?']).next().unwrap_or_default().is_empty() {
        return Err(Error::config(key, format!("{} names no host", redact(url))));
    }
    Ok(())
}

/// The error for a port the backend has no adapter for.
fn no_adapter(key: &str, port: &str, backend: &str) -> Error {
    Error::config(
        key,
        format!("the {port} has no {backend} adapter: give this port another backend's URL"),
    )
}

/// The error for a built-in backend whose Cargo feature this build lacks.
#[cfg_attr(
    all(feature = "sqlite", feature = "redis", feature = "postgres"),
    allow(dead_code)
)]
pub(crate) fn feature_missing(key: &str, backend: &str) -> Error {
    Error::config(
        key,
        format!(
            "this build has no {backend} adapter: enable the `{backend}` feature of the \
             `switchyard-kit` crate (or `full`), or use memory://"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Named(&'static str, &'static [&'static str]);

    #[async_trait]
    impl Backend for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn schemes(&self) -> &'static [&'static str] {
            self.1
        }
    }

    #[test]
    fn every_builtin_scheme_has_one_backend() {
        let mut schemes: Vec<&str> = builtin()
            .iter()
            .flat_map(|b| b.schemes().iter().copied())
            .collect();
        let all = schemes.len();
        schemes.sort_unstable();
        schemes.dedup();
        assert_eq!(schemes.len(), all, "a scheme is answered twice");
        for scheme in schemes {
            let b = for_scheme(&scheme.to_ascii_uppercase()).expect(scheme);
            assert!(b.schemes().contains(&scheme));
        }
    }

    #[tokio::test]
    async fn a_registered_backend_is_looked_up_and_a_taken_scheme_refused() {
        assert!(matches!(
            register(Named("mine", &["redis"])),
            Err(Error::Config { reason, .. }) if reason.contains("\"redis\"")
        ));
        assert!(register(Named("sqlite", &["lite"])).is_err());
        register(Named("mine", &["mine", "mine-tls"])).expect("register");
        assert!(register(Named("other", &["mine-tls"])).is_err());
        let url = BackendUrl::parse("k", "mine-tls://host/x").expect("parse");
        assert_eq!((url.kind(), url.url()), ("mine", "mine-tls://host/x"));
        assert!(
            BackendUrl::parse("k", "mine://").is_err(),
            "the default parse wants a host"
        );
        // No opener written: each port's refusal names the port and the backend.
        match crate::open_fleet_backend("mine://host").await {
            Err(Error::Config { reason, .. }) => {
                assert!(
                    reason.contains("fleet backend has no mine adapter"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
