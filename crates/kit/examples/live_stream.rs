//! A live run stream: publish stored events, follow them, and resume after a disconnect from the
//! last id seen (the SSE `Last-Event-ID`). Reading a subscription needs `futures::StreamExt`.
//!
//! ```sh
//! cargo run -p switchyard-kit --example live_stream                   # in memory
//! cargo run -p switchyard-kit --example live_stream --features redis -- --url redis://127.0.0.1:6379
//! ```

use std::time::Duration;

use futures::StreamExt;
use switchyard_kit::core::event::{InvocableKind, RunStarted, Usage};
use switchyard_kit::core::stream::run_stream_id;
use switchyard_kit::core::{Payload, RunContext, StreamItem};

#[tokio::main]
async fn main() -> Result<(), switchyard_kit::core::Error> {
    let url = url_arg("memory://");
    // The store keeps the record; the bridge carries it live (both in memory by default).
    let store = switchyard_kit::open_event_store("memory://").await?;
    let bridge = switchyard_kit::open_stream_bridge(&url).await?;

    let ctx = RunContext::new(switchyard_kit::core::pycompat::uuid4_hex());
    let run = store.run(&ctx);
    let (_, started) = run
        .start(
            RunStarted::new("helper", InvocableKind::Agent, vec![]),
            Duration::from_secs(300),
        )
        .await?;
    let mut stored = started.into_iter().collect::<Vec<_>>();
    stored.extend(
        run.append(vec![
            Payload::text_delta("m1", "Hel"),
            Payload::text_delta("m1", "lo"),
        ])
        .await?,
    );
    // Event name = kind, data = the event's JSON; the stream id is the run's address.
    for event in &stored {
        bridge.publish_event(event).await?;
    }

    // A subscriber reads two events, then "disconnects".
    let stream_id = run_stream_id(&ctx);
    let mut first = bridge.subscribe(&stream_id, None, Duration::from_secs(15));
    let mut last_id = None;
    for _ in 0..2 {
        if let Some(StreamItem::Event(e)) = first.next().await.transpose()? {
            println!("first connection: {} (id {})", e.event, e.id);
            last_id = Some(e.id);
        }
    }
    drop(first);

    // The run finishes; a terminal event also ends the stream.
    for event in run
        .append(vec![Payload::completed(vec![], Usage::tokens(1, 2))])
        .await?
    {
        bridge.publish_event(&event).await?;
    }

    // Reconnecting with the last id seen gets exactly what came after it, then the end.
    let mut resumed = bridge.subscribe(&stream_id, last_id.as_deref(), Duration::from_secs(15));
    while let Some(item) = resumed.next().await.transpose()? {
        match item {
            StreamItem::Event(e) => println!("resumed: {} (id {})", e.event, e.id),
            StreamItem::End => println!("resumed: end"),
            StreamItem::Gap(gap) => println!("gap: reload the run from the store ({gap:?})"),
            StreamItem::Heartbeat => {}
        }
    }
    bridge.cleanup(&stream_id, Duration::ZERO).await?;
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
