//! The cluster key layout of the checkpoint cache: exact keys, one slot per thread whatever the
//! thread id, `get_many` across slots, purges across every primary.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use std::time::Duration;
use switchyard_checkpoint_cache_redis::{
    CacheKeyLayout, CacheKeyLayoutExt, RedisCheckpointCache, RedisCheckpointCacheOptions,
};
use switchyard_conformance::harness::{redis_cluster_url, redis_cmd, redis_url, unique_prefix};

use switchyard_checkpoint_cache_redis::owner_tag;
use switchyard_core::cache::{
    CheckpointCache, TypedPayload, is_thread_entry_key, make_history_key, thread_key_stem,
};

fn entry(n: i64) -> TypedPayload {
    TypedPayload::new("msgpack", format!("entry {n}").into_bytes()).expect("tag")
}

fn options(layout: Option<CacheKeyLayout>) -> RedisCheckpointCacheOptions {
    RedisCheckpointCacheOptions {
        ttl_seconds: 0,
        call_timeout: Duration::from_secs(5),
        layout,
        ..RedisCheckpointCacheOptions::default()
    }
}

async fn connect(url: &str, layout: Option<CacheKeyLayout>) -> RedisCheckpointCache {
    let cache = RedisCheckpointCache::connect(url, options(layout))
        .await
        .expect("connect");
    assert!(cache.wait_connected(Duration::from_secs(10)).await);
    cache
}

/// `redis://host:port` of the first seed node of the harness cluster.
fn cluster_node_url() -> String {
    let url = redis_cluster_url();
    let rest = url.split_once("://").map(|(_, rest)| rest).expect("scheme");
    let first = rest.split(['?', '/']).next().expect("node");
    format!("redis://{first}")
}

fn keyslot(key: &str) -> u16 {
    redis_cmd(&cluster_node_url(), &["CLUSTER", "KEYSLOT", key])
        .expect("CLUSTER KEYSLOT")
        .parse()
        .expect("slot")
}

const HOSTILE: &[&str] = &[
    "t1", "{", "}", "}{", "{t1}", "", "%7B", "%7D", "a:b", "a b", "*", "é", "{}", "t1:x", "[ab]",
];

#[tokio::test]
async fn cluster_layout_writes_tagged_keys_verbatim_behind_the_tag() {
    // The cluster layout on the standalone server, so exact keys can be read back by name.
    let cache = connect(&redis_url(), Some(CacheKeyLayout::Cluster)).await;
    let p = unique_prefix("ckc");
    let k = make_history_key(&p, "t1", "", "c1", "messages");
    let hostile = make_history_key(&p, "}{", "", "c1", "messages");
    cache
        .set_many(vec![(k.clone(), entry(1)), (hostile.clone(), entry(2))])
        .await;
    let url = redis_url();
    assert_eq!(
        redis_cmd(&url, &["EXISTS", &format!("{{c:t1}}{k}")]).expect("exists"),
        "1"
    );
    assert_eq!(
        redis_cmd(&url, &["EXISTS", &format!("{{c:%7D%7B}}{hostile}")]).expect("exists"),
        "1",
        "the thread id is raw in the key and escaped in the tag"
    );
    // The untagged (seed) key is not written.
    assert_eq!(redis_cmd(&url, &["EXISTS", &k]).expect("exists"), "0");
    let found = cache.get_many(&[k.clone(), hostile.clone()]).await;
    assert_eq!(found.get(&k), Some(&entry(1)));
    assert_eq!(found.get(&hostile), Some(&entry(2)));
    cache.delete_thread(&p, "}{").await;
    assert_eq!(
        redis_cmd(&url, &["EXISTS", &format!("{{c:%7D%7B}}{hostile}")]).expect("exists"),
        "0"
    );
    assert_eq!(cache.get_many(std::slice::from_ref(&k)).await.len(), 1);
}

#[tokio::test]
async fn standalone_urls_keep_the_seed_layout() {
    let cache = connect(&redis_url(), None).await;
    let p = unique_prefix("ckc");
    let k = make_history_key(&p, "t1", "", "c1", "messages");
    cache.set_many(vec![(k.clone(), entry(1))]).await;
    assert_eq!(
        redis_cmd(&redis_url(), &["EXISTS", &k]).expect("exists"),
        "1"
    );
}

#[test]
fn every_key_of_a_hostile_thread_shares_its_threads_slot_and_never_collides() {
    let p = unique_prefix("ckc");
    let mut all_keys = HashSet::new();
    let mut thread_slots = BTreeSet::new();
    for thread in HOSTILE {
        let tag = format!(
            "c:{}",
            owner_tag(&make_history_key(&p, thread, "", "c", "m"))
        );
        let want = keyslot(&tag);
        thread_slots.insert(want);
        for checkpoint in ["c1", "c2", "}", "{x}"] {
            for channel in ["messages", "{", ""] {
                let key = make_history_key(&p, thread, "", checkpoint, channel);
                let stored = CacheKeyLayout::Cluster.redis_key(&key);
                assert!(stored.starts_with(&format!("{{{tag}}}")), "{stored}");
                // Redis itself agrees the key hashes by our tag alone.
                assert_eq!(keyslot(&stored), want, "{thread:?}: {stored}");
                assert_eq!(
                    CacheKeyLayout::Cluster.cache_key(&stored),
                    Some(key.as_str())
                );
                assert!(all_keys.insert(stored), "collision for {thread:?}");
            }
        }
    }
    // The threads are spread over more than one slot (the tag is not a constant).
    assert!(thread_slots.len() > 1);
    // Raw keys (not built by make_history_key) also keep one tag, with braces escaped.
    for raw in ["a}b", "x{y}z", "{", "}", "", "%7B", "p:{t}:h"] {
        let stored = CacheKeyLayout::Cluster.redis_key(raw);
        let (tag, rest) = stored[1..].split_once('}').expect("closed tag");
        assert!(!tag.is_empty() && !tag.contains('{'), "{stored}");
        assert_eq!(rest, raw);
        assert_eq!(keyslot(&stored), keyslot(tag), "{stored}");
    }
}

#[tokio::test]
async fn get_many_spans_slots_and_purges_reach_every_primary() {
    let cache: Arc<dyn CheckpointCache> = Arc::new(connect(&redis_cluster_url(), None).await);
    let p = unique_prefix("ckc");
    let mut entries = Vec::new();
    let mut slots = BTreeSet::new();
    for (t, thread) in HOSTILE.iter().enumerate() {
        for c in 0..5 {
            let key = make_history_key(&p, thread, "", &format!("c{c}"), "messages");
            slots.insert(keyslot(&CacheKeyLayout::Cluster.redis_key(&key)));
            entries.push((key, entry((t * 10 + c) as i64)));
        }
    }
    assert!(slots.len() > 3, "the test should span several slots");
    cache.set_many(entries.clone()).await;
    let keys: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
    let found = cache.get_many(&keys).await;
    assert_eq!(found.len(), entries.len());
    for (k, e) in &entries {
        assert_eq!(found.get(k), Some(e), "{k}");
    }
    // Purging one hostile thread removes exactly its keys, wherever they live.
    for doomed in ["}{", "{", ""] {
        cache.delete_thread(&p, doomed).await;
        let found = cache.get_many(&keys).await;
        for (k, _) in &entries {
            let of_doomed = is_thread_entry_key(k, &thread_key_stem(&p, doomed));
            assert_eq!(found.contains_key(k), !of_doomed, "{doomed:?}: {k}");
        }
        cache
            .set_many(
                entries
                    .iter()
                    .filter(|(k, _)| !found.contains_key(k))
                    .cloned()
                    .collect(),
            )
            .await;
    }
    // A thread whose keys live in another slot than its stem suggests (`x:t1` is tagged `t1`,
    // `t1` is tagged `t1`; `t1:x` is tagged `x`) is purged wherever it lives, and only it.
    let nested = make_history_key(&p, "t1:x", "", "c0", "messages");
    let plain = make_history_key(&p, "t1", "", "c0", "messages");
    cache
        .set_many(vec![(nested.clone(), entry(7)), (plain.clone(), entry(8))])
        .await;
    assert_ne!(
        keyslot(&CacheKeyLayout::Cluster.redis_key(&nested)),
        keyslot(&CacheKeyLayout::Cluster.redis_key(&plain))
    );
    cache.delete_thread(&p, "t1:x").await;
    let left = cache.get_many(&[nested, plain.clone()]).await;
    assert_eq!(left.keys().collect::<Vec<_>>(), [&plain]);
    let stats = cache.stats();
    assert!(stats.hits > 0);
}
