//! Control of a task (ADR 0380): records by id, cancel, results, retention and the end-event
//! log. Not kept by this adapter yet: every method answers the port's "not implemented" default,
//! and the adapter does not run `fleet_task_suite!`.

use super::*;

impl TaskOps for MemoryFleetBackend {}
