//! The checkpoint cache key layout, deer-flow's (`base.py` and `provider.py`) byte for byte
//! (ADR 0212).
//!
//! `<prefix>:<thread id>:<24 hex chars>`: the thread id is written raw, as deer-flow writes it, so
//! a deer-flow worker and switchyard address the same entries for every thread id; namespace,
//! checkpoint id and channel are hashed with NUL separators, so a `:` inside any of them cannot
//! make two keys collide. Because the thread id is raw, the stem of thread `t1` (`p:t1:`) is also
//! the start of thread `t1:x`'s keys; [`is_thread_entry_key`] tells them apart structurally, and
//! every purge uses it.

use sha2::{Digest, Sha256};

/// Version of the entry format, part of the default key prefix (`ckpt-hist:v1:…`).
pub const CACHE_FORMAT_VERSION: u32 = 1;

/// Length of the entry-hash segment that ends every history key.
pub const ENTRY_HASH_LEN: usize = 24;

/// The key of one channel's history at one checkpoint:
/// `{prefix}:{thread}:{sha256(ns NUL checkpoint_id NUL channel) as 24 lowercase hex}`, the thread
/// id raw (deer-flow's `make_history_key`).
pub fn make_history_key(
    prefix: &str,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
    channel: &str,
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(ns.as_bytes());
    hasher.update([0u8]);
    hasher.update(checkpoint_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(channel.as_bytes());
    let digest = hex::encode(hasher.finalize());
    format!(
        "{}{}",
        thread_key_stem(prefix, thread_id),
        &digest[..ENTRY_HASH_LEN]
    )
}

/// `{prefix}:{thread}:`, the thread id raw — every key of the thread starts with it. The trailing
/// `:` keeps `t1` from matching `t10`; [`is_thread_entry_key`] keeps it from matching `t1:x`.
pub fn thread_key_stem(prefix: &str, thread_id: &str) -> String {
    format!("{prefix}:{thread_id}:")
}

/// Whether `key` is one of the entries a purge of the thread with stem `stem` removes: the stem
/// followed by exactly one entry-hash segment (24 lowercase hex characters, as
/// [`make_history_key`] writes it). `p:t1:<hash>` is thread `t1`'s; `p:t1:x:<hash>` (thread
/// `t1:x`) and `p:t1` are not.
pub fn is_thread_entry_key(key: &str, stem: &str) -> bool {
    key.strip_prefix(stem).is_some_and(|rest| {
        rest.len() == ENTRY_HASH_LEN
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// What a cache namespace is derived from: the database the checkpoints live in. Credentials are
/// never part of it, so rotating a password keeps the namespace (and the warm cache).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseIdentity {
    /// A Postgres database, by its SQLAlchemy-style URL (`postgresql+asyncpg://user:pw@host:port/db`)
    /// and schema.
    Postgres {
        /// The connection URL; user, password, driver suffix and query are ignored.
        url: String,
        /// The schema the checkpoint tables live in.
        schema: String,
    },
    /// A SQLite file, by the path the checkpointer opens.
    Sqlite {
        /// The database file path, as configured.
        path: String,
    },
    /// A process-local database; every such deployment shares the `memory` identity.
    Memory,
}

impl DatabaseIdentity {
    /// The identity string that is hashed, exactly as deer-flow builds it:
    /// `postgres:{host or localhost}:{port or 5432}/{database}:{schema}`, `sqlite:{path}` or
    /// `memory`. A Postgres URL that cannot be parsed is used raw (never an error).
    pub fn identity(&self) -> String {
        match self {
            DatabaseIdentity::Postgres { url, schema } => match parse_db_url(url) {
                Some(u) => format!(
                    "postgres:{}:{}/{}:{schema}",
                    if u.host.is_empty() {
                        "localhost"
                    } else {
                        u.host
                    },
                    u.port.unwrap_or(5432),
                    u.database.unwrap_or("")
                ),
                None => url.clone(),
            },
            DatabaseIdentity::Sqlite { path } => format!("sqlite:{path}"),
            DatabaseIdentity::Memory => "memory".to_string(),
        }
    }
}

/// The first 12 lowercase hex characters of the SHA-256 of the database identity.
pub fn database_hash(db: &DatabaseIdentity) -> String {
    let digest = hex::encode(Sha256::digest(db.identity().as_bytes()));
    digest[..12].to_string()
}

/// The key prefix of a deployment: `key_prefix` verbatim when it is not empty (even if it ends in
/// `:`), else `ckpt-hist:v{CACHE_FORMAT_VERSION}:{database_hash}`.
pub fn checkpoint_cache_key_prefix(key_prefix: &str, db: &DatabaseIdentity) -> String {
    if key_prefix.is_empty() {
        format!("ckpt-hist:v{CACHE_FORMAT_VERSION}:{}", database_hash(db))
    } else {
        key_prefix.to_string()
    }
}

struct DbUrl<'a> {
    host: &'a str,
    port: Option<u16>,
    database: Option<&'a str>,
}

/// Parses `driver://[user[:password]@][host][:port][/database][?query]` the way SQLAlchemy's
/// `make_url` does; `None` when it would raise.
fn parse_db_url(url: &str) -> Option<DbUrl<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '+')
    {
        return None;
    }
    let rest = rest.split_once('?').map_or(rest, |(before, _)| before);
    // The password may not contain an unescaped `@`, so the first `@` ends the credentials.
    let rest = rest.split_once('@').map_or(rest, |(_, after)| after);
    let (hostport, database) = match rest.split_once('/') {
        Some((hp, db)) => (hp, Some(db)),
        None => (rest, None),
    };
    let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some(DbUrl {
        host,
        port,
        database,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(url: &str) -> DatabaseIdentity {
        DatabaseIdentity::Postgres {
            url: url.into(),
            schema: "public".into(),
        }
    }

    #[test]
    fn history_key_is_stable_and_scoped() {
        let k = make_history_key("p", "t1", "", "c1", "messages");
        assert_eq!(k, make_history_key("p", "t1", "", "c1", "messages"));
        assert!(k.starts_with("p:t1:"));
        let hash = k.strip_prefix("p:t1:").expect("stem");
        assert_eq!(hash.len(), 24);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
        for other in [
            make_history_key("p", "t1", "ns", "c1", "messages"),
            make_history_key("p", "t1", "", "c2", "messages"),
            make_history_key("p", "t1", "", "c1", "other"),
            make_history_key("q", "t1", "", "c1", "messages"),
        ] {
            assert_ne!(k, other);
        }
        assert_eq!(CACHE_FORMAT_VERSION, 1);
    }

    #[test]
    fn history_key_matches_python() {
        // hashlib.sha256(b"\x00c1\x00messages").hexdigest()[:24]
        let digest = hex::encode(Sha256::digest(b"\x00c1\x00messages"));
        assert_eq!(
            make_history_key("p", "t1", "", "c1", "messages"),
            format!("p:t1:{}", &digest[..24])
        );
        // A `:` moved between namespace and checkpoint id changes the hash input.
        assert_ne!(
            make_history_key("p", "t", "a:b", "c", "x"),
            make_history_key("p", "t", "a", "b:c", "x")
        );
    }

    #[test]
    fn thread_ids_are_raw_and_purges_are_structural() {
        assert_eq!(thread_key_stem("p", "t1"), "p:t1:");
        assert_eq!(thread_key_stem("prod:", "t1"), "prod::t1:");
        assert_eq!(thread_key_stem("p", "a:b*"), "p:a:b*:");
        let k = make_history_key("p", "t1", "", "c", "x");
        let stem = thread_key_stem("p", "t1");
        assert!(is_thread_entry_key(&k, &stem));
        assert!(!is_thread_entry_key(&k, &thread_key_stem("p", "t")));
        let nested = make_history_key("p", "t1:x", "", "c", "x");
        assert!(
            nested.starts_with(&stem),
            "the raw layout nests `t1:x` under `t1`"
        );
        assert!(!is_thread_entry_key(&nested, &stem));
        assert!(is_thread_entry_key(&nested, &thread_key_stem("p", "t1:x")));
        for not_entry in [
            "p:t1:",
            "p:t1",
            "p:t1:ABCDEF0123456789abcdef01",
            "p:t1:0123",
        ] {
            assert!(!is_thread_entry_key(not_entry, &stem), "{not_entry}");
        }
    }

    #[test]
    fn db_hash_distinguishes_backends_and_targets() {
        let sqlite = database_hash(&DatabaseIdentity::Sqlite {
            path: "/data/db.sqlite".into(),
        });
        let a = database_hash(&pg("postgresql://u:p@db:5432/a"));
        let b = database_hash(&pg("postgresql://u:p@db:5432/b"));
        assert_eq!(sqlite.len(), 12);
        assert_ne!(sqlite, a);
        assert_ne!(a, b);
        assert_ne!(
            database_hash(&DatabaseIdentity::Memory),
            sqlite,
            "memory is its own identity"
        );
    }

    #[test]
    fn db_hash_ignores_credentials_and_driver() {
        let base = pg("postgresql://alice:one@db:5432/app");
        assert_eq!(base.identity(), "postgres:db:5432/app:public");
        for rotated in [
            "postgresql+asyncpg://bob:two@db:5432/app",
            "postgres://db/app",
            "postgresql://carol@db:5432/app?sslmode=require",
        ] {
            assert_eq!(
                database_hash(&pg(rotated)),
                database_hash(&base),
                "{rotated}"
            );
        }
        assert_eq!(
            pg("postgresql://").identity(),
            "postgres:localhost:5432/:public"
        );
        assert_eq!(
            pg("postgresql://[::1]:6000/x").identity(),
            "postgres:::1:6000/x:public"
        );
    }

    #[test]
    fn db_hash_unparseable_url_falls_back_to_raw() {
        assert_eq!(pg("not-a-url").identity(), "not-a-url");
        assert_eq!(
            pg("postgresql://h:notaport/x").identity(),
            "postgresql://h:notaport/x"
        );
        assert_eq!(database_hash(&pg("not-a-url")).len(), 12);
    }

    #[test]
    fn key_prefix_override_wins() {
        let db = DatabaseIdentity::Sqlite { path: "x".into() };
        assert_eq!(checkpoint_cache_key_prefix("prod:", &db), "prod:");
        let default = checkpoint_cache_key_prefix("", &db);
        assert_eq!(default, format!("ckpt-hist:v1:{}", database_hash(&db)));
        assert_eq!(default.len(), "ckpt-hist:v1:".len() + 12);
    }
}
