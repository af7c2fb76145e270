//! The one key layout choice of every Redis adapter, and the helpers its keys are built with.
//!
//! Each adapter writes its seed's keys ([`KeyLayout::Seed`], byte for byte what the Python peer
//! writes) on standalone Redis, and on a Redis Cluster the same keys with the owner's segment
//! written as a hash tag, `{<marker>:<quote(owner)>}` ([`KeyLayout::Cluster`]): every key one
//! operation touches then lives in one slot. The tag always holds its marker (so it is never
//! empty), and [`quote`] escapes `{` and `}`, so no id can close a tag early or open another
//! before it. Which keys carry which tag is each adapter's business (ADRs 0090, 0092, 0095, 0096).

use std::borrow::Cow;

use switchyard_core::{Error, Result};

use crate::url::Topology;

/// Escapes one key segment exactly like Python's `quote(s, safe="")` (the seeds' escaping).
pub use switchyard_core::keys::quote;

/// Which key layout an adapter writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum KeyLayout {
    /// The seed's keys (standalone Redis; shared with the Python peer).
    #[default]
    Seed,
    /// The seed's keys with a hash tag on each owner, so each operation stays in one slot
    /// (Redis Cluster; also works on a standalone server). Not readable by the seed.
    Cluster,
}

/// The settings a layout check reports under, and whether the seed layout works on a cluster.
#[derive(Debug, Clone, Copy)]
pub struct LayoutRules<'a> {
    /// The option naming the layout, e.g. `layout`.
    pub layout_setting: &'a str,
    /// The option naming the key prefix, e.g. `prefix`.
    pub prefix_setting: &'a str,
    /// `Some(why)`: the seed layout on a cluster URL is refused, and `why` says what breaks.
    pub seed_on_cluster: Option<&'a str>,
}

impl KeyLayout {
    /// [`Cluster`](Self::Cluster) for `redis-cluster://` and `rediss-cluster://` URLs, else
    /// [`Seed`](Self::Seed).
    pub fn for_url(url: &str) -> Self {
        if Topology::of(url) == Some(Topology::Cluster) {
            KeyLayout::Cluster
        } else {
            KeyLayout::Seed
        }
    }

    /// The layout an adapter writes: `chosen`, else the URL's. Refuses (as
    /// [`Error::Config`]) the seed layout on a cluster when `rules` say it breaks there, and a
    /// cluster-layout prefix holding `{` or `}` (it would move the hash tag).
    pub fn resolve(
        chosen: Option<Self>,
        cluster_url: bool,
        prefix: &str,
        rules: &LayoutRules<'_>,
    ) -> Result<Self> {
        let layout = match (chosen, cluster_url) {
            (Some(KeyLayout::Seed), true) if rules.seed_on_cluster.is_some() => {
                return Err(Error::config(
                    rules.layout_setting,
                    format!(
                        "{}: use the cluster layout on a cluster URL",
                        rules.seed_on_cluster.unwrap_or_default()
                    ),
                ));
            }
            (Some(layout), _) => layout,
            (None, true) => KeyLayout::Cluster,
            (None, false) => KeyLayout::Seed,
        };
        if layout == KeyLayout::Cluster && prefix.contains(['{', '}']) {
            return Err(Error::config(
                rules.prefix_setting,
                "must not contain '{' or '}' in the cluster layout (it would move the hash tag)",
            ));
        }
        Ok(layout)
    }
}

/// `{<marker>:<quote(owner)>}`: the hash tag that puts every key of `owner` in one slot.
pub fn hash_tag(marker: &str, owner: &str) -> String {
    format!("{{{marker}:{}}}", quote(owner))
}

/// Undoes [`quote`]; `None` when the result is not UTF-8.
pub fn unquote(segment: &str) -> Option<Cow<'_, str>> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
}

/// The part of `key` Redis Cluster hashes: the content of the first `{…}` when it is non-empty,
/// else the whole key.
pub fn hashed_part(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The cluster slot of `key` (CRC16 of its [`hashed_part`], mod 16384).
pub fn slot(key: &str) -> u16 {
    fred::util::redis_keyslot(key.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: LayoutRules<'static> = LayoutRules {
        layout_setting: "layout",
        prefix_setting: "prefix",
        seed_on_cluster: Some("the seed layout spans slots"),
    };

    #[test]
    fn the_url_picks_the_layout_unless_chosen() {
        assert_eq!(
            KeyLayout::for_url("redis-cluster://a:1?node=b:2"),
            KeyLayout::Cluster
        );
        assert_eq!(
            KeyLayout::for_url("rediss-cluster://a:1"),
            KeyLayout::Cluster
        );
        assert_eq!(KeyLayout::for_url("redis://a:1"), KeyLayout::Seed);
        assert_eq!(KeyLayout::for_url("redis-sentinel://a:1"), KeyLayout::Seed);
        assert_eq!(
            KeyLayout::resolve(None, true, "p", &RULES).ok(),
            Some(KeyLayout::Cluster)
        );
        assert_eq!(
            KeyLayout::resolve(None, false, "p", &RULES).ok(),
            Some(KeyLayout::Seed)
        );
        assert_eq!(
            KeyLayout::resolve(Some(KeyLayout::Cluster), false, "p", &RULES).ok(),
            Some(KeyLayout::Cluster),
            "the cluster layout works on a standalone server"
        );
    }

    #[test]
    fn combinations_that_break_the_tags_are_refused() {
        let err = KeyLayout::resolve(Some(KeyLayout::Seed), true, "p", &RULES);
        assert!(
            matches!(err, Err(Error::Config { key, reason }) if key == "layout" && reason.contains("spans slots"))
        );
        let tolerant = LayoutRules {
            seed_on_cluster: None,
            ..RULES
        };
        assert_eq!(
            KeyLayout::resolve(Some(KeyLayout::Seed), true, "p", &tolerant).ok(),
            Some(KeyLayout::Seed)
        );
        let err = KeyLayout::resolve(None, true, "a{b}", &RULES);
        assert!(matches!(err, Err(Error::Config { key, .. }) if key == "prefix"));
        assert_eq!(
            KeyLayout::resolve(None, false, "a{b}", &RULES).ok(),
            Some(KeyLayout::Seed),
            "the seed layout has no tags to protect"
        );
    }

    #[test]
    fn tags_hold_their_marker_and_no_brace_of_the_owner() {
        assert_eq!(hash_tag("ns", ""), "{ns:}");
        assert_eq!(hash_tag("run", "}{%7B:"), "{run:%7D%7B%257B%3A}");
        for owner in ["", "{", "}", "}{", "{x}", "a:b", "é"] {
            let key = format!("p:{}:rest{{x}}", hash_tag("q", owner));
            assert_eq!(hashed_part(&key), format!("q:{}", quote(owner)));
            assert_eq!(unquote(&quote(owner)).as_deref(), Some(owner));
        }
        assert_eq!(hashed_part("plain"), "plain");
        assert_eq!(
            hashed_part("a{}b{c}"),
            "a{}b{c}",
            "an empty first tag hashes the key"
        );
        assert_eq!(slot("{q:x}a"), slot("{q:x}b"));
        assert_eq!(slot("foo"), 12182, "Redis's own CLUSTER KEYSLOT foo");
    }
}
