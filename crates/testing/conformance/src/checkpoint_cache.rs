//! The `CheckpointCache` conformance suite: one case per guarantee of
//! [`switchyard_core::cache::CheckpointCache`].
//!
//! Run it on an adapter with
//!
//! ```ignore
//! async fn factory(_: CheckpointCacheSetup) -> switchyard_core::Result<CheckpointCacheFixture> {
//!     Ok(CheckpointCacheFixture::new(Arc::new(MyCache::new(/* no TTL, 20,000 entries */))))
//! }
//! switchyard_conformance::checkpoint_cache_suite!(factory);
//! ```
//!
//! The factory is called once per case and must return a fresh cache with **no TTL** and room for
//! at least 20,000 entries. Every case writes under its own random key prefix, so a shared backend
//! is fine. Guarantee `cache.failures_are_misses` (failures never reach the caller) needs fault
//! injection and is covered here only for hostile input; each adapter adds its own fault tests. The
//! factory shape is the same for the four suites (ADR 0165).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::LocalBoxFuture;

use switchyard_core::Result;
use switchyard_core::cache::{
    CacheStats, CheckpointCache, TypedPayload, make_history_key, thread_key_stem,
};

use crate::harness::unique_prefix;

/// What the suite tells an adapter's factory about the case it builds a cache for. The cache
/// suite needs nothing yet; the type exists so that every suite's factory has the same shape and a
/// later need is a new field, not a new signature in every adapter.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CheckpointCacheSetup {}

/// What an adapter's factory returns for one case.
#[non_exhaustive]
pub struct CheckpointCacheFixture {
    /// A cache with no TTL and room for at least 20,000 entries (fresh, or shared: every case uses
    /// its own key prefix).
    pub cache: Arc<dyn CheckpointCache>,
}

impl CheckpointCacheFixture {
    /// A fixture of `cache`.
    pub fn new(cache: Arc<dyn CheckpointCache>) -> Self {
        CheckpointCacheFixture { cache }
    }
}

impl fmt::Debug for CheckpointCacheFixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointCacheFixture")
            .finish_non_exhaustive()
    }
}

/// The factory as the macro hands it to [`run`]. Its future need not be `Send`: [`run`] awaits it
/// on the test's own task (the SQLite fleet backend's `open`, for one, is not `Send` for every
/// lifetime).
pub type Factory<'a> =
    &'a dyn Fn(CheckpointCacheSetup) -> LocalBoxFuture<'static, Result<CheckpointCacheFixture>>;

/// Builds one fixture and runs `case` on its cache. The macro calls this; a hand-written test may
/// too.
pub async fn run<F, Fut>(factory: Factory<'_>, case: F)
where
    F: FnOnce(Arc<dyn CheckpointCache>) -> Fut,
    Fut: Future<Output = ()>,
{
    let fixture = factory(CheckpointCacheSetup::default())
        .await
        .unwrap_or_else(|e| panic!("the adapter's factory could not build a cache: {e}"));
    case(fixture.cache).await;
}

fn entry(n: i64) -> TypedPayload {
    typed("msgpack", format!("entry {n}").into_bytes())
}

fn typed(tag: &str, payload: Vec<u8>) -> TypedPayload {
    TypedPayload::new(tag, payload).expect("a tag without NUL")
}

fn key(prefix: &str, thread: &str, checkpoint: &str) -> String {
    make_history_key(prefix, thread, "", checkpoint, "messages")
}

fn delta(before: CacheStats, after: CacheStats) -> (u64, u64) {
    (after.hits - before.hits, after.misses - before.misses)
}

/// Guarantee `cache.hits_counted`: only hits come back, each with its entry; every requested key is
/// counted once per occurrence, duplicates included.
pub async fn get_many_returns_only_hits_and_counts_every_key(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let (a, b) = (key(&p, "t1", "a"), key(&p, "t1", "b"));
    let (x, y) = (key(&p, "t1", "x"), key(&p, "t1", "y"));
    cache
        .set_many(vec![(a.clone(), entry(1)), (b.clone(), entry(2))])
        .await;
    let before = cache.stats();
    let found = cache
        .get_many(&[a.clone(), x.clone(), b.clone(), a.clone(), y])
        .await;
    assert_eq!(found.len(), 2, "only the hits come back: {found:?}");
    assert_eq!(found.get(&a), Some(&entry(1)));
    assert_eq!(found.get(&b), Some(&entry(2)));
    assert!(!found.contains_key(&x));
    assert_eq!(
        delta(before, cache.stats()),
        (3, 2),
        "a twice and b are hits; x and y are misses"
    );
}

/// Guarantee `cache.hits_counted`: the entry returned is the one stored last under the key.
pub async fn a_later_set_replaces_the_entry(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let k = key(&p, "t1", "a");
    cache.set_many(vec![(k.clone(), entry(1))]).await;
    cache.set_many(vec![(k.clone(), entry(2))]).await;
    // Within one batch, the later entry wins too.
    let k2 = key(&p, "t1", "b");
    cache
        .set_many(vec![(k2.clone(), entry(3)), (k2.clone(), entry(4))])
        .await;
    let found = cache.get_many(&[k.clone(), k2.clone()]).await;
    assert_eq!(found.get(&k), Some(&entry(2)));
    assert_eq!(found.get(&k2), Some(&entry(4)));
}

/// Guarantee `cache.empty_is_free`: empty calls return at once and change no counter.
pub async fn empty_calls_change_nothing(cache: Arc<dyn CheckpointCache>) {
    let before = cache.stats();
    assert!(cache.get_many(&[]).await.is_empty());
    cache.set_many(Vec::new()).await;
    assert_eq!(cache.stats(), before);
}

/// Guarantee `cache.round_trip`: entries come back byte for byte, tag and payload, whatever the
/// bytes.
pub async fn entries_round_trip_intact(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let mut all_bytes: Vec<u8> = (0..=255u8).collect();
    all_bytes.extend_from_slice(b"\x00\x00");
    let entries = [
        // What deer-flow writes for {"writes": [1]}.
        typed("msgpack", b"\x81\xa6writes\x91\x01".to_vec()),
        typed("json", br#"{"writes":[],"seed":null}"#.to_vec()),
        typed("msgpack", Vec::new()),
        typed("", b"no tag".to_vec()),
        typed("bytes", all_bytes),
        typed("msgpack", vec![0xff, 0xfe, 0x00, 0xc1]),
        typed("ünïcödé ✓", "héllo 🚀".as_bytes().to_vec()),
        typed("msgpack", vec![0x00; 100_000]),
    ];
    let keyed: Vec<(String, TypedPayload)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (key(&p, "t1", &format!("c{i}")), e.clone()))
        .collect();
    cache.set_many(keyed.clone()).await;
    let keys: Vec<String> = keyed.iter().map(|(k, _)| k.clone()).collect();
    let found = cache.get_many(&keys).await;
    for (k, e) in &keyed {
        let got = found.get(k);
        assert_eq!(got, Some(e), "entry under {k}");
        let got = got.expect("found");
        assert_eq!(got.tag(), e.tag());
        assert_eq!(got.payload(), e.payload(), "payload bytes under {k}");
    }
}

/// Guarantee `cache.verbatim_keys`: any string is a key, used verbatim; distinct keys never share
/// an entry.
pub async fn keys_are_used_verbatim(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let suffixes = [
        "", ":", "::", " ", "a:b", "a*", "a?", "[ab]", "\\", "{tag}", "é", "🚀", "%3A", "\u{0}",
    ];
    let keyed: Vec<(String, TypedPayload)> = suffixes
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("{p}{s}"), entry(i as i64)))
        .collect();
    cache.set_many(keyed.clone()).await;
    let keys: Vec<String> = keyed.iter().map(|(k, _)| k.clone()).collect();
    let found = cache.get_many(&keys).await;
    for (k, e) in &keyed {
        assert_eq!(found.get(k), Some(e), "key {k:?}");
    }
    // A glob-like key does not answer for others, and keys are not re-prefixed.
    let other = format!("{p}ab");
    assert!(cache.get_many(&[other]).await.is_empty());
}

/// Guarantee `cache.exact_purge`: a purge removes exactly the thread's keys: `t10`, `t2`, the same
/// thread under another prefix and keys that merely start like the stem survive. It is not an
/// eviction.
pub async fn delete_thread_purges_only_that_thread(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let other_prefix = format!("{p}x");
    let doomed: Vec<String> = (0..20).map(|i| key(&p, "t1", &format!("c{i}"))).collect();
    let kept = vec![
        key(&p, "t10", "c0"),
        key(&p, "t2", "c0"),
        key(&other_prefix, "t1", "c0"),
        format!("{p}:t1"),  // the stem without its trailing `:`
        format!("{p}:t1x"), // a longer thread id
        format!("{p}:t1:"), // the stem alone
        format!("{p}:t1:not-an-entry-hash"),
    ];
    let mut all: Vec<(String, TypedPayload)> = Vec::new();
    for (i, k) in doomed.iter().chain(kept.iter()).enumerate() {
        all.push((k.clone(), entry(i as i64)));
    }
    cache.set_many(all).await;
    assert_eq!(cache.get_many(&doomed).await.len(), doomed.len(), "stored");
    let evictions = cache.stats().evictions;

    cache.delete_thread(&p, "t1").await;

    assert!(cache.get_many(&doomed).await.is_empty(), "t1 purged");
    let survivors = cache.get_many(&kept).await;
    for k in &kept {
        assert!(survivors.contains_key(k), "{k} must survive a purge of t1");
    }
    assert_eq!(
        cache.stats().evictions,
        evictions,
        "a purge is not an eviction"
    );
    // Purging a thread that has nothing cached is a no-op.
    cache.delete_thread(&p, "no-such-thread").await;
    assert_eq!(cache.get_many(&kept).await.len(), kept.len());
}

/// Guarantee `cache.exact_purge`: thread ids are raw in keys, so one thread's stem can start
/// another's keys (`t1` and `t1:x`); a purge still takes only its own thread, for every hostile id.
pub async fn delete_thread_is_exact_for_hostile_thread_ids(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let threads = [
        "t1", "t1:x", "t1:x:y", ":", "", "a b", "%3A", "t1%3Ax", "é", "线程", "🚀", "*", "?",
        "[ab]", "a", "b", "\\", "{t}", "t1:",
    ];
    let keys_of =
        |t: &str| -> Vec<String> { (0..3).map(|c| key(&p, t, &format!("c{c}"))).collect() };
    let mut all = Vec::new();
    for t in threads {
        for (i, k) in keys_of(t).into_iter().enumerate() {
            all.push((k, entry(i as i64)));
        }
    }
    cache.set_many(all).await;
    let mut purged: Vec<&str> = Vec::new();
    for doomed in ["t1", "[ab]", "*", ":", "", "t1:x"] {
        cache.delete_thread(&p, doomed).await;
        purged.push(doomed);
        for t in threads {
            let found = cache.get_many(&keys_of(t)).await;
            let want = if purged.contains(&t) { 0 } else { 3 };
            assert_eq!(
                found.len(),
                want,
                "thread {t:?} after purging {purged:?}: {} of its 3 entries left",
                found.len()
            );
        }
    }
}

/// Guarantee `cache.exact_purge`: glob characters in the prefix or the thread id are matched
/// literally.
pub async fn delete_thread_matches_glob_characters_literally(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    for (glob_prefix, lookalike) in [
        (format!("{p}*"), format!("{p}abc")),
        (format!("{p}?"), format!("{p}z")),
        (format!("{p}[xy]"), format!("{p}x")),
        (format!("{p}\\"), format!("{p}\\\\")),
    ] {
        let victim = key(&glob_prefix, "t1", "c");
        let bystander = key(&lookalike, "t1", "c");
        cache
            .set_many(vec![
                (victim.clone(), entry(1)),
                (bystander.clone(), entry(2)),
            ])
            .await;
        cache.delete_thread(&glob_prefix, "t1").await;
        let found = cache.get_many(&[victim.clone(), bystander.clone()]).await;
        assert!(!found.contains_key(&victim), "{victim} purged");
        assert!(
            found.contains_key(&bystander),
            "{bystander} must survive a purge of prefix {glob_prefix:?}"
        );
    }
    // A thread id made of glob characters purges only itself.
    let wild = key(&p, "*", "c");
    let tame = key(&p, "t1", "c");
    cache
        .set_many(vec![(wild.clone(), entry(1)), (tame.clone(), entry(2))])
        .await;
    assert!(wild.starts_with(&thread_key_stem(&p, "*")));
    cache.delete_thread(&p, "*").await;
    let found = cache.get_many(&[wild.clone(), tame.clone()]).await;
    assert!(!found.contains_key(&wild) && found.contains_key(&tame));
}

/// Guarantee `cache.no_expiry_by_default`: without a TTL, entries outlive the shortest TTL a
/// backend could apply (1 s).
pub async fn ttl_zero_keeps_entries(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let k = key(&p, "t1", "c");
    cache.set_many(vec![(k.clone(), entry(1))]).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        cache.get_many(std::slice::from_ref(&k)).await.get(&k),
        Some(&entry(1))
    );
}

/// Guarantee `cache.failures_are_misses` (the part every adapter can show without fault injection):
/// hostile input never makes a call fail or panic, and counters stay exact.
pub async fn calls_return_on_hostile_input(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let long_key = format!("{p}:{}", "k".repeat(64 * 1024));
    let big = typed("msgpack", vec![b'b'; 1024 * 1024]);
    cache.set_many(vec![(long_key.clone(), big.clone())]).await;
    assert_eq!(
        cache
            .get_many(std::slice::from_ref(&long_key))
            .await
            .get(&long_key),
        Some(&big)
    );
    // One call with 10,000 keys, none cached.
    let many: Vec<String> = (0..10_000).map(|i| format!("{p}:absent:{i}")).collect();
    let before = cache.stats();
    assert!(cache.get_many(&many).await.is_empty());
    assert_eq!(delta(before, cache.stats()), (0, 10_000));
    cache.delete_thread("", "").await; // an empty prefix and thread id purge only `::`-keys
    assert_eq!(
        cache.get_many(std::slice::from_ref(&long_key)).await.len(),
        1
    );
}

/// Guarantee `cache.safe_to_share`: many tasks at once; the counters add up exactly.
pub async fn concurrent_calls_keep_counters_exact(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let tasks = 8;
    let rounds = 25;
    let before = cache.stats();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let cache = cache.clone();
        let p = p.clone();
        handles.push(tokio::spawn(async move {
            let mut seen: HashMap<String, TypedPayload> = HashMap::new();
            for r in 0..rounds {
                let present = key(&p, &format!("t{t}"), &format!("c{r}"));
                let absent = key(&p, &format!("t{t}"), &format!("missing{r}"));
                cache.set_many(vec![(present.clone(), entry(r))]).await;
                let found = cache.get_many(&[present.clone(), absent]).await;
                seen.extend(found);
            }
            seen.len()
        }));
    }
    for h in handles {
        assert_eq!(h.await.expect("task"), rounds as usize);
    }
    let expected = (tasks * rounds) as u64;
    assert_eq!(delta(before, cache.stats()), (expected, expected));
}

/// Guarantee `cache.close_is_final`: after close every call still returns, reads are misses,
/// counters are kept.
pub async fn close_is_final_and_keeps_counters(cache: Arc<dyn CheckpointCache>) {
    let p = unique_prefix("ckpt");
    let k = key(&p, "t1", "c");
    cache.set_many(vec![(k.clone(), entry(1))]).await;
    assert_eq!(cache.get_many(std::slice::from_ref(&k)).await.len(), 1);
    let before = cache.stats();
    cache.close().await;
    assert_eq!(cache.stats().hits, before.hits, "counters survive close");
    assert!(cache.get_many(std::slice::from_ref(&k)).await.is_empty());
    cache.set_many(vec![(k.clone(), entry(2))]).await;
    cache.delete_thread(&p, "t1").await;
    assert!(cache.get_many(std::slice::from_ref(&k)).await.is_empty());
    assert_eq!(delta(before, cache.stats()), (0, 2));
    cache.close().await; // closing twice is fine
}

/// Stamps one `#[tokio::test]` per guarantee of `CheckpointCache`, named after the case.
///
/// `$factory` is an `async fn(CheckpointCacheSetup) ->
/// switchyard_core::Result<CheckpointCacheFixture>`, or a closure returning such a future; it is
/// called once per case.
#[macro_export]
macro_rules! checkpoint_cache_suite {
    ($factory:expr) => {
        // The cases of `guarantees.toml`, in its order (ADR 0362).
        $crate::__checkpoint_cache_suite_cases!($factory);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[$crate::__tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::checkpoint_cache::run(
                    &|setup| ::std::boxed::Box::pin(($factory)(setup)),
                    $crate::checkpoint_cache::$case,
                )
                .await;
            }
        )*
    };
}
