//! The adapters' cases.

pub(crate) mod batches;
pub(crate) mod bridge;
pub(crate) mod cache;
pub(crate) mod consumer;
pub(crate) mod gateway;
pub(crate) mod python;
pub(crate) mod queue;
pub(crate) mod queue_batch;
pub(crate) mod store;
pub(crate) mod tasks;

use crate::measure::Sample;
use crate::report::Case;

/// A row from a sample; `per_op` converts operations into `unit` (e.g. 100 keys per call).
pub(crate) fn case(
    suite: &str,
    adapter: &str,
    name: &str,
    unit: &str,
    s: &Sample,
    per_op: f64,
) -> Case {
    Case {
        suite: suite.into(),
        adapter: adapter.into(),
        name: name.into(),
        ops: s.ops,
        errors: s.errors,
        secs: s.elapsed.as_secs_f64(),
        rate: s.rate() * per_op,
        unit: unit.into(),
        p50_ms: s.pct_ms(50.0),
        p99_ms: s.pct_ms(99.0),
        floor: None,
        ratio: None,
        target: None,
        met: None,
        note: s
            .first_error
            .as_ref()
            .map(|e| format!("{} errors, first: {e}", s.errors))
            .unwrap_or_default(),
    }
}

impl Case {
    /// Compares the rate with a floor's.
    pub(crate) fn against(mut self, floor: &str, floor_rate: Option<f64>) -> Self {
        self.floor = Some(short(floor).into());
        self.ratio = floor_rate.filter(|f| *f > 0.0).map(|f| self.rate / f);
        self
    }

    /// Sets the target and whether it was met.
    pub(crate) fn target(mut self, what: impl Into<String>, met: bool) -> Self {
        self.target = Some(what.into());
        self.met = Some(met);
        self
    }

    /// Appends to the note.
    pub(crate) fn note(mut self, more: impl AsRef<str>) -> Self {
        if !self.note.is_empty() {
            self.note.push_str("; ");
        }
        self.note.push_str(more.as_ref());
        self
    }
}

/// A floor's name without the `floor: ` lead, for the "compared with" column.
fn short(floor: &str) -> &str {
    floor.strip_prefix("floor: ").unwrap_or(floor)
}

/// Whether a ratio meets a minimum (unknown never meets).
pub(crate) fn at_least(ratio: Option<f64>, min: f64) -> bool {
    ratio.is_some_and(|r| r >= min)
}
