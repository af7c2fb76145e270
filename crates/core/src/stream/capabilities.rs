//! Where stream bridges may differ on purpose, as each bridge says of itself.

/// How a bridge resolves the points where the contract lets bridges differ on purpose (the seed's
/// two backends already did). A bridge says which side it takes with
/// [`StreamBridge::capabilities`](super::StreamBridge::capabilities); the conformance suite reads
/// it there and checks the bridge keeps what it says.
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
    /// Whether a gap's `latest` may name the end mark (true where the end mark is an entry of the
    /// retained log rather than a flag beside it).
    pub end_is_an_entry: bool,
}

/// Live fell-behind rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveGap {
    /// Gap only when the next needed event is gone.
    Exact,
    /// Gap when the last delivered id is below the oldest retained one, a gap one event early.
    ConservativeByOne,
}

/// Malformed cursor on a live run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedCursor {
    /// Replay the retained window.
    ReplayRetained,
    /// Only events published after the subscription started (a live tail).
    TailNew,
}

/// `123` as a cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorWithoutSeq {
    /// Malformed: replay the retained window.
    Malformed,
    /// The id `123-0`.
    SeqZero,
}

/// Events after the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEnd {
    /// Delivered before the end (the end is a flag beside the log).
    Delivered,
    /// Never delivered (the end is an entry that precedes them).
    NeverDelivered,
}

/// Removal under a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The subscriber drains what it holds, then ends.
    DrainsThenEnds,
    /// The subscriber ends at its next poll.
    EndsAtOnce,
}

impl Capabilities {
    /// A bridge inside one process, whose end mark is a flag beside each run's retained log.
    pub const IN_PROCESS: Capabilities = Capabilities {
        cross_process: false,
        live_gap: LiveGap::Exact,
        malformed_cursor: MalformedCursor::ReplayRetained,
        cursor_without_seq: CursorWithoutSeq::Malformed,
        after_end: AfterEnd::Delivered,
        removal: Removal::DrainsThenEnds,
        end_is_an_entry: false,
    };

    /// A bridge shared by processes, whose retained log holds `{ms}-{seq}` ids and the end mark
    /// as an entry of the log, read by polling a snapshot.
    pub const SHARED_LOG: Capabilities = Capabilities {
        cross_process: true,
        live_gap: LiveGap::ConservativeByOne,
        malformed_cursor: MalformedCursor::TailNew,
        cursor_without_seq: CursorWithoutSeq::SeqZero,
        after_end: AfterEnd::NeverDelivered,
        removal: Removal::EndsAtOnce,
        end_is_an_entry: true,
    };
}
