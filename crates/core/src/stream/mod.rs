//! The stream bridge port: per-run live event streams for SSE, with `Last-Event-ID` replay, gap
//! detection and heartbeats (deer-flow's `StreamBridge`).
//!
//! * [`StreamBridge`] is the port, [`StreamItem`] what a subscription yields.
//! * [`MemoryStreamBridge`] is the in-process adapter; `switchyard-stream-bridge-redis` the shared
//!   one.
//! * [`replay`] is the subscription engine the shared bridges run over their snapshot query and
//!   wake-up signal.
//! * [`sse`] turns items into the exact SSE frames deer-flow's gateway writes.

mod capabilities;
mod limits;
mod memory;
pub mod replay;
pub mod sse;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

use crate::{Error, Result};

pub use capabilities::{
    AfterEnd, Capabilities, CursorWithoutSeq, LiveGap, MalformedCursor, Removal,
};
pub use limits::{MemoryLimits, Retained};
pub use memory::MemoryStreamBridge;

/// The parity default for the heartbeat interval: deer-flow's `subscribe()` default of 15 s.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// The parity default for the retained events per run (`queue_maxsize`).
pub const DEFAULT_QUEUE_MAXSIZE: usize = 256;

/// One data event of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    /// The SSE `id:` and `Last-Event-ID` cursor, `<ms>-<seq>`.
    pub id: String,
    /// The SSE `event:` name. An event named `__end__` is an ordinary event, not an end.
    pub event: String,
    /// The JSON payload.
    pub data: Value,
}

/// "Your cursor cannot be replayed completely": the subscriber must reload durable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamGap {
    /// The reconnect cursor, or the last event delivered to a live subscriber that fell behind, or
    /// `None` for a cursor-less subscriber that fell behind before its first delivery.
    pub requested: Option<String>,
    /// The oldest id still retained.
    pub earliest: String,
    /// The newest id retained (on Redis it may be the end marker's id; reconnecting with it yields
    /// an immediate [`StreamItem::End`]).
    pub latest: String,
}

/// What a subscription yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// A data event.
    Event(StreamEvent),
    /// Nothing arrived within the heartbeat interval.
    Heartbeat,
    /// The run published its end; the subscription stops after this item.
    End,
    /// The subscription cannot be continued without loss; it stops after this item.
    Gap(StreamGap),
}

impl StreamItem {
    /// True for the items after which a subscription yields nothing more.
    pub fn is_terminal(&self) -> bool {
        matches!(self, StreamItem::End | StreamItem::Gap(_))
    }
}

/// A subscription: items in order, then the stream ends. An `Err` item is the last item.
pub type ItemStream = BoxStream<'static, Result<StreamItem>>;

/// A per-run live event log that SSE subscribers follow.
///
/// # Contract
///
/// Every adapter guarantees the following; `switchyard_conformance::stream_bridge_suite!` has one
/// named case per guarantee (case names in brackets). Where bridges may differ on purpose (the
/// seed's own two backends differ here) the guarantee names both sides, each bridge says which it
/// takes in [`StreamBridge::capabilities`] ([`Capabilities`]), and the suite holds it to that.
/// [`Capabilities::IN_PROCESS`] and [`Capabilities::SHARED_LOG`] are the two sides taken today.
///
/// 1. **Order and end** (`stream.order_and_end`) \[`publish_subscribe_in_order_then_end`,
///    `event_ids_are_ordered`\]. `publish` appends one event and returns its id, `<ms>-<seq>`
///    (digits), strictly increasing within a run. A subscriber receives the events in publish order
///    with their name and JSON data, then [`StreamItem::End`] once `publish_end` was called, then
///    the stream ends. An event named `__end__` is an ordinary event
///    \[`event_named_end_is_ordinary`\].
/// 2. **Heartbeats** (`stream.heartbeats`) \[`idle_subscriber_gets_heartbeat`\]. When nothing
///    arrives within the heartbeat interval the subscriber gets [`StreamItem::Heartbeat`];
///    heartbeats never end a subscription. A subscriber that starts before the first publish waits
///    for it and never sees a premature end \[`subscriber_waits_for_first_publish`\].
/// 3. **Bounded retention** (`stream.bounded_retention`) \[`retention_keeps_newest_events`,
///    `end_takes_no_retention_slot`, `end_only_run_yields_end`, `zero_retention_is_refused`\]. A
///    run keeps its newest `queue_maxsize` events; the end mark never evicts an event;
///    `queue_maxsize == 0` is refused when the bridge is built ([`Error::Config`]). An adapter may
///    bound retention further (byte bounds, as [`MemoryLimits`]); events it drops
///    for that are trimmed events like any other, so guarantees `stream.evicted_cursor` and
///    `stream.falling_behind` apply to their cursors.
/// 4. **No cursor** (`stream.no_cursor`) \[`no_cursor_replays_retained_window`\]. Without
///    `Last-Event-ID` the subscriber gets the whole retained window (no gap, even if older events
///    were trimmed), then live events.
/// 5. **Retained cursor** (`stream.retained_cursor`) \[`resumes_after_last_event_id`\]. With the id
///    of a retained event the subscriber gets exactly the events after it.
/// 6. **Evicted cursor** (`stream.evicted_cursor`) \[`evicted_cursor_yields_gap_before_any_data`,
///    `numeric_cursor_below_watermark_yields_gap`\]. A well-formed cursor below the oldest retained
///    event (including the one just before it, conservatively) yields exactly one
///    [`StreamItem::Gap`] `{requested: cursor, earliest, latest}` and nothing else: no data before
///    it, the stream ends after it.
/// 7. **Falling behind** (`stream.falling_behind`) \[`slow_subscriber_gets_gap`,
///    `live_gap_boundary`\]. A live subscriber whose next needed event was trimmed gets one gap
///    with `requested` = the last id it was given, then the stream ends. The boundary is exact
///    (no gap when the next needed event is the oldest retained one) or conservative by one
///    (capability `live_gap`).
/// 8. **First delivery outrun** (`stream.first_delivery_outrun`)
///    \[`first_delivery_outrun_yields_gap_without_cursor`\]. A cursor-less subscriber parked on an
///    empty run whose first events are trimmed before it is given them gets a gap with `requested:
///    None`, never a silent partial replay.
/// 9. **Gap beats end, data beats end** (`stream.gap_beats_end`) \[`gap_beats_end`,
///    `events_after_end`\]. A subscriber behind the watermark of an ended run gets a gap, not an
///    end; retained events come before the end. Events published after the end reach
///    subscribers that have not reached the end where the end is a flag, and never where the end is
///    an entry of the log that precedes them (capability `after_end`).
/// 10. **Malformed cursors** (`stream.malformed_cursor`) \[`malformed_cursor_never_gaps`,
///     `malformed_cursor_on_live_run`\]. A cursor that is not an id (`-1`, `garbage`, empty,
///     `1-2-3`) never yields a gap: on a finished run every bridge replays the retained window and
///     ends; on a live run it replays the window or tails only new events (capability
///     `malformed_cursor`). `123` is malformed or the id `123-0` (capability
///     `cursor_without_seq`).
/// 11. **Existence and cleanup** (`stream.existence_and_cleanup`)
///     \[`stream_exists_follows_publish_and_cleanup`, `cleanup_waits_for_delay`,
///     `subscribing_creates_no_stream`\]. `stream_exists` is true after a publish or `publish_end`
///     and false after `cleanup`; subscribing alone creates nothing and leaves nothing behind.
///     `cleanup(delay)` waits `delay`, then removes the run; later publishes start a fresh run.
/// 12. **Removal under a subscriber** (`stream.removal_under_subscriber`)
///     \[`cleanup_under_subscriber_terminates_it`\]. A subscriber whose run is removed mid-stream
///     terminates with [`StreamItem::End`], after draining what it holds or at its first poll that
///     finds the run gone (capability `removal`).
/// 13. **Independent runs** (`stream.independent_runs`) \[`runs_are_independent`\].
/// 14. **Bad input** (`stream.bad_input`) \[`bad_input_is_rejected`\]. An empty run id, an event
///     name containing CR or LF and a zero heartbeat interval are [`Error::InvalidInput`]; no input
///     panics.
/// 15. **Close** (`stream.close`) \[`closed_bridge_refuses_work`\]. After `close` every operation
///     returns [`Error::Closed`]; a subscription yields `Err(Closed)` at its next poll and ends.
/// 16. **Errors are items** (`stream.errors_are_items`). `subscribe` itself never fails and does
///     nothing until the first poll (the position is fixed then); a failure is yielded as one `Err`
///     item, after which the stream ends.
#[async_trait]
pub trait StreamBridge: Send + Sync + fmt::Debug {
    /// The side this bridge takes at each point where bridges may differ on purpose; the
    /// conformance suite checks it keeps them.
    fn capabilities(&self) -> Capabilities;

    /// Whether a subscriber in another process sees this bridge's events.
    fn supports_cross_process(&self) -> bool {
        self.capabilities().cross_process
    }

    /// Appends one event to `run_id`'s log, creating it on first use; returns the event's id.
    async fn publish(&self, run_id: &str, event: &str, data: &Value) -> Result<String>;

    /// Marks `run_id` finished: subscribers that reach the end of retained data get
    /// [`StreamItem::End`].
    async fn publish_end(&self, run_id: &str) -> Result<()>;

    /// Follows `run_id` from `last_event_id` (the SSE `Last-Event-ID` header; `Some("")` is a
    /// malformed cursor, not "absent"). Lazy: nothing happens until the first poll.
    fn subscribe(
        &self,
        run_id: &str,
        last_event_id: Option<&str>,
        heartbeat: Duration,
    ) -> ItemStream;

    /// Waits `delay` (if non-zero), then releases `run_id`'s storage. Removing an absent run is not
    /// an error.
    async fn cleanup(&self, run_id: &str, delay: Duration) -> Result<()>;

    /// Whether `run_id` has retained data (published and not cleaned up).
    async fn stream_exists(&self, run_id: &str) -> Result<bool>;

    /// Releases the bridge's resources; afterwards every operation returns [`Error::Closed`].
    async fn close(&self) -> Result<()>;
}

impl dyn StreamBridge {
    /// Publishes a stored event to its run's stream; see [`publish_event`].
    pub async fn publish_event(&self, event: &crate::Event) -> Result<String> {
        publish_event(self, event).await
    }
}

/// Publishes a stored event to its run's stream as the gateway does (ADR 0253): under
/// [`run_stream_id`] of the event's own address (namespace, session, run), with the event's
/// kind as the SSE event name and the event's JSON (the store's record) as data; after a
/// terminal lifecycle event (`run.completed`, `run.failed`, `run.cancelled`) it also calls
/// `publish_end` (even if the event's own publish failed), so subscribers get
/// [`StreamItem::End`]. Returns the event's stream id.
///
/// Publish after the store's append returned: the store is the source of truth, and a
/// subscriber that missed a publish reads the run from the store. Releasing a finished run's
/// stream (`cleanup` after a grace period) stays the caller's choice.
pub async fn publish_event<B: StreamBridge + ?Sized>(
    bridge: &B,
    event: &crate::Event,
) -> Result<String> {
    let ctx = crate::RunContext::new(event.run_id.clone());
    let ctx = match &event.session_id {
        Some(s) => ctx.with_session(s.clone()),
        None => ctx,
    };
    let ctx = match &event.namespace {
        Some(ns) => ctx.with_namespace(ns.clone())?,
        None => ctx,
    };
    let stream_id = run_stream_id(&ctx);
    let data = serde_json::to_value(event).map_err(|e| Error::invalid("event", e))?;
    let published = bridge.publish(&stream_id, event.kind(), &data).await;
    if crate::status::lifecycle_status(event.kind()).is_some_and(crate::RunStatus::is_terminal) {
        // The end is published even when the event was not, so subscribers still stop; the
        // first failure is the one returned.
        let ended = bridge.publish_end(&stream_id).await;
        let id = published?;
        ended?;
        return Ok(id);
    }
    published
}

/// The stream id under which a run's events are published: the one place that maps a run's
/// address (namespace, session, run) to the bridge's run id (ADR 0190).
///
/// A run with neither namespace nor session streams under `quote(run_id)`, which is the run id
/// itself for every id made of `A–Z a–z 0–9 _ . - ~` (deer-flow's UUIDs), so a Python deer-flow
/// peer finds it at `<prefix>:<run_id>` as before. Any other run streams under
/// `n:<quote(ns)>:s:<quote(session)>:r:<quote(run)>` (the `s:` part only when it has a session).
/// `quote` never emits `:`, so a composite id can never equal a bare one and two addresses never
/// share a stream.
pub fn run_stream_id(ctx: &crate::RunContext) -> String {
    use crate::keys::quote;
    if ctx.namespace().is_none() && ctx.session_id().is_none() {
        return quote(ctx.run_id());
    }
    let mut id = format!("n:{}", quote(ctx.namespace_key()));
    if let Some(session) = ctx.session_id() {
        id.push_str(":s:");
        id.push_str(&quote(session));
    }
    id.push_str(":r:");
    id.push_str(&quote(ctx.run_id()));
    id
}

/// Checks a run id: any non-empty string.
pub fn validate_run_id(run_id: &str) -> Result<()> {
    if run_id.is_empty() {
        return Err(Error::invalid("run_id", "must not be empty"));
    }
    Ok(())
}

/// Checks an event name: CR or LF would split the SSE `event:` line.
pub fn validate_event_name(event: &str) -> Result<()> {
    if event.contains(['\r', '\n']) {
        return Err(Error::invalid(
            "event",
            "must not contain CR or LF (it is written on one SSE `event:` line)",
        ));
    }
    Ok(())
}

/// Checks a heartbeat interval: zero would spin.
pub fn validate_heartbeat(heartbeat: Duration) -> Result<()> {
    if heartbeat.is_zero() {
        return Err(Error::invalid("heartbeat", "must be greater than zero"));
    }
    Ok(())
}

/// Parses a Redis stream id as deer-flow's Redis bridge does: `\d+(-\d+)?` (full match, missing
/// seq = 0). `Ok(None)` when the text is not of that shape (a malformed cursor); `Err(())` when it
/// is of that shape but a component exceeds `u64` (Redis itself would reject it).
#[allow(clippy::result_unit_err)]
pub fn parse_stream_id(id: &str) -> std::result::Result<Option<(u64, u64)>, ()> {
    let (ms, seq) = match id.split_once('-') {
        Some((ms, seq)) => (ms, Some(seq)),
        None => (id, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ms) || !seq.is_none_or(digits) {
        return Ok(None);
    }
    let ms: u64 = ms.parse().map_err(|_| ())?;
    let seq: u64 = match seq {
        Some(s) => s.parse().map_err(|_| ())?,
        None => 0,
    };
    Ok(Some((ms, seq)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_shapes() {
        assert_eq!(
            parse_stream_id("1718000000000-3"),
            Ok(Some((1718000000000, 3)))
        );
        assert_eq!(parse_stream_id("123"), Ok(Some((123, 0))));
        assert_eq!(parse_stream_id("0-0"), Ok(Some((0, 0))));
        for bad in ["-1", "garbage", "", "1-2-3", "1-", "-", "1-x", "١-٢"] {
            assert_eq!(parse_stream_id(bad), Ok(None), "{bad:?}");
        }
        assert_eq!(parse_stream_id("99999999999999999999999-0"), Err(()));
        assert_eq!(parse_stream_id("1-99999999999999999999999"), Err(()));
    }

    #[test]
    fn stream_ids_never_collide() {
        use crate::RunContext;
        let bare = RunContext::new("2f1c0b7e-1d2a-4e3f-9a8b-7c6d5e4f3a2b");
        assert_eq!(run_stream_id(&bare), "2f1c0b7e-1d2a-4e3f-9a8b-7c6d5e4f3a2b");
        let ns = |n: &str| RunContext::new("r").with_namespace(n).expect("namespace");
        assert_eq!(run_stream_id(&ns("a")), "n:a:r:r");
        assert_eq!(
            run_stream_id(&ns("a").with_session("s:1")),
            "n:a:s:s%3A1:r:r"
        );
        assert_eq!(
            run_stream_id(&RunContext::new("r").with_session("s")),
            "n::s:s:r:r"
        );
        // A bare id spelling a composite is quoted, so it cannot reach the composite's stream.
        let forged = RunContext::new("n:a:r:r");
        assert_eq!(run_stream_id(&forged), "n%3Aa%3Ar%3Ar");
        let ids: std::collections::BTreeSet<String> = [
            bare,
            forged,
            ns("a"),
            ns("b"),
            ns("a").with_session("s"),
            RunContext::new("r").with_session("s"),
            RunContext::new("r"),
        ]
        .iter()
        .map(run_stream_id)
        .collect();
        assert_eq!(ids.len(), 7);
    }

    #[test]
    fn validation() {
        assert!(validate_run_id("").is_err());
        assert!(validate_run_id("a:b{c}%é").is_ok());
        assert!(validate_event_name("values").is_ok());
        assert!(validate_event_name("a\nb").is_err());
        assert!(validate_event_name("a\rb").is_err());
        assert!(validate_heartbeat(Duration::ZERO).is_err());
    }
}
