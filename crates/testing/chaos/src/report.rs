//! What a scenario drove and what its checks found.

use std::fmt;
use std::time::Duration;

/// One check of one adapter after one scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Stable name, `<adapter>.<what>` (e.g. `fleet.no_task_completed_twice`).
    pub name: String,
    /// False = a violation.
    pub passed: bool,
    /// What was counted, or what broke (the first few offenders).
    pub detail: String,
}

/// Counters and checks of one adapter in one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdapterReport {
    /// `event-store`, `stream-bridge`, `fleet-queue`, `checkpoint-cache`.
    pub adapter: &'static str,
    /// Calls that returned success.
    pub ok: u64,
    /// Calls that returned an error (unknown outcome) — or, for the cache, degraded to misses.
    pub errored: u64,
    /// Facts worth printing that are not checks (e.g. writes lost at a failover).
    pub notes: Vec<String>,
    /// Every check, passed or not.
    pub checks: Vec<Check>,
}

impl AdapterReport {
    pub(crate) fn new(adapter: &'static str) -> Self {
        AdapterReport {
            adapter,
            ..Default::default()
        }
    }

    /// Records a check; `offenders` empty = passed. Keeps the first five offenders in the detail.
    pub(crate) fn check(&mut self, what: &str, summary: String, offenders: Vec<String>) {
        let passed = offenders.is_empty();
        let detail = if passed {
            summary
        } else {
            let shown: Vec<&String> = offenders.iter().take(5).collect();
            format!(
                "{summary}; {} violation(s), e.g. {}",
                offenders.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        self.checks.push(Check {
            name: format!("{}.{what}", self.adapter),
            passed,
            detail,
        });
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// One scenario's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioReport {
    /// The scenario.
    pub scenario: crate::Scenario,
    /// The faults injected, e.g. "412 CLIENT KILL rounds, 1,024 connections killed".
    pub faults: String,
    /// How many faults (kill rounds, server kills, failovers).
    pub fault_count: u64,
    /// Wall time of the scenario.
    pub elapsed: Duration,
    /// One per adapter.
    pub adapters: Vec<AdapterReport>,
    /// A failure of the scenario itself (a server that did not start): counts as a violation.
    pub setup_error: Option<String>,
}

impl ScenarioReport {
    /// Every failed check, as `scenario: check: detail`.
    pub fn violations(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .setup_error
            .iter()
            .map(|e| format!("{}: setup: {e}", self.scenario))
            .collect();
        for a in &self.adapters {
            for c in a.checks.iter().filter(|c| !c.passed) {
                out.push(format!("{}: {}: {}", self.scenario, c.name, c.detail));
            }
        }
        out
    }

    /// The failed checks' names.
    pub fn failed_checks(&self) -> Vec<&str> {
        self.adapters
            .iter()
            .flat_map(|a| a.checks.iter())
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect()
    }
}

impl fmt::Display for ScenarioReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "== scenario {} ({:.1} s): {}",
            self.scenario,
            self.elapsed.as_secs_f64(),
            self.faults
        )?;
        if let Some(e) = &self.setup_error {
            writeln!(f, "   SETUP FAILED: {e}")?;
        }
        for a in &self.adapters {
            let passed = a.checks.iter().filter(|c| c.passed).count();
            writeln!(
                f,
                "   {:<16} ops ok {:>7}  errored {:>6}  checks passed {}/{}",
                a.adapter,
                a.ok,
                a.errored,
                passed,
                a.checks.len()
            )?;
            for n in &a.notes {
                writeln!(f, "      note: {n}")?;
            }
            for c in &a.checks {
                let mark = if c.passed { "ok  " } else { "FAIL" };
                writeln!(f, "      {mark} {:<40} {}", c.name, c.detail)?;
            }
        }
        Ok(())
    }
}
