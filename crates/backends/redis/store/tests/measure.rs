//! Measurements, not assertions (timings are never asserted). Run with:
//! `cargo test -p switchyard-store-redis --test measure -- --ignored --nocapture --test-threads=1`

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{HOUR, started};
use switchyard_core::event::{MessageText, Payload, RunCompleted, Usage};
use switchyard_core::{EventStore, RunContext};

fn text(i: usize) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("chunk {i}"),
    })
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![],
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            usd: None,
        },
    })
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run explicitly"]
async fn measure_appends() {
    let store = Arc::new(common::store("m-append", None).await);
    let ctx = RunContext::new("single");
    let n = 3000;
    let t0 = Instant::now();
    for i in 0..n {
        store
            .append(&ctx, vec![text(i)], "o")
            .await
            .expect("append");
    }
    let single = n as f64 / t0.elapsed().as_secs_f64();

    let ctx = RunContext::new("hot");
    let (writers, per) = (100, 50);
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (store, ctx) = (store.clone(), ctx.clone());
            tokio::spawn(async move {
                for i in 0..per {
                    store
                        .append(&ctx, vec![text(w * per + i)], "o")
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("join");
    }
    let many = (writers * per) as f64 / t0.elapsed().as_secs_f64();
    println!("appends/s: single writer {single:.0}; 100 writers to one run {many:.0}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run explicitly"]
async fn measure_claim_64_contenders() {
    let store = Arc::new(common::store("m-claim64", None).await);
    let mut lat = Vec::new();
    let mut winners_per_round = Vec::new();
    for round in 0..10 {
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let ctx = RunContext::new(format!("r{i}")).with_session(format!("s{round}"));
                    let t0 = Instant::now();
                    let (claim, _) = store
                        .claim_start(&ctx, started(), "o", HOUR)
                        .await
                        .expect("claim");
                    (claim.won(), t0.elapsed())
                })
            })
            .collect();
        let mut winners = 0;
        for t in tasks {
            let (won, d) = t.await.expect("join");
            winners += usize::from(won);
            lat.push(d);
        }
        winners_per_round.push(winners);
    }
    let p50 = pct(&mut lat, 50);
    let p99 = pct(&mut lat, 99);
    println!(
        "claim_start x64 contenders, 10 rounds: winners per round {winners_per_round:?}; p50 {p50:?} p99 {p99:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run explicitly"]
async fn measure_claim_cost_with_closed_history() {
    let store = common::store("m-history", None).await;
    // A session with 500 closed runs.
    for i in 0..500 {
        let ctx = RunContext::new(format!("old{i}")).with_session("busy");
        store
            .claim_start(&ctx, started(), "o", HOUR)
            .await
            .expect("claim");
        store
            .append(&ctx, vec![completed()], "o")
            .await
            .expect("close");
    }
    let rounds = 300;
    let mut history = Vec::new();
    let mut fresh = Vec::new();
    for i in 0..rounds {
        let ctx = RunContext::new(format!("new{i}")).with_session("busy");
        let t0 = Instant::now();
        let (claim, _) = store
            .claim_start(&ctx, started(), "o", HOUR)
            .await
            .expect("claim");
        history.push(t0.elapsed());
        assert!(claim.won());
        store
            .append(&ctx, vec![completed()], "o")
            .await
            .expect("close");

        let ctx = RunContext::new("first").with_session(format!("fresh{i}"));
        let t0 = Instant::now();
        let (claim, _) = store
            .claim_start(&ctx, started(), "o", HOUR)
            .await
            .expect("claim");
        fresh.push(t0.elapsed());
        assert!(claim.won());
    }
    let (h50, f50) = (pct(&mut history, 50), pct(&mut fresh, 50));
    let (h99, f99) = (pct(&mut history, 99), pct(&mut fresh, 99));
    println!(
        "claim_start: 500+ closed runs p50 {h50:?} p99 {h99:?}; fresh session p50 {f50:?} p99 {f99:?}; ratio p50 {:.2}",
        h50.as_secs_f64() / f50.as_secs_f64()
    );
}
