//! The report: one row per case, the machine it ran on, Markdown and JSON renderings.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// One measured case (floors included: their suite is `floor`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// `floor`, `store`, `bridge`, `queue` or `cache`.
    pub suite: String,
    /// `redis`, `sqlite` or `fred`/`sqlx` for floors.
    pub adapter: String,
    /// What was measured, e.g. `append, 1 writer, 1 event per call`.
    pub name: String,
    /// Operations completed.
    pub ops: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Wall time of the measurement in seconds.
    pub secs: f64,
    /// Throughput in `unit`.
    pub rate: f64,
    /// What `rate` counts, e.g. `events/s`.
    pub unit: String,
    /// Median latency of one operation, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: Option<f64>,
    /// The floor (or other case) this one is compared with.
    pub floor: Option<String>,
    /// The comparison: `rate / floor rate` unless `note` says otherwise.
    pub ratio: Option<f64>,
    /// The target from issue 9, in words.
    pub target: Option<String>,
    /// Whether the target was met in this run.
    pub met: Option<bool>,
    /// Anything else worth knowing (winners per round, memory, first error).
    pub note: String,
}

/// The machine a report ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Machine {
    /// Logical CPUs.
    pub nproc: usize,
    /// `model name` of /proc/cpuinfo.
    pub cpu: String,
    /// `redis_version` of the server measured.
    pub redis_version: Option<String>,
    /// Whether the bench started its own redis-server.
    pub private_redis: bool,
    /// `sqlite_version()` of the SQLite linked into sqlx.
    pub sqlite_version: Option<String>,
    /// `server_version` of the PostgreSQL measured.
    #[serde(default)]
    pub postgres_version: Option<String>,
    /// Whether the bench started its own PostgreSQL.
    #[serde(default)]
    pub private_postgres: bool,
    /// RFC 3339, UTC.
    pub date: String,
    /// /proc/loadavg (1, 5, 15 min) when the run started.
    pub load_before: String,
    /// /proc/loadavg when the run ended.
    pub load_after: String,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// Whether this was a quick run.
    pub quick: bool,
    /// Wall time of the whole run, seconds.
    pub secs: f64,
    /// The cases, floors first.
    pub cases: Vec<Case>,
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v < 1.0 => format!("{v:.3}"),
        Some(v) => format!("{v:.2}"),
    }
}

impl Report {
    /// The cases whose target was missed.
    pub fn missed(&self) -> impl Iterator<Item = &Case> {
        self.cases.iter().filter(|c| c.met == Some(false))
    }

    /// The case named `name` of `adapter`, if measured.
    pub fn case(&self, adapter: &str, name: &str) -> Option<&Case> {
        self.cases
            .iter()
            .find(|c| c.adapter == adapter && c.name == name)
    }

    /// The machine as a Markdown list.
    pub fn machine_markdown(&self) -> String {
        let m = &self.machine;
        let mut out = String::new();
        let _ = writeln!(out, "- date: {}", m.date);
        let _ = writeln!(out, "- CPUs: {} × {}", m.nproc, m.cpu);
        let _ = writeln!(
            out,
            "- redis-server: {}{}",
            m.redis_version.as_deref().unwrap_or("not measured"),
            if m.private_redis {
                " (private instance started by the bench, no persistence)"
            } else {
                " (given by --url)"
            }
        );
        let _ = writeln!(
            out,
            "- SQLite (linked into sqlx): {}",
            m.sqlite_version.as_deref().unwrap_or("not measured")
        );
        let _ = writeln!(
            out,
            "- PostgreSQL: {}{}",
            m.postgres_version.as_deref().unwrap_or("not measured"),
            match (m.postgres_version.is_some(), m.private_postgres) {
                (false, _) => "",
                (true, true) => " (private instance started by the bench, fsync on)",
                (true, false) => " (given by --postgres)",
            }
        );
        let _ = writeln!(
            out,
            "- load average (1/5/15 min): {} before, {} after",
            m.load_before, m.load_after
        );
        let _ = writeln!(
            out,
            "- mode: {}, {:.0} s",
            if self.quick { "quick" } else { "full" },
            self.secs
        );
        out
    }

    /// The cases as one Markdown table.
    pub fn table_markdown(&self) -> String {
        let mut out = String::from(
            "| suite | adapter | case | throughput | p50 ms | p99 ms | compared with | ratio | target | met | notes |\n\
             |---|---|---|---:|---:|---:|---|---:|---|---|---|\n",
        );
        for c in &self.cases {
            let met = match c.met {
                None => "",
                Some(true) => "yes",
                Some(false) => "**no**",
            };
            let mut note = c.note.replace('|', "\\|");
            if c.errors > 0 && !note.contains("error") {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                let _ = write!(note, "{} errors", c.errors);
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} {} | {} | {} | {} | {} | {} | {} | {} |",
                c.suite,
                c.adapter,
                c.name,
                num(c.rate),
                c.unit,
                ms(c.p50_ms),
                ms(c.p99_ms),
                c.floor.as_deref().unwrap_or(""),
                c.ratio.map(|r| format!("{r:.2}")).unwrap_or_default(),
                c.target.as_deref().unwrap_or(""),
                met,
                note,
            );
        }
        out
    }

    /// The machine and the table.
    pub fn to_markdown(&self) -> String {
        format!("{}\n{}", self.machine_markdown(), self.table_markdown())
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// `docs/benchmarks.md`: how to run, the machine, the table.
    pub fn docs_page(&self) -> String {
        let missed: Vec<String> = self
            .missed()
            .map(|c| {
                format!(
                    "{} {} ({})",
                    c.adapter,
                    c.name,
                    c.target.as_deref().unwrap_or("")
                )
            })
            .collect();
        let mut out = String::from(
            "# Benchmarks\n\n\
             Written by `cargo xtask bench` (or `switchyard bench`); do not edit by hand. Every case \
             is measured in the same run as the floors it is compared with, on the same machine: \
             single-connection Redis SET round trips, 64 connections of unpipelined SETs, pipelined \
             SETs on one connection, and single-row SQLite write transactions (`BEGIN IMMEDIATE`, WAL, \
             `synchronous=NORMAL`, through sqlx, the pragmas of our stores). The targets are issue 9's. \
             Timings are never asserted in tests.\n\n\
             ```text\n\
             cargo xtask bench           # full run, about three minutes\n\
             cargo xtask bench --quick   # shorter cases, smaller setups\n\
             cargo xtask bench --suite store-sqlite,queue-sqlite --only append\n\
             ```\n\n\
             JSON and Markdown copies of each run go to `target/bench/`. Adapters run with their \
             default options. Latencies are per operation as the caller sees it (closed loop: each \
             task starts its next call when the previous returns).\n\n\
             ## Latest run\n\n",
        );
        out.push_str(&self.machine_markdown());
        out.push('\n');
        out.push_str(&self.table_markdown());
        out.push('\n');
        if missed.is_empty() {
            out.push_str("Every target with a measurement in this run was met.\n");
        } else {
            out.push_str("Targets missed in this run:\n\n");
            for m in missed {
                let _ = writeln!(out, "- {m}");
            }
        }
        out
    }
}
