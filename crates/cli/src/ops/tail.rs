//! `switchyard runs tail`: a run's live stream, over a gateway's SSE route (any gateway, the
//! embedded default included) or straight from a shared stream bridge.
//!
//! Over SSE the tail is a resumable client: when the connection drops or the gateway shuts down
//! (a stream that ends without its `end` frame), it reconnects with the last event id it printed
//! as `Last-Event-ID`, so no event is lost or printed twice.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_kit::core::RunContext;
use switchyard_kit::core::stream::StreamItem;

use super::{Failure, GAP, NOT_FOUND};
use crate::backends;
use switchyard_client::{Client, RunRef};

/// Consecutive failed connection attempts before the tail gives up.
const MAX_RETRIES: u32 = 10;
/// The first wait before a reconnect; doubled per failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

fn print_event(json_out: bool, id: &str, event: &str, data: Value) {
    if json_out {
        println!("{}", json!({"id": id, "event": event, "data": data}));
    } else {
        println!("{id}  {event:<20} {data}");
    }
    let _ = std::io::stdout().flush();
}

/// Follows the run's stream through `gw` until its end (0) or a gap (3).
pub async fn over_gateway(
    gw: &Client,
    ctx: &RunContext,
    mut last_event_id: Option<String>,
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let run = RunRef::from(ctx);
    let mut failures = 0u32;
    let mut connected = false;
    loop {
        let mut frames = match gw.run_stream(&run, last_event_id.as_deref()).await {
            Ok(frames) => frames,
            Err(e) if e.is_not_found() && connected => {
                let message = Failure::from(e);
                return Err(Failure::exit(
                    NOT_FOUND,
                    format!(
                        "the stream of run {:?} is gone ({message}): the run finished and its \
                         stream was released; read it with `switchyard runs show`",
                        ctx.run_id()
                    ),
                ));
            }
            // No connection, a 5xx (shutting down, too many streams) or 429: trying again later
            // may help; never a refused or invalid request.
            Err(e) if e.is_retryable() && failures < MAX_RETRIES => {
                failures += 1;
                let wait = backoff(failures);
                eprintln!(
                    "{}; reconnecting in {} ms",
                    Failure::from(e),
                    wait.as_millis()
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        failures = 0;
        connected = true;
        // A broken connection ends the frames (after one error item): reconnect below.
        while let Some(Ok(frame)) = frames.next().await {
            match frame.event.as_str() {
                "end" => {
                    eprintln!("end of run {}", ctx.run_id());
                    return Ok(ExitCode::SUCCESS);
                }
                "gap" => {
                    eprintln!(
                        "gap: the events after {} are no longer retained ({}); read the run \
                         with `switchyard runs show`",
                        last_event_id.as_deref().unwrap_or("the start"),
                        frame.data
                    );
                    return Ok(ExitCode::from(GAP));
                }
                event => {
                    let data = serde_json::from_str(&frame.data)
                        .unwrap_or_else(|_| Value::String(frame.data.clone()));
                    let id = frame.id.clone().unwrap_or_default();
                    print_event(json_out, &id, event, data);
                    if frame.id.is_some() {
                        last_event_id = frame.id;
                    }
                }
            }
        }
        // No `end` frame: the connection dropped or the gateway is shutting down.
        eprintln!(
            "the stream broke off; reconnecting after {}",
            last_event_id.as_deref().unwrap_or("the start")
        );
        tokio::time::sleep(FIRST_BACKOFF).await;
    }
}

fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(
            1u32.checked_shl(failures.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .min(MAX_BACKOFF)
}

/// Follows the run's stream on the shared bridge at `url` (Redis) until its end or a gap.
pub async fn direct(
    config: &switchyard_kit::Config,
    url: &str,
    ctx: &RunContext,
    last_event_id: Option<String>,
    json_out: bool,
) -> Result<ExitCode, Failure> {
    let bridge = backends::stream_bridge(
        config,
        Some(url),
        switchyard_core::stream::DEFAULT_QUEUE_MAXSIZE,
    )
    .await?;
    let stream_id = switchyard_core::stream::run_stream_id(ctx);
    let mut items = bridge.subscribe(
        &stream_id,
        last_event_id.as_deref(),
        Duration::from_secs(15),
    );
    let mut code = ExitCode::SUCCESS;
    while let Some(item) = items.next().await {
        match item? {
            StreamItem::Event(e) => print_event(json_out, &e.id, &e.event, e.data),
            StreamItem::Heartbeat => {}
            StreamItem::End => {
                eprintln!("end of run {}", ctx.run_id());
                break;
            }
            StreamItem::Gap(gap) => {
                eprintln!(
                    "gap: {:?} is no longer retained (earliest {}, latest {}); read the run with \
                     `switchyard runs show`",
                    gap.requested, gap.earliest, gap.latest
                );
                code = ExitCode::from(GAP);
                break;
            }
        }
    }
    let _ = bridge.close().await;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }
}
