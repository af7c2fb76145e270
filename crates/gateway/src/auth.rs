//! Who a request comes from: the [`Authenticator`] trait an application can implement, the
//! [`Principal`] it answers with (rights, namespace and queue scopes), and the gateway's own
//! implementation, the token file of bearer secrets with its SIGHUP reload (ADR 0180, ADR 0368).
//! Which route needs which right and scope is decided in `admit` (ADR 0181).
//!
//! ```toml
//! [[tokens]]
//! name = "runtime-a"                 # shown in logs and metrics, never the secret
//! sha256 = "<hex SHA-256 of the bearer secret>"
//! namespaces = ["tenant-a", "tenant-a-*"]   # "" is the default namespace, "*" every one
//! queues = ["jobs-*"]
//! rights = ["read", "write"]          # and "metrics" for GET /metrics
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The attribute that implements [`Authenticator`] (its methods are `async`), re-exported so an
/// implementation needs no dependency of its own.
pub use async_trait::async_trait;
use axum::http::header;
use axum::http::request::Parts;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchyard_kit::core::{Error, Result};
use tokio::sync::watch;

/// Decides who a request comes from. The gateway asks it on every route that needs a right (all
/// of `/v1`, and `/metrics` unless it is public), before the body is read; the token file
/// ([`Auth`]) is the gateway's own implementation, and an application plugs its own with
/// [`GatewayBuilder::authenticator`](crate::GatewayBuilder::authenticator) (ADR 0368).
///
/// The gateway then checks the route's right and scope against the [`Principal`], counts the
/// outcome in `/metrics` by the principal's name, and puts the principal in the request's
/// extensions. A stream ticket (ADR 0260) stands in for the credentials on the stream route:
/// the gateway redeems it itself, with the principal that asked for it as [`current`](Self::current)
/// describes it then.
///
/// ```
/// use std::sync::Arc;
/// use axum::http::request::Parts;
/// use switchyard_gateway::auth::{AuthError, Authenticator, Principal, Right};
///
/// /// One API key that may read and write the `shop` namespace.
/// struct ApiKey(&'static str);
///
/// #[switchyard_gateway::auth::async_trait]
/// impl Authenticator for ApiKey {
///     async fn authenticate(&self, request: &Parts) -> Result<Arc<Principal>, AuthError> {
///         match request.headers.get("x-api-key") {
///             Some(key) if key.as_bytes() == self.0.as_bytes() => Ok(Arc::new(
///                 Principal::new("shop-app")
///                     .with_rights([Right::Read, Right::Write])
///                     .with_namespaces(["shop"])
///                     .expect("a valid glob"),
///             )),
///             _ => Err(AuthError::Unauthenticated("send `x-api-key`".into())),
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    /// The principal of a request, from its method, URI, headers and extensions (the body is not
    /// read yet). A refusal's message is sent to the client: it says what to send, and must not
    /// carry a secret or an internal detail.
    async fn authenticate(&self, request: &Parts)
    -> std::result::Result<Arc<Principal>, AuthError>;

    /// The principal as the credentials in force now describe it, or `None` if it was revoked:
    /// asked when a stream ticket is redeemed, and for every held request (an SSE stream, a
    /// long poll) each time [`revocations`](Self::revocations) signals a change. The default
    /// keeps every principal as it was admitted: without an override, a ticket lives out its
    /// minute and a held request is never cut.
    async fn current(&self, principal: &Arc<Principal>) -> Option<Arc<Principal>> {
        Some(principal.clone())
    }

    /// Signals that credentials may have changed, so held requests are checked again with
    /// [`current`](Self::current). `None` (the default): nothing is ever revoked mid-request.
    fn revocations(&self) -> Option<&Revocations> {
        None
    }
}

/// Why an [`Authenticator`] admitted no one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// 401 `unauthenticated` (with `WWW-Authenticate: Bearer`): no credentials, or credentials
    /// the authenticator does not know. The message is the client's.
    Unauthenticated(String),
    /// 503 `auth_unavailable` with `Retry-After`: the authenticator cannot decide now (its
    /// identity service is down). The message is the client's; log the cause yourself.
    Unavailable(String),
}

/// How an [`Authenticator`] tells the gateway that credentials changed (a reload, a revoked
/// key): every held request then asks [`Authenticator::current`] whether its principal still
/// admits it, and is cut if not.
#[derive(Debug)]
pub struct Revocations(watch::Sender<()>);

impl Default for Revocations {
    fn default() -> Self {
        Revocations(watch::Sender::new(()))
    }
}

impl Revocations {
    pub fn new() -> Revocations {
        Revocations::default()
    }

    /// Credentials changed: held requests check their principal again.
    pub fn notify(&self) {
        self.0.send_replace(());
    }

    /// Sees every [`notify`](Self::notify) from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<()> {
        self.0.subscribe()
    }
}

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Right {
    /// GET routes and streams.
    Read,
    /// Everything that changes data.
    Write,
    /// `GET /metrics`.
    Metrics,
}

impl Right {
    pub fn parse(text: &str) -> Option<Right> {
        match text {
            "read" => Some(Right::Read),
            "write" => Some(Right::Write),
            "metrics" => Some(Right::Metrics),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Metrics => "metrics",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    sha256: String,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    queues: Vec<String>,
    rights: Vec<String>,
}

/// Globs over names; `*` alone means every name, including the default namespace `""`.
#[derive(Debug, Clone, Default)]
struct Scope {
    patterns: Vec<String>,
    set: GlobSet,
    all: bool,
}

impl PartialEq for Scope {
    fn eq(&self, other: &Scope) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for Scope {}

impl Scope {
    fn new(field: &str, patterns: &[String]) -> std::result::Result<Scope, String> {
        let mut builder = GlobSetBuilder::new();
        for p in patterns {
            let glob = Glob::new(p).map_err(|e| format!("{field}: {p:?} is not a glob: {e}"))?;
            builder.add(glob);
        }
        let set = builder
            .build()
            .map_err(|e| format!("{field}: cannot compile the globs: {e}"))?;
        Ok(Scope {
            patterns: patterns.to_vec(),
            set,
            all: patterns.iter().any(|p| p == "*"),
        })
    }

    fn allows(&self, name: &str) -> bool {
        self.all || self.set.is_match(name)
    }
}

/// Who a request comes from, and what it may touch: rights, and the namespaces and queues its
/// scopes cover (globs; `"*"` alone covers every name, `""` is the default namespace). A new
/// principal has no right and no scope; each `with_` adds to it.
///
/// The name is shown in logs, in the `/metrics` labels of admission and in refusals, and keys the
/// per-principal quotas (open streams, stream tickets): keep the set of names small and stable (a
/// client or a tenant, not a user id), and never put a secret in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    name: String,
    rights: BTreeSet<Right>,
    namespaces: Scope,
    queues: Scope,
    credential: Option<Arc<str>>,
}

impl Principal {
    /// A principal named `name`, with no right and no scope yet.
    pub fn new(name: impl Into<String>) -> Principal {
        Principal {
            name: name.into(),
            rights: BTreeSet::new(),
            namespaces: Scope::default(),
            queues: Scope::default(),
            credential: None,
        }
    }

    /// Adds rights.
    pub fn with_rights(mut self, rights: impl IntoIterator<Item = Right>) -> Principal {
        self.rights.extend(rights);
        self
    }

    /// Adds namespaces it may touch (runs, events, streams); a pattern that is not a glob is
    /// [`Error::Config`] naming it.
    pub fn with_namespaces(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Principal> {
        self.namespaces = extend(&self.namespaces, "namespaces", patterns)?;
        Ok(self)
    }

    /// Adds queues it may touch (tasks, dead letters, reservations, and workers of that
    /// automation type); `"*"` also lets it list workers of every type and manage schedules.
    pub fn with_queues(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Principal> {
        self.queues = extend(&self.queues, "queues", patterns)?;
        Ok(self)
    }

    /// An identifier of the credentials behind the principal (never logged nor sent), for the
    /// authenticator's own [`Authenticator::current`] to find them again; the token file keeps
    /// the SHA-256 of the secret here.
    pub fn with_credential(mut self, id: impl Into<Arc<str>>) -> Principal {
        self.credential = Some(id.into());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What [`with_credential`](Self::with_credential) set.
    pub fn credential(&self) -> Option<&str> {
        self.credential.as_deref()
    }

    pub fn has(&self, right: Right) -> bool {
        self.rights.contains(&right)
    }

    /// May it touch runs and streams of `namespace` (`""` is the default namespace)?
    pub fn namespace_allowed(&self, namespace: &str) -> bool {
        self.namespaces.allows(namespace)
    }

    /// May it touch the queue (its tasks, dead letters, and workers of that automation type)?
    pub fn queue_allowed(&self, queue: &str) -> bool {
        self.queues.allows(queue)
    }

    /// Does it cover every queue (lists that span queues need this)?
    pub fn all_queues(&self) -> bool {
        self.queues.all
    }

    /// Does it cover every namespace (webhooks need this)?
    pub fn all_namespaces(&self) -> bool {
        self.namespaces.all
    }
}

fn extend(
    scope: &Scope,
    field: &str,
    patterns: impl IntoIterator<Item = impl Into<String>>,
) -> Result<Scope> {
    let mut all = scope.patterns.clone();
    all.extend(patterns.into_iter().map(Into::into));
    Scope::new(field, &all).map_err(|reason| Error::config("principal", reason))
}

/// One token of the file: the SHA-256 of its secret and what it may do.
#[derive(Debug)]
struct Token {
    digest: [u8; 32],
    principal: Arc<Principal>,
}

/// The tokens of one reading of the file.
#[derive(Debug, Default)]
pub struct TokenSet {
    tokens: Vec<Token>,
}

impl TokenSet {
    /// Parses the file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<TokenSet> {
        let file: TokenFile = toml::from_str(text)
            .map_err(|e| Error::config(origin, format!("invalid token file: {}", e.message())))?;
        let mut names = BTreeSet::new();
        let mut digests = BTreeSet::new();
        let mut tokens = Vec::with_capacity(file.tokens.len());
        for (i, entry) in file.tokens.into_iter().enumerate() {
            let at = format!("{origin}: tokens[{i}]");
            let bad = |reason: String| Error::config(at.clone(), reason);
            if entry.name.is_empty() || entry.name.chars().any(char::is_control) {
                return Err(bad("`name` must be non-empty text".into()));
            }
            if !names.insert(entry.name.clone()) {
                return Err(bad(format!("the name {:?} is used twice", entry.name)));
            }
            let digest: [u8; 32] = hex::decode(entry.sha256.trim())
                .ok()
                .and_then(|d| d.try_into().ok())
                .ok_or_else(|| {
                    bad("`sha256` must be 64 hex digits (sha256sum of the secret)".into())
                })?;
            if !digests.insert(digest) {
                return Err(bad("two tokens have the same secret".into()));
            }
            let mut rights = BTreeSet::new();
            for r in &entry.rights {
                rights
                    .insert(Right::parse(r).ok_or_else(|| {
                        bad(format!("right {r:?} is not read, write or metrics"))
                    })?);
            }
            let principal = Principal {
                namespaces: Scope::new("namespaces", &entry.namespaces).map_err(bad)?,
                queues: Scope::new("queues", &entry.queues).map_err(bad)?,
                name: entry.name,
                rights,
                credential: Some(Arc::from(hex::encode(digest))),
            };
            tokens.push(Token {
                digest,
                principal: Arc::new(principal),
            });
        }
        Ok(TokenSet { tokens })
    }

    pub fn read(path: &Path) -> Result<TokenSet> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config(
                path.display().to_string(),
                format!("cannot read the token file: {e}"),
            )
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The file holds no token (every authenticated request is then refused).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The token a principal of this file was admitted with, as this reading of the file has it
    /// (a held request or a ticket looks its token up again after a reload, by the SHA-256 of its
    /// secret: the digest is the gateway's own, so no constant-time care is due).
    fn again(&self, principal: &Principal) -> Option<Arc<Principal>> {
        let credential = principal.credential()?;
        self.tokens
            .iter()
            .find(|t| t.principal.credential() == Some(credential))
            .map(|t| t.principal.clone())
    }

    /// The token whose secret is `secret`. Digests are compared in constant time and every token
    /// is compared, so timing says nothing about which digest bytes matched.
    pub fn find(&self, secret: &str) -> Option<Arc<Principal>> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = Some(token.principal.clone());
            }
        }
        found
    }
}

/// The hex SHA-256 of a secret, as the token file stores it.
pub fn digest_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The token file: `Authorization: Bearer <secret>` against the tokens in force, re-read by
/// [`reload`](Self::reload) (on SIGHUP in `switchyard serve`). A reload revokes what it removed:
/// held requests of a token that left the file, got a new secret, or lost the right or scope
/// they need are cut, and its stream tickets stop opening streams.
#[derive(Debug)]
pub struct Auth {
    path: PathBuf,
    tokens: watch::Sender<Arc<TokenSet>>,
    revocations: Revocations,
    /// `/metrics` without a token.
    pub metrics_public: bool,
}

impl Auth {
    /// Reads the file once; a broken file at start is an error.
    pub fn load(path: PathBuf, metrics_public: bool) -> Result<Auth> {
        let set = TokenSet::read(&path)?;
        tracing::info!(file = %path.display(), tokens = set.len(), "token file loaded");
        Ok(Auth {
            path,
            tokens: watch::Sender::new(Arc::new(set)),
            revocations: Revocations::new(),
            metrics_public,
        })
    }

    pub fn current(&self) -> Arc<TokenSet> {
        self.tokens.borrow().clone()
    }

    /// Re-reads the file; a broken file keeps the tokens in force and says why.
    pub fn reload(&self) -> Result<usize> {
        let set = TokenSet::read(&self.path)?;
        let n = set.len();
        self.tokens.send_replace(Arc::new(set));
        self.revocations.notify();
        Ok(n)
    }
}

#[async_trait]
impl Authenticator for Auth {
    async fn authenticate(
        &self,
        request: &Parts,
    ) -> std::result::Result<Arc<Principal>, AuthError> {
        let secret = request
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let Some(secret) = secret.filter(|s| !s.is_empty()) else {
            return Err(AuthError::Unauthenticated(
                "send `Authorization: Bearer <secret>` with a token of the gateway's token file"
                    .into(),
            ));
        };
        self.current().find(secret).ok_or_else(|| {
            AuthError::Unauthenticated("the bearer token is not in the gateway's token file".into())
        })
    }

    /// The same secret in the file now read, with the rights and scopes it has there: a token
    /// removed, or whose name was given a new secret (rotation after a leak), is revoked.
    async fn current(&self, principal: &Arc<Principal>) -> Option<Arc<Principal>> {
        Auth::current(self).again(principal)
    }

    fn revocations(&self) -> Option<&Revocations> {
        Some(&self.revocations)
    }
}

/// Re-reads the token file on every SIGHUP, for the life of the process. The handler is in place
/// when this returns (before the gateway says it listens), so an early SIGHUP cannot kill it.
/// Without a token file there is nothing to re-read, but the handler is installed all the same:
/// SIGHUP's default action ends the process, and an operator's habitual `kill -HUP` (or a
/// supervisor's reload) must not take a gateway down.
pub fn reload_on_sighup(auth: Option<Arc<Auth>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the token file is read only at start");
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let Some(auth) = &auth else {
                    tracing::info!("SIGHUP: no token file (--auth) to re-read; ignored");
                    continue;
                };
                match auth.reload() {
                    Ok(n) => tracing::info!(tokens = n, "SIGHUP: token file re-read"),
                    Err(e) => tracing::error!(
                        error = %e,
                        "SIGHUP: the token file is broken; the tokens loaded before stay in force"
                    ),
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = auth;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &str) -> Result<TokenSet> {
        TokenSet::parse(entries, "tokens.toml")
    }

    #[test]
    fn finds_by_secret_and_checks_scopes() {
        let text = format!(
            "[[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nnamespaces = [\"tenant-a\", \"tenant-a-*\"]\nqueues = [\"jobs-*\"]\nrights = [\"read\", \"write\"]\n\
             [[tokens]]\nname = \"ops\"\nsha256 = \"{}\"\nnamespaces = [\"*\"]\nqueues = [\"*\"]\nrights = [\"metrics\"]\n",
            digest_hex("secret-a"),
            digest_hex("secret-ops").to_uppercase()
        );
        let set = file(&text).expect("parses");
        let a = set.find("secret-a").expect("a");
        assert_eq!(a.name(), "a");
        assert!(a.has(Right::Write) && !a.has(Right::Metrics));
        assert!(a.namespace_allowed("tenant-a") && a.namespace_allowed("tenant-a-x"));
        assert!(!a.namespace_allowed("tenant-b") && !a.namespace_allowed(""));
        assert!(a.queue_allowed("jobs-1") && !a.queue_allowed("mail") && !a.all_queues());
        let ops = set.find("secret-ops").expect("ops");
        assert!(ops.namespace_allowed("") && ops.all_queues());
        assert!(set.find("secret-b").is_none());
        assert!(set.find("").is_none());
    }

    #[test]
    fn broken_files_name_the_problem() {
        let h = digest_hex("x");
        for (text, says) in [
            (
                "[[tokens]]\nname = \"a\"\nsha256 = \"zz\"\nrights = []\n",
                "sha256",
            ),
            (
                &format!("[[tokens]]\nname = \"a\"\nsha256 = \"{h}\"\nrights = [\"admin\"]\n"),
                "admin",
            ),
            (
                &format!(
                    "[[tokens]]\nname = \"a\"\nsha256 = \"{h}\"\nrights = []\nnamespaces = [\"[\"]\n"
                ),
                "glob",
            ),
            (
                &format!(
                    "[[tokens]]\nname = \"a\"\nsha256 = \"{h}\"\nrights = []\n[[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nrights = []\n",
                    digest_hex("y")
                ),
                "twice",
            ),
            (
                &format!(
                    "[[tokens]]\nname = \"a\"\nsha256 = \"{h}\"\nrights = []\nsecret = \"x\"\n"
                ),
                "secret",
            ),
        ] {
            let err = file(text).expect_err(text).to_string();
            assert!(err.contains(says), "{err} should mention {says}");
        }
        assert_eq!(file("").expect("empty file").len(), 0);
    }

    #[test]
    fn reload_keeps_old_tokens_when_broken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.toml");
        let good = format!(
            "[[tokens]]\nname = \"a\"\nsha256 = \"{}\"\nrights = [\"read\"]\n",
            digest_hex("s")
        );
        std::fs::write(&path, &good).expect("write");
        let auth = Auth::load(path.clone(), false).expect("load");
        std::fs::write(&path, "[[tokens]]\nname = ").expect("write");
        assert!(auth.reload().is_err());
        assert!(auth.current().find("s").is_some());
        std::fs::write(&path, "").expect("write");
        assert_eq!(auth.reload().expect("reload"), 0);
        assert!(auth.current().find("s").is_none());
    }
}
