//! The event store: claim a session, append, interrupt, resume, end the run with an append that
//! only lands while it is open, read back, list.
//!
//! ```sh
//! cargo run -p switchyard-kit --example runs                          # in memory
//! cargo run -p switchyard-kit --example runs -- --url sqlite://runs.db
//! cargo run -p switchyard-kit --example runs --features redis -- --url redis://127.0.0.1:6379
//! ```

use std::time::Duration;

use switchyard_kit::core::event::{InterruptReason, InvocableKind, RunResumed, RunStarted, Usage};
use switchyard_kit::core::{Appended, Payload, RunContext, RunStatus};

#[tokio::main]
async fn main() -> Result<(), switchyard_kit::core::Error> {
    let url = url_arg("memory://");
    let store = switchyard_kit::open_event_store(&url).await?;

    // A run of session "s1" in namespace "demo": the log key is the session.
    let run_id = switchyard_kit::core::pycompat::uuid4_hex();
    let ctx = RunContext::new(run_id.as_str())
        .with_session("s1")
        .with_namespace("demo")?;
    let run = store.run(&ctx).origin("helper");

    // Claim the session: a second open run on "s1" would be refused with `held_by`.
    let (claim, _started) = run
        .start(
            RunStarted::new("helper", InvocableKind::Agent, vec![]),
            Duration::from_secs(300),
        )
        .await?;
    if !claim.won() {
        println!("session s1 is held by run {:?}", claim.held_by);
        return Ok(());
    }

    run.append(vec![
        Payload::text_delta("m1", "Looking it up"),
        Payload::tool_call_completed_from("c1", "search", "42 results"),
        Payload::interrupted("i1", InterruptReason::Approval),
    ])
    .await?;
    assert_eq!(run.status().await?, RunStatus::WaitingHuman);

    // Exactly one resume wins; a second gets `None`.
    let resumed = run.resume(RunResumed::new("approved")).await?;
    println!("resumed: {}", resumed.is_some());
    // An append that must not land after the run's end checks and writes in one step: a
    // finished (or never started) run refuses it with its status, and nothing is written.
    let done = run
        .append_if_open(vec![Payload::completed(vec![], Usage::tokens(12, 34))])
        .await?;
    assert!(done.is_stored());
    let late = run
        .append_if_open(vec![Payload::text_delta("m1", "too late")])
        .await?;
    assert_eq!(late, Appended::NotOpen(RunStatus::Completed));
    println!("late append: {late:?}");

    for event in run.read(0).await? {
        println!("{:>2} {}", event.seq, event.kind());
    }
    for summary in store.list_runs_in(Some("demo"), None).await? {
        println!(
            "{} in {}: {:?}",
            summary.run_id, summary.log_key, summary.status
        );
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
