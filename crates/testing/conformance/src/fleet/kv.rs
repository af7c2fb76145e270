//! Guarantee `kv.entries`: the key-value area (set, set-if-absent, TTL, get, delete).

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, SHORT, sleep};
use crate::harness::unique_id;

/// Guarantee `kv.entries`: `kv_set` upserts and clears an old TTL, a TTL makes the value disappear,
/// `kv_set_nx` writes only when the key is absent or expired, a missing key is `None`, `kv_del`
/// says whether it deleted.
pub async fn kv(b: Backend) {
    let ns = unique_id("ns");
    b.kv_set(&ns, "a", b"1", None).await.expect("set");
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), Some(b"1".to_vec()));
    assert!(!b.kv_set_nx(&ns, "a", b"2", None).await.expect("nx"));
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), Some(b"1".to_vec()));
    assert_eq!(b.kv_get(&ns, "missing").await.expect("get"), None);

    b.kv_set(&ns, "t", b"x", Some(SHORT))
        .await
        .expect("set ttl");
    b.kv_set(&ns, "cleared", b"x", Some(SHORT))
        .await
        .expect("set ttl");
    b.kv_set(&ns, "cleared", b"y", None)
        .await
        .expect("set clears ttl");
    b.kv_set_nx(&ns, "n", b"x", Some(SHORT))
        .await
        .expect("nx ttl");
    sleep(LAPSE).await;
    assert_eq!(b.kv_get(&ns, "t").await.expect("get"), None, "expired");
    assert_eq!(
        b.kv_get(&ns, "cleared").await.expect("get"),
        Some(b"y".to_vec())
    );
    assert!(
        b.kv_set_nx(&ns, "n", b"z", None)
            .await
            .expect("nx after expiry")
    );
    assert_eq!(b.kv_get(&ns, "n").await.expect("get"), Some(b"z".to_vec()));

    assert!(b.kv_del(&ns, "a").await.expect("del"));
    assert!(!b.kv_del(&ns, "a").await.expect("del again"));
    assert_eq!(b.kv_get(&ns, "a").await.expect("get"), None);
}
