//! The byte bounds of the memory stream bridge (ADR 0192).

use serde_json::Value;

/// The byte bounds of a [`MemoryStreamBridge`](super::MemoryStreamBridge). An event's size is its id, name and compact
/// JSON data in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Bytes of events one run retains; the newest event is kept even when it alone is larger.
    /// Default 8 MiB.
    pub max_run_bytes: usize,
    /// Bytes of events all runs together retain; past it the oldest runs (by first publish) are
    /// evicted whole. Default 256 MiB.
    pub max_total_bytes: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        Self {
            max_run_bytes: 8 << 20,
            max_total_bytes: 256 << 20,
        }
    }
}

/// What a [`MemoryStreamBridge`](super::MemoryStreamBridge) holds right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retained {
    /// Runs with published events (not cleaned up or evicted).
    pub runs: usize,
    /// Bytes of their retained events.
    pub bytes: usize,
}

/// The size an event counts for against the byte bounds.
pub(crate) fn event_bytes(id: &str, event: &str, data: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, data);
    count.0.saturating_add(id.len()).saturating_add(event.len())
}
