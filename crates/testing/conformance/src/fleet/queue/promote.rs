//! Guarantee `queue.promote_due`: moving due scheduled tasks to their tiers without reserving
//! anything.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use switchyard_core::Error;
use switchyard_core::fleet::{Priority, RunAt, Submit};

use crate::fleet::Backend;
use crate::fleet::common::{LONG, sleep};
use crate::harness::unique_id;

/// How long the delayed tasks of this case wait.
const DELAY: Duration = Duration::from_millis(400);
/// How many promoters run at once.
const PROMOTERS: usize = 4;
/// Delayed tasks in the round where promoters race reservers.
const RACED: usize = 24;

/// `k` of a body `<word>-<k>`.
fn number(body: &[u8]) -> usize {
    String::from_utf8_lossy(body)
        .rsplit('-')
        .next()
        .and_then(|k| k.parse().ok())
        .expect("a body <word>-<k>")
}

async fn reserve_now(b: &Backend, q: &str) -> Option<switchyard_core::fleet::Delivery> {
    b.queue_reserve(q, Duration::ZERO, LONG)
        .await
        .expect("reserve")
}

/// Runs `PROMOTERS` promoters of `q` at once; the counts they returned.
async fn promote_at_once(b: &Backend, q: &str) -> Vec<u64> {
    let promoters: Vec<_> = (0..PROMOTERS)
        .map(|_| {
            let (b, q) = (b.clone(), q.to_owned());
            tokio::spawn(async move { b.queue_promote_due(&q).await.expect("promote") })
        })
        .collect();
    let mut counts = Vec::with_capacity(PROMOTERS);
    for p in promoters {
        counts.push(p.await.expect("promoter"));
    }
    counts
}

/// Guarantee `queue.promote_due`: `queue_promote_due` moves every due scheduled task (delayed
/// submits of every tier, identical delayed bodies, a delayed nack keeping its attempt count) to
/// the end of its own tier and reserves nothing, and says how many; concurrent promoters move each
/// once between them, and promoters racing reservers and acks never make a task delivered twice; a
/// task not yet due stays scheduled; a paused queue moves nothing until it is resumed; an unknown
/// queue returns 0 and stores nothing; an empty name is `InvalidInput`.
pub async fn queue_promote_due(b: Backend) {
    let q = unique_id("q:{promote}");
    assert!(matches!(
        b.queue_promote_due("").await,
        Err(Error::InvalidInput { .. })
    ));
    let unknown = unique_id("q:{promote-unknown}");
    assert_eq!(b.queue_promote_due(&unknown).await.expect("promote"), 0);
    assert_eq!(
        b.queue_stats(&unknown).await.expect("stats").total(),
        0,
        "promoting an unknown queue stores nothing"
    );

    // A delayed nack that keeps its attempt count, then delayed submits of every tier (two
    // identical bodies among them) and one that is due long after the case.
    b.queue_push(&q, b"retry", Priority::Normal)
        .await
        .expect("push");
    let first = reserve_now(&b, &q).await.expect("retry");
    assert_eq!((first.body.as_slice(), first.attempt), (&b"retry"[..], 1));
    let start = Instant::now();
    assert!(
        b.queue_nack(&q, &first.receipt, b"retry", DELAY)
            .await
            .expect("nack")
    );
    b.queue_push(&q, b"waiting", Priority::Normal)
        .await
        .expect("push");
    let later = |p: Priority| Submit::new().priority(p).run_at(RunAt::After(DELAY));
    for (body, p) in [
        (&b"high"[..], Priority::High),
        (b"same", Priority::Normal),
        (b"same", Priority::Normal),
        (b"low", Priority::Low),
    ] {
        b.queue_submit(&q, body, &later(p)).await.expect("submit");
    }
    b.queue_submit(&q, b"not yet", &Submit::new().run_at(RunAt::After(LONG)))
        .await
        .expect("submit");
    let early = b.queue_promote_due(&q).await.expect("promote");
    // Only what was done well before the delay can have passed proves "not before".
    if start.elapsed() < DELAY.mul_f64(0.75) {
        assert_eq!(early, 0, "promoted before their time");
        let s = b.queue_stats(&q).await.expect("stats");
        assert_eq!((s.scheduled, s.normal, s.waiting()), (6, 1, 1), "{s:?}");
    }

    sleep(DELAY + Duration::from_millis(200)).await;
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.due), (6 - early, 5 - early), "{s:?}");
    assert_eq!(
        b.queue_promote_due(&q).await.expect("promote") + early,
        5,
        "every due task moved"
    );
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!(
        (s.high, s.normal, s.low, s.in_flight, s.scheduled, s.due),
        (1, 4, 1, 0, 1, 0),
        "due tasks wait in their tiers, none reserved, the one not due still scheduled: {s:?}"
    );
    assert_eq!(
        b.queue_peek(&q, 10).await.expect("peek"),
        [&b"high"[..], b"waiting", b"retry", b"same", b"same", b"low"]
            .map(<[u8]>::to_vec)
            .to_vec(),
        "each at its tier's end, after the task already waiting"
    );
    let mut got = Vec::new();
    while let Some(d) = reserve_now(&b, &q).await {
        got.push((
            String::from_utf8_lossy(&d.body).into_owned(),
            d.priority,
            d.attempt,
        ));
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
    }
    let want = [
        ("high", Priority::High, 1),
        ("waiting", Priority::Normal, 1),
        ("retry", Priority::Normal, 2),
        ("same", Priority::Normal, 1),
        ("same", Priority::Normal, 1),
        ("low", Priority::Low, 1),
    ];
    assert_eq!(
        got,
        want.map(|(body, p, a)| (body.to_owned(), p, a)).to_vec(),
        "each delivered once, in its tier, the nacked one with its attempt count kept"
    );
    assert_eq!(b.queue_promote_due(&q).await.expect("promote"), 0);
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.due, s.total()), (1, 0, 1), "{s:?}");

    // Paused: a due task stays scheduled (and counted in `due`) until the resume.
    assert!(b.queue_pause(&q).await.expect("pause"));
    b.queue_submit(&q, b"paused", &later(Priority::High))
        .await
        .expect("submit");
    sleep(DELAY + Duration::from_millis(200)).await;
    assert_eq!(
        b.queue_promote_due(&q).await.expect("promote"),
        0,
        "a paused queue moves nothing"
    );
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.due, s.high), (2, 1, 0), "{s:?}");
    assert!(b.queue_resume(&q).await.expect("resume"));
    assert_eq!(b.queue_promote_due(&q).await.expect("promote"), 1);
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.due, s.high), (1, 0, 1), "{s:?}");
    let d = reserve_now(&b, &q)
        .await
        .expect("the task due during the pause");
    assert_eq!(
        (d.body.as_slice(), d.priority),
        (&b"paused"[..], Priority::High)
    );
    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));

    // Promoters at once: each due task moved by one of them.
    let tiers = [Priority::High, Priority::Normal, Priority::Low];
    for i in 0..RACED {
        let body = format!("promoted-{i}");
        b.queue_submit(&q, body.as_bytes(), &later(tiers[i % 3]))
            .await
            .expect("submit");
    }
    sleep(DELAY + Duration::from_millis(200)).await;
    let counts = promote_at_once(&b, &q).await;
    assert_eq!(
        counts.iter().sum::<u64>(),
        RACED as u64,
        "each due task moved once, whatever the number of promoters: {counts:?}"
    );
    let s = b.queue_stats(&q).await.expect("stats");
    let third = (RACED / 3) as u64;
    assert_eq!(
        (s.high, s.normal, s.low, s.in_flight, s.scheduled),
        (third, third, third, 0, 1),
        "{s:?}"
    );
    let mut delivered: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    while let Some(d) = reserve_now(&b, &q).await {
        assert_eq!(d.priority, tiers[number(&d.body) % 3], "in its own tier");
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
        *delivered.entry(d.body).or_default() += 1;
    }
    let want: BTreeMap<Vec<u8>, usize> = (0..RACED)
        .map(|i| (format!("promoted-{i}").into_bytes(), 1))
        .collect();
    assert_eq!(delivered, want, "each promoted task delivered once");

    // Promoters racing reservers and acks: every task is delivered exactly once.
    for i in 0..RACED {
        let body = format!("raced-{i}");
        b.queue_submit(&q, body.as_bytes(), &later(tiers[i % 3]))
            .await
            .expect("submit");
    }
    sleep(DELAY + Duration::from_millis(200)).await;
    let reservers: Vec<_> = (0..2)
        .map(|_| {
            let (b, q) = (b.clone(), q.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(d) = reserve_now(&b, &q).await {
                    assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
                    got.push(d.body);
                }
                got
            })
        })
        .collect();
    let counts = promote_at_once(&b, &q).await;
    let promoted: u64 = counts.iter().sum();
    assert!(
        promoted <= RACED as u64,
        "{promoted} promoted of {RACED} due: {counts:?}"
    );
    let mut delivered: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for r in reservers {
        for body in r.await.expect("reserver") {
            *delivered.entry(body).or_default() += 1;
        }
    }
    // What the reservers left (they stop at the first empty look).
    while let Some(d) = reserve_now(&b, &q).await {
        assert!(b.queue_ack(&q, &d.receipt).await.expect("ack"));
        *delivered.entry(d.body).or_default() += 1;
    }
    let want: BTreeMap<Vec<u8>, usize> = (0..RACED)
        .map(|i| (format!("raced-{i}").into_bytes(), 1))
        .collect();
    assert_eq!(delivered, want, "each raced task delivered exactly once");
    let s = b.queue_stats(&q).await.expect("stats");
    assert_eq!((s.scheduled, s.due, s.total()), (1, 0, 1), "{s:?}");
}
