//! The key layouts (ADR 0092): the seed's `<prefix>:<run_id>` (run id verbatim), and the cluster
//! layout `<prefix>:{run:<quote(run_id)>}`, whose hash tag puts a run's stream and its wake channel
//! in one slot. The tag always holds the fixed `run:` marker, so it is never empty, and `quote`
//! escapes `{` and `}`, so no run id can close the tag early or forge another.

use switchyard_core::keys::quote;
use switchyard_core::{Error, Result};

/// Which key layout a bridge writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyLayout {
    /// The seed's layout: `<prefix>:<run_id>`, shared with deer-flow's Python bridge.
    #[default]
    Seed,
    /// `<prefix>:{run:<quote(run_id)>}` and sharded pub/sub wake-ups, for Redis Cluster.
    Cluster,
}

pub(crate) fn stream_key(prefix: &str, layout: KeyLayout, run_id: &str) -> String {
    match layout {
        KeyLayout::Seed => format!("{prefix}:{run_id}"),
        KeyLayout::Cluster => format!("{prefix}:{{run:{}}}", quote(run_id)),
    }
}

/// Whether `url` names a Redis Cluster (`redis-cluster://`, `rediss-cluster://`).
pub(crate) fn is_cluster_url(url: &str) -> Result<bool> {
    match url.split_once("://").map(|(s, _)| s).unwrap_or_default() {
        "redis" | "rediss" => Ok(false),
        "redis-cluster" | "rediss-cluster" => Ok(true),
        other => Err(Error::config(
            "stream_bridge.redis_url",
            format!(
                "scheme {other:?} is not supported: use redis://, rediss://, or redis-cluster://host:port?node=host:port&… (rediss-cluster:// for TLS)"
            ),
        )),
    }
}

/// The layout for a URL kind and an explicit choice; refuses combinations that break the tags.
pub(crate) fn resolve(chosen: Option<KeyLayout>, cluster: bool, prefix: &str) -> Result<KeyLayout> {
    let layout = match (chosen, cluster) {
        (Some(KeyLayout::Seed), true) => {
            return Err(Error::config(
                "stream_bridge.layout",
                "the seed layout needs a multi-key XREAD across runs, which a cluster refuses: use the cluster layout",
            ));
        }
        (Some(layout), _) => layout,
        (None, true) => KeyLayout::Cluster,
        (None, false) => KeyLayout::Seed,
    };
    if layout == KeyLayout::Cluster && prefix.contains(['{', '}']) {
        return Err(Error::config(
            "stream_bridge.key_prefix",
            "must not contain '{' or '}' in the cluster layout (it would move the hash tag)",
        ));
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(stream_key("p", KeyLayout::Seed, "r{1}"), "p:r{1}");
        assert_eq!(stream_key("p", KeyLayout::Cluster, "r"), "p:{run:r}");
        assert_eq!(
            stream_key("p", KeyLayout::Cluster, "}{%7B:"),
            "p:{run:%7D%7B%257B%3A}"
        );
        assert_eq!(resolve(None, true, "p").ok(), Some(KeyLayout::Cluster));
        assert_eq!(resolve(None, false, "p").ok(), Some(KeyLayout::Seed));
        assert!(resolve(Some(KeyLayout::Seed), true, "p").is_err());
        assert!(resolve(Some(KeyLayout::Cluster), false, "a{b").is_err());
        assert!(is_cluster_url("sentinel://x").is_err());
        assert_eq!(is_cluster_url("rediss-cluster://h:1").ok(), Some(true));
    }
}
