use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::fleet::{FleetBackend, Priority};
use switchyard_fleet_sqlite::SqliteFleetBackend;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let dir = std::env::temp_dir().join(format!("probe-{}", std::process::id()));
    let b: Arc<dyn FleetBackend> = Arc::new(SqliteFleetBackend::open(dir.join("f.db")).await.unwrap());
    for ids in std::env::var("IDS").map(|v| vec![v == "1"]).unwrap_or(vec![false, true, false, true]) {
        let t = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let until = Instant::now() + Duration::from_secs(2);
        let mut hs = vec![];
        for w in 0..64 {
            let (b, t) = (b.clone(), t.clone());
            let q = format!("q{ids}");
            hs.push(tokio::spawn(async move {
                let mut i = 0;
                while Instant::now() < until {
                    let body = if ids { format!(r#"{{"id": "t-{w}-{i}-{}"}}"#, rand_n()) } else { format!(r#"{{"x": "t-{w}-{i}"}}"#) };
                    let s = Instant::now();
                    b.queue_push(&q, body.as_bytes(), Priority::Normal).await.unwrap();
                    let s2 = Instant::now();
                    let d = b.queue_reserve(&q, Duration::ZERO, Duration::from_secs(60)).await.unwrap().unwrap();
                    let s3 = Instant::now();
                    assert!(b.queue_ack(&q, &d.receipt).await.unwrap());
                    let s4 = Instant::now();
                    t[0].fetch_add((s2 - s).as_micros() as u64, Ordering::Relaxed);
                    t[1].fetch_add((s3 - s2).as_micros() as u64, Ordering::Relaxed);
                    t[2].fetch_add((s4 - s3).as_micros() as u64, Ordering::Relaxed);
                    t[3].fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            }));
        }
        for h in hs { h.await.unwrap(); }
        let n = t[3].load(Ordering::Relaxed).max(1);
        println!("ids={ids} n={n} push={}us reserve={}us ack={}us", t[0].load(Ordering::Relaxed)/n, t[1].load(Ordering::Relaxed)/n, t[2].load(Ordering::Relaxed)/n);
    }
}
fn rand_n() -> u64 { static N: AtomicU64 = AtomicU64::new(0); N.fetch_add(1, Ordering::Relaxed) }
