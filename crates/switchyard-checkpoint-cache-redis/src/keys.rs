//! Every Redis key of the checkpoint cache, built in one place (ADR 0095).
//!
//! The cache key a caller passes (normally [`make_history_key`](switchyard_core::cache::make_history_key):
//! `{prefix}:{thread}:{24 hex}`) is used verbatim on standalone Redis (the seed layout). On a
//! Redis Cluster the stored key is the cache key behind a hash tag naming its thread,
//! `{c:<thread>}<cache key>`, so every entry of one thread lives in one slot: a `get_many` of one
//! thread is one `MGET`, and the keys of several threads are split into one `MGET` per slot.
//!
//! The tag is never empty (it always holds the `c:` marker) and its content never holds `{` or
//! `}`, so the first `}` of a stored key closes the tag: a hostile key cannot forge or escape it,
//! and the cache key is recovered exactly by cutting the key after that `}`.

use switchyard_core::keys::quote;

/// How cache keys map to Redis keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheKeyLayout {
    /// The seed's layout: the cache key is the Redis key (standalone and sentinel Redis).
    #[default]
    Seed,
    /// `{c:<thread>}<cache key>`: one slot per thread (Redis Cluster).
    Cluster,
}

/// The marker that opens every cluster tag; the tag is therefore never empty.
const TAG_OPEN: &str = "{c:";

impl CacheKeyLayout {
    /// [`Cluster`](Self::Cluster) for `redis-cluster://` and `rediss-cluster://` URLs, else
    /// [`Seed`](Self::Seed).
    pub fn for_url(url: &str) -> Self {
        let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
        if matches!(scheme, "redis-cluster" | "rediss-cluster") {
            CacheKeyLayout::Cluster
        } else {
            CacheKeyLayout::Seed
        }
    }

    /// The Redis key that stores cache key `key`.
    pub fn redis_key(self, key: &str) -> String {
        match self {
            CacheKeyLayout::Seed => key.to_string(),
            CacheKeyLayout::Cluster => {
                let tag = owner_tag(key);
                let mut out = String::with_capacity(TAG_OPEN.len() + tag.len() + 1 + key.len());
                out.push_str(TAG_OPEN);
                out.push_str(&tag);
                out.push('}');
                out.push_str(key);
                out
            }
        }
    }

    /// The cache key stored under Redis key `redis_key`; `None` when the key is not one of this
    /// layout's keys.
    pub fn cache_key(self, redis_key: &str) -> Option<&str> {
        match self {
            CacheKeyLayout::Seed => Some(redis_key),
            CacheKeyLayout::Cluster => {
                let rest = redis_key.strip_prefix(TAG_OPEN)?;
                // The tag content holds no `}`, so the first one closes it.
                let (tag, key) = rest.split_once('}')?;
                (tag == owner_tag(key)).then_some(key)
            }
        }
    }

    /// The `SCAN MATCH` pattern that finds (at least) every stored key starting with cache-key
    /// `stem`. On the cluster layout it can also match a few other keys (`*` in the tag may span a
    /// `}`), so a purge checks each match with [`cache_key`](Self::cache_key) before deleting it.
    pub fn purge_pattern(self, stem: &str) -> String {
        let literal = crate::cache::scan_pattern_for_stem(stem);
        match self {
            CacheKeyLayout::Seed => literal,
            // `{` and `}` are not glob characters.
            CacheKeyLayout::Cluster => format!("{TAG_OPEN}*}}{literal}"),
        }
    }
}

/// The owner segment of a cache key, as it appears in its cluster tag: the segment between the
/// last two `:` (the thread of a [`make_history_key`](switchyard_core::cache::make_history_key)
/// key), or the whole key when it has fewer than two `:`. A segment already made only of
/// `quote`'s output characters (`A–Z a–z 0–9 _ . - ~ %`, as `make_history_key` writes the thread)
/// is used as it is; any other is escaped with [`quote`], so the tag never holds `{`, `}` or `:`.
pub fn owner_tag(key: &str) -> String {
    let segment = match key.rsplit_once(':') {
        Some((head, _)) => match head.rsplit_once(':') {
            Some((_, thread)) => thread,
            None => key,
        },
        None => key,
    };
    let quoted_already = segment
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~' | b'%'));
    if quoted_already {
        segment.to_string()
    } else {
        quote(segment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::cache::make_history_key;

    #[test]
    fn seed_layout_is_the_identity() {
        let k = make_history_key("p", "t1", "", "c1", "messages");
        assert_eq!(CacheKeyLayout::Seed.redis_key(&k), k);
        assert_eq!(CacheKeyLayout::Seed.cache_key(&k), Some(k.as_str()));
        assert_eq!(CacheKeyLayout::Seed.purge_pattern("p:t1:"), "p:t1:*");
    }

    #[test]
    fn cluster_layout_tags_the_thread() {
        let k = make_history_key("ckpt-hist:v1:abc", "t1", "", "c1", "messages");
        let r = CacheKeyLayout::Cluster.redis_key(&k);
        assert_eq!(r, format!("{{c:t1}}{k}"));
        assert_eq!(CacheKeyLayout::Cluster.cache_key(&r), Some(k.as_str()));
        // Thread ids are quoted by make_history_key; the tag reuses that segment.
        let hostile = make_history_key("p", "}{", "", "c1", "messages");
        assert!(
            CacheKeyLayout::Cluster
                .redis_key(&hostile)
                .starts_with("{c:%7D%7B}p:%7D%7B:")
        );
        // Raw keys with braces are escaped inside the tag.
        assert_eq!(
            CacheKeyLayout::Cluster.redis_key("a}b"),
            "{c:a%7Db}a}b".to_string()
        );
        assert_eq!(CacheKeyLayout::Cluster.redis_key(""), "{c:}");
        assert_eq!(CacheKeyLayout::Cluster.cache_key("{c:x}y"), None);
        assert_eq!(CacheKeyLayout::Cluster.cache_key("plain"), None);
    }

    #[test]
    fn layout_by_url() {
        assert_eq!(
            CacheKeyLayout::for_url("redis-cluster://a:1?node=b:2"),
            CacheKeyLayout::Cluster
        );
        assert_eq!(
            CacheKeyLayout::for_url("rediss-cluster://a:1"),
            CacheKeyLayout::Cluster
        );
        assert_eq!(CacheKeyLayout::for_url("redis://a:1"), CacheKeyLayout::Seed);
    }
}
