//! Guarantee `schedule.stored`: stored schedule documents.

use switchyard_core::Error;

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `schedule.stored`: one document per schedule name, upserted, read back byte for byte,
/// listed by name (hostile names included, sorted), deleted with an answer saying whether it
/// existed.
pub async fn schedules(b: Backend) {
    let base = unique_id("sched");
    let docs: Vec<(String, Vec<u8>)> = vec![
        (base.clone(), br#"{"cron": "*/5 * * * *"}"#.to_vec()),
        (format!("{base}:x"), b"\x00\xff\r\n binary".to_vec()),
        (format!("{base}:x:y"), Vec::new()),
        (
            format!("{base}{{x}}%41 \u{e9}|*?["),
            "unicode \u{2603}".as_bytes().to_vec(),
        ),
        (format!("{base} "), b"trailing space".to_vec()),
    ];
    for (name, doc) in &docs {
        b.schedule_put(name, doc).await.expect("put");
    }
    for (name, doc) in &docs {
        assert_eq!(
            b.schedule_get(name).await.expect("get").as_ref(),
            Some(doc),
            "{name:?}"
        );
    }
    assert_eq!(
        b.schedule_get(&format!("{base}:")).await.expect("get"),
        None
    );
    let ours = |all: std::collections::BTreeMap<String, Vec<u8>>| -> Vec<(String, Vec<u8>)> {
        all.into_iter()
            .filter(|(n, _)| n.starts_with(&base))
            .collect()
    };
    let mut want = docs.clone();
    want.sort();
    assert_eq!(ours(b.schedule_list().await.expect("list")), want);

    // Upsert replaces; delete answers whether it existed.
    let doc = br#"{"cron": "0 * * * *", "paused": true}"#.to_vec();
    b.schedule_put(&base, &doc).await.expect("put");
    assert_eq!(b.schedule_get(&base).await.expect("get"), Some(doc.clone()));
    let listed = ours(b.schedule_list().await.expect("list"));
    assert_eq!(listed.len(), docs.len(), "one document per name");
    assert!(listed.contains(&(base.clone(), doc)));
    let gone = format!("{base}:x");
    assert!(b.schedule_delete(&gone).await.expect("delete"));
    assert!(
        !b.schedule_delete(&gone).await.expect("delete"),
        "deleted once"
    );
    assert_eq!(b.schedule_get(&gone).await.expect("get"), None);
    let listed = ours(b.schedule_list().await.expect("list"));
    assert_eq!(listed.len(), docs.len() - 1);
    assert!(!listed.iter().any(|(n, _)| *n == gone));
    assert_eq!(
        b.schedule_get(&format!("{base}:x:y")).await.expect("get"),
        Some(Vec::new()),
        "a prefix's delete leaves its longer names"
    );

    for r in [
        b.schedule_put("", b"x").await.map(|_| ()),
        b.schedule_get("").await.map(|_| ()),
        b.schedule_delete("").await.map(|_| ()),
    ] {
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    }
    for (name, _) in &docs {
        b.schedule_delete(name).await.expect("clean up");
    }
    assert!(ours(b.schedule_list().await.expect("list")).is_empty());
}
