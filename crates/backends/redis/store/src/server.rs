//! `check_server`: the two server settings a record store cannot do without.

use std::fmt;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use switchyard_core::Result;
use switchyard_redis_support::classify;

use crate::RedisEventStore;

/// What `check_server` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    /// `maxmemory-policy`, if the server let us read it.
    pub maxmemory_policy: Option<String>,
    /// `appendonly`, if readable.
    pub appendonly: Option<bool>,
    /// `save` (the RDB snapshot schedule; empty = off), if readable.
    pub save: Option<String>,
    /// Every setting that puts the record at risk. Empty = fine.
    pub issues: Vec<ServerIssue>,
}

/// A server setting unfit for a record store. See `docs/operations.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerIssue {
    /// `maxmemory-policy` is not `noeviction`: under memory pressure Redis deletes keys, and an
    /// evicted `life` key or run LIST silently releases a live run's session.
    Eviction {
        /// The policy found.
        policy: String,
    },
    /// Neither AOF nor RDB: a restart loses the whole log.
    PersistenceOff,
    /// RDB snapshots only: a crash loses the writes since the last snapshot, though `append`
    /// returned for them.
    SnapshotsOnly {
        /// The `save` schedule.
        save: String,
    },
    /// `CONFIG GET` is refused (managed Redis, ACL); check the settings by other means.
    Unverifiable {
        /// The setting.
        setting: &'static str,
        /// What the server said.
        reason: String,
    },
}

impl fmt::Display for ServerIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerIssue::Eviction { policy } => write!(
                f,
                "maxmemory-policy is {policy:?}, not \"noeviction\": evicted keys silently drop events and session holds"
            ),
            ServerIssue::PersistenceOff => f.write_str(
                "persistence is off (appendonly no, save \"\"): a restart loses every event",
            ),
            ServerIssue::SnapshotsOnly { save } => write!(
                f,
                "appendonly is no (RDB snapshots only, save {save:?}): a crash loses acknowledged events"
            ),
            ServerIssue::Unverifiable { setting, reason } => {
                write!(f, "cannot read {setting} ({reason}); verify it by hand")
            }
        }
    }
}

async fn config_get(client: &Client, name: &'static str) -> std::result::Result<String, String> {
    let reply: Vec<String> = client
        .custom(
            CustomCommand::new_static("CONFIG", ClusterHash::Random, false),
            vec!["GET", name],
        )
        .await
        .map_err(|e| e.details().to_string())?;
    reply
        .get(1)
        .cloned()
        .ok_or_else(|| "not reported by the server".to_string())
}

impl RedisEventStore {
    /// Reports when the server's `maxmemory-policy` is not `noeviction` or persistence is off
    /// (or snapshot-only). Only a connection failure is an error; a refused `CONFIG GET` is
    /// reported as [`ServerIssue::Unverifiable`].
    pub async fn check_server(&self) -> Result<ServerReport> {
        let client = self.client();
        // Reachability first, so "unverifiable" never hides an outage.
        let _: String = client
            .ping(None)
            .await
            .map_err(|e| classify("check_server", "PING", e))?;
        let mut issues = Vec::new();
        let policy = match config_get(client, "maxmemory-policy").await {
            Ok(p) => {
                if p != "noeviction" {
                    issues.push(ServerIssue::Eviction { policy: p.clone() });
                }
                Some(p)
            }
            Err(reason) => {
                issues.push(ServerIssue::Unverifiable {
                    setting: "maxmemory-policy",
                    reason,
                });
                None
            }
        };
        let appendonly = match config_get(client, "appendonly").await {
            Ok(a) => Some(a == "yes"),
            Err(reason) => {
                issues.push(ServerIssue::Unverifiable {
                    setting: "appendonly",
                    reason,
                });
                None
            }
        };
        let save = config_get(client, "save").await.ok();
        if appendonly == Some(false) {
            match save.as_deref() {
                Some("") => issues.push(ServerIssue::PersistenceOff),
                Some(s) => issues.push(ServerIssue::SnapshotsOnly {
                    save: s.to_string(),
                }),
                None => issues.push(ServerIssue::Unverifiable {
                    setting: "save",
                    reason: "CONFIG GET save refused".into(),
                }),
            }
        }
        Ok(ServerReport {
            maxmemory_policy: policy,
            appendonly,
            save,
            issues,
        })
    }
}
