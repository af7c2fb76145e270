//! A typed job queue: a producer, a consumer with retries and a dead letter, inspecting the dead
//! letter (with why it died) and requeueing it.
//!
//! ```sh
//! cargo run -p switchyard-kit --example queue_worker                  # in memory
//! cargo run -p switchyard-kit --example queue_worker --features redis -- --url redis://127.0.0.1:6379
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchyard_kit::core::fleet::Priority;
use switchyard_kit::fleet::typed::{Consumer, ConsumerConfig, DeadLetter, PushOptions, Queue};

#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

#[tokio::main]
async fn main() -> Result<(), switchyard_kit::core::Error> {
    let url = url_arg("memory://");
    let backend = switchyard_kit::open_fleet_backend(&url).await?;
    let queue: Queue<Resize> = Queue::new(backend, "resize-example");

    for (image, width) in [("a.png", 640), ("b.png", 0), ("c.png", 320)] {
        let opts = PushOptions {
            max_attempts: Some(2),
            ..PushOptions::default()
        };
        let id = queue
            .push_with(
                &Resize {
                    image: image.into(),
                    width,
                },
                opts,
            )
            .await?;
        println!("pushed {image} as task {id}");
    }

    // Fast retries for the example; the defaults back off 1 s, 2 s, 4 s, … up to 60 s.
    let config = ConsumerConfig {
        concurrency: 2,
        poll: Duration::from_millis(100),
        backoff_unit: Duration::from_millis(50),
        ..ConsumerConfig::default()
    };
    let handle = Consumer::spawn(queue.clone(), config, |task| async move {
        if task.payload.width == 0 {
            // Kept as `last_error` in the envelope and logged (tracing, warn).
            return Err(format!("{}: width must be positive", task.payload.image).into());
        }
        println!(
            "resized {} to {} px (attempt {})",
            task.payload.image, task.payload.width, task.attempt
        );
        Ok(())
    });
    handle.wait_idle().await?;
    let stats = handle.shutdown().await;
    println!(
        "acked {}, retried {}, dead-lettered {}",
        stats.acked, stats.retried, stats.dead_lettered
    );

    for dead in queue.dlq_peek(10).await? {
        match dead {
            DeadLetter::Task(t) => println!(
                "dead: {} after attempt {}: {}",
                t.id,
                t.attempt,
                t.last_error.map(|e| e.message).unwrap_or_default()
            ),
            DeadLetter::Malformed { error, .. } => println!("dead, malformed: {error}"),
        }
    }
    let moved = queue.dlq_requeue(10, Priority::High).await?;
    println!(
        "requeued {moved} into the high tier; waiting: {}",
        queue.len().await?
    );
    // Leave the example's queue empty for the next run.
    while let Some(r) = queue
        .reserve(Duration::ZERO, Duration::from_secs(5))
        .await?
    {
        queue.ack(r.delivery()).await?;
    }
    Ok(())
}

/// `--url URL`, or `default`.
fn url_arg(default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--url")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}
