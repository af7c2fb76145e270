//! Guarantee `queue.batches`: pushes, reservations and acks in batches.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use switchyard_core::Error;
use switchyard_core::fleet::{MAX_BATCH, Priority, Receipt, RunAt, Submit};

use crate::fleet::Backend;
use crate::fleet::common::{LAPSE, LONG, SHORT, sleep};
use crate::harness::unique_id;

fn invalid(r: switchyard_core::Result<()>) -> bool {
    matches!(r, Err(Error::InvalidInput { .. }))
}

fn bodies(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// Guarantee `queue.batches`: `queue_push_many` appends a batch in order in one step;
/// `queue_reserve_many` moves due scheduled tasks, then reserves up to `max` tasks in serve order
/// in one step, each with its own receipt, waiting only while nothing is ready; `queue_ack_many`
/// answers each receipt in order (a stale one, or one given twice, `false`); empty batches do
/// nothing; over 1000 items or `max = 0` is `InvalidInput`.
pub async fn queue_batches(b: Backend) {
    let q = unique_id("q:{batches}");
    assert!(invalid(
        b.queue_push_many(&q, &bodies("x", MAX_BATCH + 1), Priority::Normal)
            .await
    ));
    assert!(invalid(
        b.queue_reserve_many(&q, 0, Duration::ZERO, LONG)
            .await
            .map(drop)
    ));
    assert!(invalid(
        b.queue_reserve_many(&q, MAX_BATCH + 1, Duration::ZERO, LONG)
            .await
            .map(drop)
    ));
    assert!(invalid(
        b.queue_reserve_many(&q, 1, Duration::ZERO, Duration::ZERO)
            .await
            .map(drop)
    ));
    let too_many: Vec<Receipt> = (0..=MAX_BATCH)
        .map(|i| Receipt::new(format!("r{i}")))
        .collect();
    assert!(invalid(b.queue_ack_many(&q, &too_many).await.map(drop)));
    assert!(invalid(
        b.queue_push_many("", &bodies("x", 1), Priority::Normal)
            .await
    ));
    b.queue_push_many(&q, &[], Priority::Normal)
        .await
        .expect("empty push");
    assert_eq!(
        b.queue_ack_many(&q, &[]).await.expect("empty ack"),
        Vec::<bool>::new()
    );
    assert_eq!(
        b.queue_stats(&q).await.expect("stats").total(),
        0,
        "refused and empty batches stored nothing"
    );
    assert!(
        b.queue_reserve_many(&q, 5, Duration::ZERO, LONG)
            .await
            .expect("reserve")
            .is_empty()
    );

    // In order, at the tier's end, served in priority order.
    b.queue_push(&q, b"n0", Priority::Normal)
        .await
        .expect("push");
    b.queue_push_many(&q, &bodies("n", 4)[1..], Priority::Normal)
        .await
        .expect("push");
    b.queue_push_many(&q, &bodies("h", 2), Priority::High)
        .await
        .expect("push");
    b.queue_push_many(&q, &bodies("l", 1), Priority::Low)
        .await
        .expect("push");
    let got = b
        .queue_reserve_many(&q, 4, Duration::ZERO, LONG)
        .await
        .expect("reserve");
    let seen: Vec<(&[u8], Priority, u32)> = got
        .iter()
        .map(|d| (d.body.as_slice(), d.priority, d.attempt))
        .collect();
    assert_eq!(
        seen,
        vec![
            (&b"h0"[..], Priority::High, 1),
            (b"h1", Priority::High, 1),
            (b"n0", Priority::Normal, 1),
            (b"n1", Priority::Normal, 1),
        ]
    );
    let receipts: HashSet<&Receipt> = got.iter().map(|d| &d.receipt).collect();
    assert_eq!(receipts.len(), 4, "a receipt per delivery");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.normal, s.low, s.in_flight), (2, 1, 4), "{s:?}");

    // Each receipt answered in order: a current one `true` once, a repeated or unknown one `false`.
    let answers = b
        .queue_ack_many(
            &q,
            &[
                got[0].receipt.clone(),
                got[2].receipt.clone(),
                got[0].receipt.clone(),
                Receipt::new("not-a-receipt"),
            ],
        )
        .await
        .expect("ack many");
    assert_eq!(answers, vec![true, true, false, false]);
    // A stale receipt: the delivery went back by a nack, then out again.
    assert!(
        b.queue_nack(&q, &got[1].receipt, &got[1].body, Duration::ZERO)
            .await
            .expect("nack")
    );
    let rest = b
        .queue_reserve_many(&q, MAX_BATCH, Duration::ZERO, LONG)
        .await
        .expect("reserve");
    let seen: Vec<(&[u8], u32)> = rest
        .iter()
        .map(|d| (d.body.as_slice(), d.attempt))
        .collect();
    assert_eq!(
        seen,
        vec![(&b"h1"[..], 2), (b"n2", 1), (b"n3", 1), (b"l0", 1)],
        "fewer ready than max: every ready one, in serve order (the nacked one back in its tier)"
    );
    let mut all: Vec<Receipt> = vec![got[1].receipt.clone(), got[3].receipt.clone()];
    all.extend(rest.iter().map(|d| d.receipt.clone()));
    assert_eq!(
        b.queue_ack_many(&q, &all).await.expect("ack many"),
        vec![false, true, true, true, true, true]
    );
    assert_eq!(b.queue_stats(&q).await.expect("stats").total(), 0);

    // A full batch, both ways.
    let full = bodies("f", MAX_BATCH);
    b.queue_push_many(&q, &full, Priority::Low)
        .await
        .expect("push a full batch");
    assert_eq!(b.queue_size(&q).await.expect("size"), MAX_BATCH as u64);
    let got = b
        .queue_reserve_many(&q, MAX_BATCH, Duration::ZERO, LONG)
        .await
        .expect("reserve a full batch");
    assert_eq!(
        got.iter().map(|d| d.body.clone()).collect::<Vec<_>>(),
        full,
        "in the order pushed"
    );
    let receipts: Vec<Receipt> = got.iter().map(|d| d.receipt.clone()).collect();
    assert_eq!(
        b.queue_ack_many(&q, &receipts)
            .await
            .expect("ack a full batch"),
        vec![true; MAX_BATCH]
    );

    // Due scheduled tasks are moved first, then reserved with the rest.
    b.queue_submit(&q, b"later", &Submit::new().run_at(RunAt::After(SHORT)))
        .await
        .expect("submit");
    b.queue_push(&q, b"ready", Priority::High)
        .await
        .expect("push");
    sleep(LAPSE).await;
    let got = b
        .queue_reserve_many(&q, 5, Duration::ZERO, LONG)
        .await
        .expect("reserve");
    assert_eq!(
        got.iter().map(|d| d.body.as_slice()).collect::<Vec<_>>(),
        vec![&b"ready"[..], b"later"]
    );
    let receipts: Vec<Receipt> = got.iter().map(|d| d.receipt.clone()).collect();
    assert_eq!(
        b.queue_ack_many(&q, &receipts).await.expect("ack"),
        vec![true, true]
    );

    // A waiting reserve_many takes the whole batch pushed meanwhile, not an empty list.
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move {
            b.queue_reserve_many(&q, 5, Duration::from_secs(10), LONG)
                .await
                .expect("reserve")
        })
    };
    sleep(Duration::from_millis(200)).await;
    b.queue_push_many(&q, &bodies("w", 2), Priority::Normal)
        .await
        .expect("push");
    let got = waiter.await.expect("waiter");
    assert_eq!(
        got.iter().map(|d| d.body.clone()).collect::<Vec<_>>(),
        bodies("w", 2),
        "a batch pushed in one step is reserved in one step"
    );
    let receipts: Vec<Receipt> = got.iter().map(|d| d.receipt.clone()).collect();
    assert_eq!(
        b.queue_ack_many(&q, &receipts).await.expect("ack"),
        vec![true, true]
    );

    // A reader never sees part of a batch.
    let q2 = unique_id("q:{batches}");
    const BATCH: usize = 50;
    let done = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (b, q2, done) = (b.clone(), q2.clone(), done.clone());
        tokio::spawn(async move {
            for i in 0..10 {
                b.queue_push_many(&q2, &bodies(&format!("b{i}-"), BATCH), Priority::Normal)
                    .await
                    .expect("push");
                tokio::task::yield_now().await;
            }
            done.store(true, Ordering::Relaxed);
        })
    };
    while !done.load(Ordering::Relaxed) && !pusher.is_finished() {
        let size = b.queue_size(&q2).await.expect("size");
        assert_eq!(size % BATCH as u64, 0, "saw part of a batch: {size}");
        tokio::task::yield_now().await;
    }
    pusher.await.expect("pusher");
    assert_eq!(b.queue_size(&q2).await.expect("size"), 10 * BATCH as u64);
}
