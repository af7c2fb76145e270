//! Guarantee 21: the automation catalog.

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee 21: one catalog document per automation type; `catalog_all` returns them all.
pub async fn catalog(b: Backend) {
    let a = unique_id("at");
    let c = unique_id("at");
    b.catalog_set(&a, br#"{"v": 1}"#).await.expect("set");
    b.catalog_set(&c, br#"{"v": 2}"#).await.expect("set");
    b.catalog_set(&a, br#"{"v": 3}"#).await.expect("overwrite");
    assert_eq!(
        b.catalog_get(&a).await.expect("get"),
        Some(br#"{"v": 3}"#.to_vec())
    );
    assert_eq!(b.catalog_get(&unique_id("none")).await.expect("get"), None);
    let all = b.catalog_all().await.expect("all");
    assert_eq!(all.get(&a), Some(&br#"{"v": 3}"#.to_vec()));
    assert_eq!(all.get(&c), Some(&br#"{"v": 2}"#.to_vec()));
}
