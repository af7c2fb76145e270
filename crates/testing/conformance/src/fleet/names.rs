//! Guarantee `fleet.hostile_names`: hostile names and invalid input, across every area.

use std::time::Duration;

use serde_json::json;
use switchyard_core::Error;
use switchyard_core::fleet::{Priority, RateLimit, Tags};

use crate::fleet::Backend;
use crate::fleet::common::LONG;
use crate::harness::unique_id;

/// Guarantee `fleet.hostile_names`: names with `:`, `|`, `{`, `}`, `%`, spaces or unicode never
/// share state (pause and rate limits included); empty names and zero holds or visibilities are
/// `Error::InvalidInput`.
pub async fn hostile_names(b: Backend) {
    let base = unique_id("h");
    let a = format!("{base}:a");
    let ab = format!("{a}:b");
    b.kv_set(&ab, "c", b"1", None).await.expect("set");
    b.kv_set(&a, "b:c", b"2", None).await.expect("set");
    assert_eq!(b.kv_get(&ab, "c").await.expect("get"), Some(b"1".to_vec()));
    assert_eq!(b.kv_get(&a, "b:c").await.expect("get"), Some(b"2".to_vec()));

    for name in [
        format!("{base}:q"),
        format!("{base}:q:high"),
        format!("{base}{{x}}%41 é|"),
    ] {
        b.queue_push(&name, name.as_bytes(), Priority::Normal)
            .await
            .expect("push");
    }
    for name in [
        format!("{base}:q"),
        format!("{base}:q:high"),
        format!("{base}{{x}}%41 é|"),
    ] {
        assert_eq!(
            b.queue_peek(&name, 10).await.expect("peek"),
            vec![name.as_bytes().to_vec()]
        );
    }

    // Pause and rate limits are per queue too: setting them on one leaves look-alikes alone.
    let paused = format!("{base}:q");
    let limited = format!("{base}:q:high");
    b.queue_push(&format!("{base}:q:paused"), b"p", Priority::Normal)
        .await
        .expect("push");
    assert!(b.queue_pause(&paused).await.expect("pause"));
    let limit = RateLimit::new(1, Duration::from_secs(600)).expect("limit");
    b.queue_set_rate_limit(&limited, Some(limit))
        .await
        .expect("limit");
    for (name, want) in [
        (paused.clone(), (true, None)),
        (limited.clone(), (false, Some(limit))),
        (format!("{base}:q:paused"), (false, None)),
        (format!("{base}:q:rate"), (false, None)),
        (format!("{base}{{x}}%41 é|"), (false, None)),
    ] {
        let s = b.queue_stats(&name).await.expect("stats");
        assert_eq!((s.paused, s.rate_limit), want, "{name:?}");
    }
    let d = b
        .queue_reserve(&format!("{base}:q:paused"), Duration::ZERO, LONG)
        .await
        .expect("reserve")
        .expect("not paused");
    assert!(
        b.queue_ack(&format!("{base}:q:paused"), &d.receipt)
            .await
            .expect("ack")
    );
    assert!(b.queue_resume(&paused).await.expect("resume"));
    b.queue_set_rate_limit(&limited, None).await.expect("limit");

    let at = format!("{base}|x");
    b.worker_register(&at, "y", &json!({}))
        .await
        .expect("register");
    b.worker_register(&base, "x|y", &json!({}))
        .await
        .expect("register");
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![(at.clone(), "y".to_string())]
    );
    assert_eq!(
        b.worker_list(Some(&base)).await.expect("list"),
        vec![(base.clone(), "x|y".to_string())]
    );
    let all = b.worker_list(None).await.expect("list");
    assert!(all.contains(&(at.clone(), "y".to_string())));
    assert!(all.contains(&(base.clone(), "x|y".to_string())));

    let p = format!("{base}:pool");
    b.pool_put(&p, "id:with:colons", b"x", &Tags::new(), None)
        .await
        .expect("put");
    let c = b
        .pool_claim_any(&p, &Tags::new(), LONG)
        .await
        .expect("claim")
        .expect("item");
    assert_eq!(c.item.id, "id:with:colons");

    assert!(matches!(
        b.queue_push("", b"x", Priority::Normal).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.queue_reserve(&base, Duration::ZERO, Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.lock_acquire(&base, Duration::ZERO, Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        b.pool_claim_any(&p, &Tags::new(), Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
}
