//! The one rule that turns a fred error into a [`switchyard_core::Error`] (ADR 0170).
//!
//! What decides the variant is what the caller can do about the failure:
//!
//! * **retry later** → [`Error::Unavailable`]: the connection is down, slow or being re-routed
//!   (fred's IO, timeout, cancel, backpressure, routing, cluster, protocol and sentinel errors,
//!   and its own connection-state messages such as "Failed to route command."), or the server
//!   refused the command for a state that passes (`LOADING`, `BUSY`, `TRYAGAIN`, `MASTERDOWN`,
//!   `CLUSTERDOWN`, `MOVED`, `ASK`, `READONLY`, `OOM`, `NOREPLICAS`, `MISCONF`, `UNBLOCKED`,
//!   `NOSCRIPT`). A refused command was not applied, so its retry cannot apply twice; a lost
//!   reply is an unknown outcome, which each adapter makes safe to retry its own way (op
//!   receipts and op tokens, ADRs 0022 and 0140) or does not re-send.
//! * **fix the configuration** → [`Error::Config`]: the credentials (`WRONGPASS`, `NOAUTH`), the
//!   user's permissions (`NOPERM`), the URL, TLS, or a cluster URL for a server that is not one.
//!   The message says what to change.
//! * **the backend refused the call; the same call fails the same way** → [`Error::Rejected`]:
//!   every other error reply (`WRONGTYPE`, `CROSSSLOT`, `EXECABORT`, `BUSYKEY`, script errors
//!   `ERR … @user_script:…`), and an argument or command fred refused before sending it.
//! * **the reply does not decode** → [`Error::Corrupt`] at the key (fred's parse and not-found
//!   errors, raised when a reply does not convert to the type asked for).
//!
//! The reply code is the first word of fred's details when it is all upper-case letters (Redis
//! error replies start with one); codes are matched exactly, so `BUSYKEY` is not `BUSY`.

use std::fmt;

use fred::error::{Error as FredError, ErrorKind};
use switchyard_core::Error;

/// The option an [`Error::Config`] from [`classify`] is reported under.
pub const URL_SETTING: &str = "redis_url";

/// Error reply codes of server states that pass: the command was not applied; retry later.
const TRANSIENT_CODES: &[(&str, &str)] = &[
    ("LOADING", "Redis is loading its data set into memory"),
    ("BUSY", "Redis is busy running a script"),
    ("TRYAGAIN", "a cluster slot is being migrated"),
    ("MASTERDOWN", "the replica lost its primary"),
    ("CLUSTERDOWN", "the cluster is down or a slot is not served"),
    ("MOVED", "a cluster slot moved; the client is following it"),
    ("ASK", "a cluster slot is being migrated"),
    (
        "READONLY",
        "the node is a replica now (a failover demoted it); the client is following the new primary",
    ),
    (
        "OOM",
        "Redis is at its maxmemory limit; writes pass again when memory is freed or the limit raised",
    ),
    ("NOREPLICAS", "too few replicas acknowledge writes"),
    (
        "MISCONF",
        "Redis refuses writes because it cannot save its snapshot; an operator must check its disk",
    ),
    (
        "UNBLOCKED",
        "the node changed role while the command waited",
    ),
    (
        "NOSCRIPT",
        "the script cache was flushed (restart or failover); the next call loads the script again",
    ),
];

/// A failure the caller may retry, with what the server or client said and what it means.
#[derive(Debug)]
pub struct Transient {
    kind: ErrorKind,
    details: String,
    meaning: &'static str,
}

impl Transient {
    /// fred's error kind.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// What the server or client said.
    pub fn details(&self) -> &str {
        &self.details
    }
}

impl fmt::Display for Transient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}; retry later)", self.details, self.meaning)
    }
}

impl std::error::Error for Transient {}

/// The error reply code at the start of fred's details, if any: the first word, when it is made
/// of upper-case ASCII letters only and longer than one letter.
pub fn reply_code(details: &str) -> Option<&str> {
    let code = details.split_whitespace().next()?;
    (code.len() > 1 && code.bytes().all(|b| b.is_ascii_uppercase())).then_some(code)
}

/// Whether `e` is a `NOSCRIPT` reply (the script must be loaded again).
pub fn is_noscript(e: &FredError) -> bool {
    reply_code(e.details()) == Some("NOSCRIPT")
}

/// Whether `e` says the server has no function of that name (`FCALL` before the library was
/// loaded there: a restart without persistence, `FUNCTION FLUSH`, a node new to a cluster).
pub fn is_function_missing(e: &FredError) -> bool {
    e.details().contains("Function not found")
}

/// Turns a fred error of operation `op` on `key` into switchyard's error (see the module docs).
pub fn classify(op: &'static str, key: &str, e: FredError) -> Error {
    let details = e.details().to_string();
    let code = reply_code(&details);
    let transient = |meaning: &'static str| {
        Error::unavailable(
            op,
            key,
            Transient {
                kind: e.kind().clone(),
                details: details.clone(),
                meaning,
            },
        )
    };
    let config = |what_to_do: &str| {
        Error::config(
            URL_SETTING,
            format!("Redis refused {op} on `{key}` ({details}): {what_to_do}"),
        )
    };
    let rejected = |hint: Option<&str>| Error::Rejected {
        op,
        key: key.to_string(),
        message: match hint {
            Some(hint) => format!("{details} ({hint})"),
            None => details.clone(),
        },
    };
    match code {
        Some("WRONGPASS" | "NOAUTH") => {
            return config(
                "fix the user and password of the Redis URL (redis://user:password@host), or the ACL of that user",
            );
        }
        Some("NOPERM") => {
            return config(
                "grant the Redis user this command and these keys in its ACL, or name another user in the Redis URL",
            );
        }
        Some("WRONGTYPE") => {
            return rejected(Some(
                "another program writes a different type under this key: give this adapter its own prefix",
            ));
        }
        Some("CROSSSLOT") => {
            return rejected(Some(
                "the keys of one call span cluster slots: use the cluster key layout on a cluster",
            ));
        }
        Some(code) => {
            if let Some((_, meaning)) = TRANSIENT_CODES.iter().find(|(c, _)| *c == code) {
                return transient(meaning);
            }
            if !matches!(e.kind(), ErrorKind::Config) {
                return rejected(None);
            }
        }
        None => {}
    }
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Cluster
        | ErrorKind::Protocol
        | ErrorKind::Sentinel => {
            transient("the connection to Redis failed or is being re-established")
        }
        // fred's own connection-state messages ("Failed to route command.", "Max attempts
        // exceeded", "No response!") carry no reply code and the Unknown kind.
        ErrorKind::Unknown => {
            transient("the connection to Redis failed or is being re-established")
        }
        ErrorKind::Auth => config(
            "fix the user and password of the Redis URL (redis://user:password@host), or the ACL of that user",
        ),
        ErrorKind::Url => config("fix the Redis URL"),
        ErrorKind::Tls => config(
            "check the server's certificate, and that the server speaks TLS (rediss://) or not (redis://)",
        ),
        ErrorKind::Config if details.contains("cluster support disabled") => {
            config("this server is not a cluster: use a redis:// URL instead of redis-cluster://")
        }
        ErrorKind::Config => config("fix the Redis URL or the adapter's options"),
        ErrorKind::InvalidArgument | ErrorKind::InvalidCommand => rejected(None),
        ErrorKind::Parse | ErrorKind::NotFound => Error::corrupt(
            key,
            format!("the reply of {op} is not what this adapter stores: {details}"),
        ),
    }
}

#[cfg(test)]
mod tests;
