//! `cargo xtask <command>`: the project's automation, in Rust so it runs wherever cargo does.
//!
//! * `ci`        — format check, `adr check`, then in two lanes at once (see `lanes.rs`) every
//!   test and the checks; then the Python wheel (what CI runs)
//! * `checks`    — clippy with `-D warnings` and the dependency check: `ci`'s second lane
//! * `deps`      — the dependency check alone: which backend clients each facade feature set
//!   compiles, every published crate checked alone, docs without warnings (see `deps.rs`)
//! * `test`      — every test of the workspace
//! * `wheel`     — builds the Python package's release wheel with maturin, installs it with its
//!   extras into a new venv and runs its checks and examples there (see `wheel.rs`)
//! * `adr new T` — a new numbered decision record in `adr/` titled `T`
//! * `adr index` — rewrites `adr/README.md`, the table of every record (see `adr.rs`)
//! * `adr check` — fails on a record whose status or date line breaks the grammar, an amendment
//!   written on one side only, a dangling ADR number, or a stale `adr/README.md`
//! * `bench`     — the benchmarks against this machine's floors (`--quick` for under a minute);
//!   prints the table, saves it under `target/bench/` and rewrites `docs/benchmarks.md`
//! * `chaos`     — the fault suite (`--quick` for a few seconds per scenario, `--scenario NAME`):
//!   every Redis adapter, and the Postgres event store and fleet, under load through connection
//!   kills, server kills and a cluster failover

mod adr;
mod binaries;
mod deps;
mod lanes;
mod wheel;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("checks") => checks(),
        Some("test") => test(&args[1..]),
        Some("deps") => deps::deps(),
        Some("wheel") => wheel::wheel(),
        Some("bench") => bench(&args[1..]),
        Some("chaos") => chaos(&args[1..]),
        Some("adr") => adr::command(&workspace_root(), &args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask ci | checks | deps | wheel | test [-- cargo test args] | adr new \"title\" | adr index | adr check | bench [--quick] [switchyard-bench args] | chaos [--quick] [--scenario NAME]";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The cargo that runs us (so `cargo +toolchain xtask` stays on that toolchain).
fn cargo_env() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn cargo(args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo_env())
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    // Reads only the files in `adr/`, so it runs before anything is built.
    adr::check(&workspace_root())?;
    // The test build first, then the test binaries with the checks beside them (ADR 0401);
    // every failure of both is reported.
    let binaries = binaries::build(&TEST_ARGS)?;
    let checks = lanes::Checks::start()?;
    let tests = binaries::run_built(binaries).and_then(|()| doc_tests());
    let checks = checks.wait();
    match (tests, checks) {
        (Ok(()), Ok(())) => {}
        (Err(e), Ok(())) | (Ok(()), Err(e)) => return Err(e),
        (Err(tests), Err(checks)) => return Err(format!("{tests}\nxtask: {checks}")),
    }
    wheel::wheel()
}

/// Clippy with `-D warnings` and the dependency check: what `ci` runs beside the tests.
fn checks() -> Result<(), String> {
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    deps::deps()
}

/// `cargo test` of every target of the workspace. The CLI's `bench` feature is off by default
/// (ADR 0201); turning it on here lets its end-to-end case run in the same build as every other
/// test.
const TEST_ARGS: [&str; 5] = [
    "test",
    "--workspace",
    "--all-targets",
    "--features",
    "switchyard-cli/bench",
];

fn test(extra: &[String]) -> Result<(), String> {
    if extra.is_empty() {
        binaries::run_all(&TEST_ARGS)?;
    } else {
        let mut args = TEST_ARGS.to_vec();
        args.extend(extra.iter().map(String::as_str));
        cargo(&args)?;
    }
    doc_tests()
}

/// Doc tests are not part of `--all-targets`.
fn doc_tests() -> Result<(), String> {
    cargo(&[
        "test",
        "--workspace",
        "--doc",
        "--features",
        "switchyard-cli/bench",
    ])
}

/// Runs the bench binary in release mode; extra arguments (`--quick`, `--url`, `--suite`, `--only`)
/// go to it. The Python extension is built in release first: the `python` suite loads it.
fn bench(extra: &[String]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "switchyard-python"])?;
    let mut args = vec![
        "run",
        "--release",
        "-p",
        "switchyard-bench",
        "--bin",
        "switchyard-bench",
        "--",
        "--out",
        "target/bench",
        "--docs",
        "docs/benchmarks.md",
    ];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args)
}

/// Runs the fault suite in release mode; extra arguments (`--quick`, `--scenario NAME`) go to it.
/// Fails when any check finds a violation.
fn chaos(extra: &[String]) -> Result<(), String> {
    let mut args = vec![
        "run",
        "--release",
        "-p",
        "switchyard-chaos",
        "--bin",
        "switchyard-chaos",
        "--",
    ];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args)
}
