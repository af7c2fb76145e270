//! Bearer tokens (ADR 0180): the token file, lookup in constant time, rights and scopes, and the
//! SIGHUP reload. Which route needs which right and scope is decided in `admit` (ADR 0181).
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

use globset::{Glob, GlobSet, GlobSetBuilder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchyard_kit::core::{Error, Result};
use tokio::sync::watch;

use super::metrics::AuthLabels;

/// What a token may do.
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
#[derive(Debug)]
struct Scope {
    set: GlobSet,
    all: bool,
}

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
            set,
            all: patterns.iter().any(|p| p == "*"),
        })
    }

    fn allows(&self, name: &str) -> bool {
        self.all || self.set.is_match(name)
    }
}

/// One token of the file.
#[derive(Debug)]
pub struct Token {
    pub name: String,
    digest: [u8; 32],
    namespaces: Scope,
    queues: Scope,
    rights: BTreeSet<Right>,
}

impl Token {
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

    /// The SHA-256 of its secret: what identifies the token across reloads (a name can be given
    /// to a new secret, and then the old secret's requests and tickets must stop).
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }
}

/// The tokens of one reading of the file.
#[derive(Debug, Default)]
pub struct TokenSet {
    tokens: Vec<Arc<Token>>,
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
            tokens.push(Arc::new(Token {
                namespaces: Scope::new("namespaces", &entry.namespaces).map_err(bad)?,
                queues: Scope::new("queues", &entry.queues).map_err(bad)?,
                name: entry.name,
                digest,
                rights,
            }));
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

    /// The token whose secret has this SHA-256 (a held request or a ticket looks its token up
    /// again after a reload; the digest is the gateway's own, so no constant-time care is due).
    pub fn by_digest(&self, digest: &[u8; 32]) -> Option<Arc<Token>> {
        self.tokens.iter().find(|t| &t.digest == digest).cloned()
    }

    /// The token whose secret is `secret`. Digests are compared in constant time and every token
    /// is compared, so timing says nothing about which digest bytes matched.
    pub fn find(&self, secret: &str) -> Option<Arc<Token>> {
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = Some(token.clone());
            }
        }
        found
    }
}

/// The hex SHA-256 of a secret, as the token file stores it.
pub fn digest_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The gateway's live tokens and per-token counters.
#[derive(Debug)]
pub struct Auth {
    path: PathBuf,
    /// The tokens in force. A watch rather than a lock: every reload is also the signal that
    /// cuts the open streams and long polls of the tokens it revoked (see `admit::Standing`).
    tokens: watch::Sender<Arc<TokenSet>>,
    /// `/metrics` without a token.
    pub metrics_public: bool,
    /// (token name or "-", outcome) → requests. Names come from the file, so the label set is
    /// bounded by it.
    counts: Family<AuthLabels, Counter>,
}

impl Auth {
    /// Reads the file once; a broken file at start is an error.
    pub fn load(path: PathBuf, metrics_public: bool) -> Result<Auth> {
        let set = TokenSet::read(&path)?;
        tracing::info!(file = %path.display(), tokens = set.len(), "token file loaded");
        Ok(Auth {
            path,
            tokens: watch::Sender::new(Arc::new(set)),
            metrics_public,
            counts: Family::default(),
        })
    }

    pub fn current(&self) -> Arc<TokenSet> {
        self.tokens.borrow().clone()
    }

    /// Sees every reload: what a held request waits on to learn whether its token still admits
    /// it.
    pub fn subscribe(&self) -> watch::Receiver<Arc<TokenSet>> {
        self.tokens.subscribe()
    }

    /// Re-reads the file; a broken file keeps the tokens in force and says why.
    pub fn reload(&self) -> Result<usize> {
        let set = TokenSet::read(&self.path)?;
        let n = set.len();
        self.tokens.send_replace(Arc::new(set));
        Ok(n)
    }

    pub fn count(&self, token: Option<&str>, outcome: &'static str) {
        self.counts
            .get_or_create(&AuthLabels {
                token: token.unwrap_or("-").into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// The per-token counters, for the gateway's metrics registry.
    pub fn counters(&self) -> Family<AuthLabels, Counter> {
        self.counts.clone()
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
        assert_eq!(a.name, "a");
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
