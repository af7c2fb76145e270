//! Where the memory and Redis bridges differ on purpose, as the suite asks each adapter to say.

/// How a backend resolves the points where the two seed backends differ on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether subscribers in other processes see the events.
    pub cross_process: bool,
    /// When a live subscriber whose next needed event is exactly the oldest retained one gets a gap.
    pub live_gap: LiveGap,
    /// What a malformed `Last-Event-ID` does on a run that has not ended.
    pub malformed_cursor: MalformedCursor,
    /// Whether `123` (no `-seq`) is a cursor.
    pub cursor_without_seq: CursorWithoutSeq,
    /// Whether events published after the end reach a subscriber that has not seen the end yet.
    pub after_end: AfterEnd,
    /// What a subscriber whose run is removed mid-stream gets.
    pub removal: Removal,
    /// Whether a gap's `latest` may name the end mark (true on Redis, where END is an entry).
    pub end_is_an_entry: bool,
}

/// Live fell-behind rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveGap {
    /// Gap only when the next needed event is gone (memory).
    Exact,
    /// Gap when the last delivered id is below the oldest retained (Redis).
    ConservativeByOne,
}

/// Malformed cursor on a live run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedCursor {
    /// Replay the retained window (memory).
    ReplayRetained,
    /// Only events published after the subscription started (Redis live tail).
    TailNew,
}

/// `123` as a cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorWithoutSeq {
    /// Malformed: replay (memory).
    Malformed,
    /// The id `123-0` (Redis).
    SeqZero,
}

/// Events after the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEnd {
    /// Delivered before the end (memory: END is a flag).
    Delivered,
    /// Never delivered (Redis: the END entry precedes them).
    NeverDelivered,
}

/// Removal under a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The subscriber drains what it holds, then ends (memory).
    DrainsThenEnds,
    /// The subscriber ends at its next poll (Redis).
    EndsAtOnce,
}

impl Capabilities {
    /// The memory bridge.
    pub const MEMORY: Capabilities = Capabilities {
        cross_process: false,
        live_gap: LiveGap::Exact,
        malformed_cursor: MalformedCursor::ReplayRetained,
        cursor_without_seq: CursorWithoutSeq::Malformed,
        after_end: AfterEnd::Delivered,
        removal: Removal::DrainsThenEnds,
        end_is_an_entry: false,
    };

    /// The Redis Streams bridge.
    pub const REDIS_STREAMS: Capabilities = Capabilities {
        cross_process: true,
        live_gap: LiveGap::ConservativeByOne,
        malformed_cursor: MalformedCursor::TailNew,
        cursor_without_seq: CursorWithoutSeq::SeqZero,
        after_end: AfterEnd::NeverDelivered,
        removal: Removal::EndsAtOnce,
        end_is_an_entry: true,
    };

    /// The PostgreSQL bridge: retained entries in a table with Redis-style ids and the end mark
    /// as an entry, so it takes the Redis bridge's side of every difference.
    pub const POSTGRES: Capabilities = Capabilities::REDIS_STREAMS;
}
