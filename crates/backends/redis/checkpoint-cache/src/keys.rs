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

use switchyard_redis_support::keys::quote;

/// How cache keys map to Redis keys: the Redis adapters' one [`KeyLayout`]
/// (`switchyard_redis_support`). [`Seed`](KeyLayout::Seed): the cache key is the Redis key
/// (standalone and sentinel Redis); [`Cluster`](KeyLayout::Cluster): `{c:<thread>}<cache key>`,
/// one slot per thread. Its cache-specific methods are those of [`CacheKeyLayoutExt`].
pub use switchyard_redis_support::KeyLayout as CacheKeyLayout;
use switchyard_redis_support::KeyLayout;

/// The marker that opens every cluster tag; the tag is therefore never empty.
const TAG_OPEN: &str = "{c:";

/// The cache's keys in a [`CacheKeyLayout`].
pub trait CacheKeyLayoutExt {
    /// The Redis key that stores cache key `key`.
    fn redis_key(self, key: &str) -> String;

    /// The cache key stored under Redis key `redis_key`; `None` when the key is not one of this
    /// layout's keys.
    fn cache_key(self, redis_key: &str) -> Option<&str>;

    /// The `SCAN MATCH` pattern that finds (at least) every stored key starting with cache-key
    /// `stem`. On the cluster layout it can also match a few other keys (`*` in the tag may span
    /// a `}`), so a purge checks each match with [`cache_key`](Self::cache_key) before deleting
    /// it.
    fn purge_pattern(self, stem: &str) -> String;
}

impl CacheKeyLayoutExt for KeyLayout {
    fn redis_key(self, key: &str) -> String {
        match self {
            KeyLayout::Seed => key.to_string(),
            KeyLayout::Cluster => {
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

    fn cache_key(self, redis_key: &str) -> Option<&str> {
        match self {
            KeyLayout::Seed => Some(redis_key),
            KeyLayout::Cluster => {
                let rest = redis_key.strip_prefix(TAG_OPEN)?;
                // The tag content holds no `}`, so the first one closes it.
                let (tag, key) = rest.split_once('}')?;
                (tag == owner_tag(key)).then_some(key)
            }
        }
    }

    fn purge_pattern(self, stem: &str) -> String {
        let literal = crate::cache::scan_pattern_for_stem(stem);
        match self {
            KeyLayout::Seed => literal,
            // `{` and `}` are not glob characters.
            KeyLayout::Cluster => format!("{TAG_OPEN}*}}{literal}"),
        }
    }
}

/// The owner segment of a cache key, as it appears in its cluster tag: the segment between the
/// last two `:` (the thread id of a
/// [`make_history_key`](switchyard_core::cache::make_history_key) key, or its last `:`-separated
/// part when the raw id holds a `:`), or the whole key when it has fewer than two `:`. Every key
/// of one thread has the same segment, so one thread lives in one slot. A segment made only of
/// `A–Z a–z 0–9 _ . - ~ %` is used as it is; any other is escaped with [`quote`], so the tag never
/// holds `{`, `}` or `:` and cannot be forged (ADR 0095). Tags need not be unique: the whole cache
/// key follows the tag.
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
        assert_eq!(KeyLayout::Seed.redis_key(&k), k);
        assert_eq!(KeyLayout::Seed.cache_key(&k), Some(k.as_str()));
        assert_eq!(KeyLayout::Seed.purge_pattern("p:t1:"), "p:t1:*");
    }

    #[test]
    fn cluster_layout_tags_the_thread() {
        let k = make_history_key("ckpt-hist:v1:abc", "t1", "", "c1", "messages");
        let r = KeyLayout::Cluster.redis_key(&k);
        assert_eq!(r, format!("{{c:t1}}{k}"));
        assert_eq!(KeyLayout::Cluster.cache_key(&r), Some(k.as_str()));
        // Thread ids are raw in the key and escaped in the tag.
        let hostile = make_history_key("p", "}{", "", "c1", "messages");
        let stored = KeyLayout::Cluster.redis_key(&hostile);
        assert!(stored.starts_with("{c:%7D%7B}p:}{:"), "{stored}");
        assert_eq!(
            KeyLayout::Cluster.cache_key(&stored),
            Some(hostile.as_str())
        );
        // A thread id with `:` is tagged by its last part; all its keys share it.
        let nested = make_history_key("p", "t1:x", "", "c1", "messages");
        assert!(
            KeyLayout::Cluster
                .redis_key(&nested)
                .starts_with("{c:x}p:t1:x:")
        );
        // Raw keys with braces are escaped inside the tag.
        assert_eq!(
            KeyLayout::Cluster.redis_key("a}b"),
            "{c:a%7Db}a}b".to_string()
        );
        assert_eq!(KeyLayout::Cluster.redis_key(""), "{c:}");
        assert_eq!(KeyLayout::Cluster.cache_key("{c:x}y"), None);
        assert_eq!(KeyLayout::Cluster.cache_key("plain"), None);
    }
}
