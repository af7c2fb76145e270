//! Guarantee `lock.fenced`: token locks with fences.

use std::time::Duration;

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

/// Guarantee `lock.fenced`: one holder at a time; `lock_acquire` waits up to `wait`, then `None`;
/// release and extend act only with the holder's token; the lock lapses after its hold; fences
/// rise.
pub async fn lock(b: Backend) {
    let l = unique_id("lock");
    let g1 = b
        .lock_acquire(&l, SHORT, Duration::ZERO)
        .await
        .expect("acquire")
        .expect("free");
    assert_eq!(g1.token.len(), 32);
    assert!(
        b.lock_acquire(&l, LONG, Duration::ZERO)
            .await
            .expect("acquire")
            .is_none()
    );
    // The holder's hold lapses while we wait.
    let g2 = b
        .lock_acquire(&l, LONG, Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("lapsed lock acquired while waiting");
    assert!(g2.fence > g1.fence, "fences rise");
    assert!(
        !b.lock_release(&l, &g1.token).await.expect("release"),
        "stale token"
    );
    assert!(
        !b.lock_extend(&l, &g1.token, LONG).await.expect("extend"),
        "stale token"
    );
    assert!(b.lock_extend(&l, &g2.token, LONG).await.expect("extend"));
    assert!(b.lock_release(&l, &g2.token).await.expect("release"));
    assert!(!b.lock_release(&l, &g2.token).await.expect("release twice"));
    let g3 = b
        .lock_acquire(&l, SHORT, Duration::ZERO)
        .await
        .expect("acquire")
        .expect("free");
    assert!(g3.fence > g2.fence);
    assert!(b.lock_extend(&l, &g3.token, LONG).await.expect("extend"));
    sleep(LAPSE).await;
    assert!(
        b.lock_acquire(&l, LONG, Duration::ZERO)
            .await
            .expect("acquire")
            .is_none(),
        "extended lock still held"
    );
}
