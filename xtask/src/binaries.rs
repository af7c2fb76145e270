//! `cargo xtask test` with no arguments (and so `ci`): every test binary of the workspace, built
//! by one `cargo test --no-run`, then run a few at a time.
//!
//! `cargo test` runs its binaries one after the other. Most of a binary's time here is spent
//! waiting on the private servers, browsers and timers of its tests, so on CI's two cores the
//! test phase took about ten minutes with the machine half idle. Two binaries at a time, the
//! slowest started first, keep it busier; each binary still runs its own tests on its own threads,
//! exactly as `cargo test` would run it (its package's directory as the working directory and
//! `CARGO_MANIFEST_DIR` set). A binary's output is printed whole when it ends, and every binary
//! runs even after one failed, so one run names every failure.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{cargo_env, workspace_root};

/// How many test binaries run at once. Three halved the warm test phase (432 s to 226 s) but
/// loaded the two cores enough to starve a test's own timing; two leave headroom.
const AT_ONCE: usize = 2;

/// Binaries that take minutes, started first so the run does not end with one of them alone
/// (by target name; names not built are ignored).
const SLOWEST: &[&str] = &[
    "e2e",
    "pytest",
    "postgres_processes",
    "agentdeck_interop",
    "short",
];

/// One test binary of the build.
pub struct Binary {
    /// `package (kind name)`, as a reader finds it in the workspace.
    label: String,
    executable: PathBuf,
    /// Its package's directory, where `cargo test` runs it.
    dir: PathBuf,
    target: String,
}

/// What a finished binary left.
struct Ran {
    label: String,
    passed: bool,
    took: Duration,
}

/// Builds every test binary of `build_args` (a `cargo test …` command line) once, then runs
/// them [`AT_ONCE`] at a time.
pub fn run_all(build_args: &[&str]) -> Result<(), String> {
    run_built(build(build_args)?)
}

/// Runs `binaries` (from [`build`]) [`AT_ONCE`] at a time, every one even after one failed.
pub fn run_built(binaries: Vec<Binary>) -> Result<(), String> {
    eprintln!(
        "xtask: running {} test binaries, {AT_ONCE} at a time",
        binaries.len()
    );
    let started = Instant::now();
    let queue = Mutex::new(VecDeque::from(binaries));
    let ran = Mutex::new(Vec::new());
    let print = Mutex::new(());
    std::thread::scope(|s| {
        for _ in 0..AT_ONCE {
            s.spawn(|| {
                loop {
                    // Taken in a statement of its own: in a `while let` the guard would live
                    // through the run and hold the other threads back.
                    let next = lock(&queue).pop_front();
                    let Some(binary) = next else { break };
                    let (outcome, text) = run(&binary);
                    let _printing = lock(&print);
                    report(&binary, &outcome, &text);
                    lock(&ran).push(outcome);
                }
            });
        }
    });
    let ran = ran.into_inner().unwrap_or_else(|p| p.into_inner());
    let failed: Vec<&str> = ran
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.label.as_str())
        .collect();
    let mut slowest: Vec<&Ran> = ran.iter().collect();
    slowest.sort_by_key(|r| std::cmp::Reverse(r.took));
    eprintln!(
        "xtask: {} test binaries in {:.0} s; the slowest: {}",
        ran.len(),
        started.elapsed().as_secs_f64(),
        slowest
            .iter()
            .take(5)
            .map(|r| format!("{} {:.0} s", r.label, r.took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} test binaries failed (their output is above): {}",
            failed.len(),
            failed.join(", ")
        ))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cargo test --no-run` of `args`, and the test binaries it made, the slowest first.
pub fn build(args: &[&str]) -> Result<Vec<Binary>, String> {
    let build: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--no-run", "--message-format", "json-render-diagnostics"])
        .collect();
    eprintln!("xtask: cargo {}", build.join(" "));
    let built = Command::new(cargo_env())
        .args(&build)
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "`cargo {}` failed ({})",
            build.join(" "),
            built.status
        ));
    }
    let mut binaries: Vec<Binary> = String::from_utf8_lossy(&built.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter_map(|m| {
            let executable = PathBuf::from(m["executable"].as_str()?);
            let dir = Path::new(m["manifest_path"].as_str()?)
                .parent()?
                .to_path_buf();
            let target = m["target"]["name"].as_str()?.to_owned();
            let kind = m["target"]["kind"][0].as_str().unwrap_or("test");
            // `path+file:///…/crates/core#switchyard-core@0.1.0`: the name after `#`.
            let id = m["package_id"].as_str().unwrap_or_default();
            let package = id
                .rsplit_once('#')
                .map_or(id, |(_, rest)| rest.split('@').next().unwrap_or(rest));
            Some(Binary {
                label: format!("{package} ({kind} {target})"),
                executable,
                dir,
                target,
            })
        })
        .collect();
    if binaries.is_empty() {
        return Err("the build made no test binary".into());
    }
    // Stable: the slowest in the listed order, then the rest in the build's order.
    binaries.sort_by_key(|b| {
        SLOWEST
            .iter()
            .position(|s| *s == b.target)
            .unwrap_or(SLOWEST.len())
    });
    Ok(binaries)
}

/// Runs one binary to its end; its output is printed by [`report`].
fn run(binary: &Binary) -> (Ran, Vec<u8>) {
    let started = Instant::now();
    let output = Command::new(&binary.executable)
        .current_dir(&binary.dir)
        .env("CARGO_MANIFEST_DIR", &binary.dir)
        .stdin(Stdio::null())
        .output();
    let (passed, text) = match output {
        Ok(out) => {
            let mut text = out.stdout;
            text.extend_from_slice(&out.stderr);
            (out.status.success(), text)
        }
        Err(e) => (
            false,
            format!("cannot run {}: {e}\n", binary.executable.display()).into_bytes(),
        ),
    };
    (
        Ran {
            label: binary.label.clone(),
            passed,
            took: started.elapsed(),
        },
        text,
    )
}

fn report(binary: &Binary, ran: &Ran, text: &[u8]) {
    eprintln!(
        "xtask: {} {} in {:.1} s ({})",
        ran.label,
        if ran.passed { "passed" } else { "FAILED" },
        ran.took.as_secs_f64(),
        binary.executable.display()
    );
    eprint!("{}", String::from_utf8_lossy(text));
}
