//! Through Python (ADR 0389): the seeds' own Redis stores against `switchyard-py`'s, in one
//! Python process, rounds alternated by `clients/python/bench/seeds.py`: agentdeck's
//! `RedisEventStore` against `switchyard.agentdeck.RedisEventStore` (one writer; 100 concurrent
//! appenders to one run, errors counted) and fleet's `RedisBackend` against our fleet backend
//! through fleet's own `Backend` protocol (push → reserve → ack, one worker and 16). Target: at
//! least 3× the seed, no error.
//!
//! It runs the release extension (`target/release/lib_native.so`, from `cargo build --release
//! -p switchyard-python`) in the venv the package's tests use (`target/switchyard-py-venv`, with
//! agentdeck-sdk 3.1.0 and fleet-framework 0.1.0).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use switchyard_conformance::harness::{built_extension, python_package, python_package_venv};

use crate::Ctx;
use crate::report::Case;

/// The cases `seeds.py` measures, with the seed's store or backend each compares with.
const CASES: [(&str, &str, &str); 4] = [
    ("append, 1 writer", "events/s", "agentdeck RedisEventStore"),
    (
        "append, 100 concurrent",
        "events/s",
        "agentdeck RedisEventStore",
    ),
    ("queue cycle, 1 worker", "cycles/s", "fleet RedisBackend"),
    ("queue cycle, 16 workers", "cycles/s", "fleet RedisBackend"),
];

fn name(case: &str) -> String {
    format!("python: {case} (switchyard-py against the seed)")
}

pub(crate) async fn run(ctx: &Ctx) -> Vec<Case> {
    if !CASES.iter().any(|(case, _, _)| ctx.wants(&name(case))) {
        return Vec::new();
    }
    let url = ctx.redis().to_string();
    let (seconds, rounds) = (ctx.case_time.as_secs_f64().max(0.5), ctx.pick(2, 3));
    let measured = tokio::task::spawn_blocking(move || measure(&url, seconds, rounds)).await;
    let report = match measured {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => return vec![failed(&e)],
        Err(e) => return vec![failed(&e.to_string())],
    };
    CASES
        .iter()
        .filter(|(case, _, _)| ctx.wants(&name(case)))
        .map(|(case, unit, seed)| to_case(&report[*case], case, unit, seed))
        .collect()
}

/// `target/release`, where the bench binary itself lives.
fn release_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

fn measure(url: &str, seconds: f64, rounds: u32) -> Result<Value, String> {
    let extension = built_extension(&release_dir());
    if !extension.exists() {
        return Err(format!(
            "{} is missing: run `cargo build --release -p switchyard-python` first",
            extension.display()
        ));
    }
    let site = release_dir().join("switchyard-py-bench-site");
    python_package(&extension, &site);
    let python = python_package_venv();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/bench/seeds.py");
    let out = Command::new(python)
        .arg(script)
        .args([
            url,
            "--seconds",
            &seconds.to_string(),
            "--rounds",
            &rounds.to_string(),
        ])
        .env("PYTHONPATH", &site)
        .output()
        .map_err(|e| format!("cannot run the Python bench: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the Python bench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the Python bench's report: {e}"))
}

fn to_case(result: &Value, case: &str, unit: &str, seed: &str) -> Case {
    let rounds = result["rounds"].as_array().cloned().unwrap_or_default();
    let ours: Vec<f64> = rounds.iter().filter_map(|r| r["ours"].as_f64()).collect();
    let seeds: Vec<f64> = rounds.iter().filter_map(|r| r["seed"].as_f64()).collect();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let ratio = result["ratio_median"].as_f64();
    let our_errors = result["our_errors"].as_u64().unwrap_or(0);
    let seed_errors = result["seed_errors"].as_u64().unwrap_or(0);
    let per_round: Vec<String> = rounds
        .iter()
        .filter_map(|r| Some(format!("{:.2}", r["ours"].as_f64()? / r["seed"].as_f64()?)))
        .collect();
    Case {
        suite: "python".into(),
        adapter: "redis".into(),
        name: name(case),
        ops: 0,
        errors: our_errors,
        secs: 0.0,
        rate: median(&ours),
        unit: unit.into(),
        p50_ms: None,
        p99_ms: None,
        floor: Some(format!(
            "{seed} through Python, {:.0} {unit}",
            median(&seeds)
        )),
        ratio,
        target: Some("≥ 3× the seed, 0 errors".into()),
        met: ratio.map(|r| r >= 3.0 && our_errors == 0),
        note: format!(
            "ratio per round {}; the seed's errors: {seed_errors}{}",
            per_round.join(", "),
            ceiling_note(&rounds)
        ),
    }
}

/// The one-worker cycle's ceiling per round (`ceiling` in `seeds.py`'s rounds of that case):
/// three of our `kv_get`s per second over the seed's cycles per second. fleet's `Backend` protocol
/// awaits push, reserve and ack one by one, so no backend behind it does a cycle in less than
/// three round trips, and this is the highest ratio the round could report. Empty for the cases
/// without one.
fn ceiling_note(rounds: &[Value]) -> String {
    let ceilings: Vec<String> = rounds
        .iter()
        .filter_map(|r| Some(format!("{:.2}", r["ceiling"].as_f64()?)))
        .collect();
    if ceilings.is_empty() {
        return String::new();
    }
    format!(
        "; the protocol's ceiling (three GETs through it ÷ the seed's cycle) per round {}",
        ceilings.join(", ")
    )
}

fn failed(e: &str) -> Case {
    Case {
        suite: "python".into(),
        adapter: "redis".into(),
        name: name(CASES[0].0),
        ops: 0,
        errors: 1,
        secs: 0.0,
        rate: 0.0,
        unit: String::new(),
        p50_ms: None,
        p99_ms: None,
        floor: None,
        ratio: None,
        target: None,
        met: Some(false),
        note: e.to_string(),
    }
}
