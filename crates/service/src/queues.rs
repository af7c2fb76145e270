//! Queues: submit, the worker calls, dead letters, stats, pause, rate limits, schedules, workers.

use std::sync::Arc;

use switchyard_core::fleet::FleetBackend;

/// The queue rules over a fleet backend (cheap to clone).
#[derive(Debug, Clone)]
pub struct Queues {
    fleet: Arc<dyn FleetBackend>,
}

impl Queues {
    /// The rules over `fleet`.
    pub fn new(fleet: Arc<dyn FleetBackend>) -> Self {
        Queues { fleet }
    }

    /// The fleet backend the rules use.
    pub fn fleet(&self) -> &Arc<dyn FleetBackend> {
        &self.fleet
    }
}
