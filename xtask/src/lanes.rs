//! `cargo xtask ci` in two lanes (ADR 0401): the tests in `target/`, and beside them, in a
//! target directory of their own and at the lowest CPU priority, the checks that build nothing
//! a test runs (clippy, the dependency check, the docs).
//!
//! Both lanes compile the whole dependency graph, but never the same artifacts: the checks make
//! metadata only (`cargo check`, clippy, rustdoc), the tests make code. One after the other they
//! left the CPU idle while a test build linked one binary at a time and while the tests waited
//! on their servers, browsers and timers. The checks run under `nice -n 19`, so the tests keep
//! the CPU they would have had alone and their timing is not starved; the checks take what is
//! left. They need a target directory of their own because cargo holds a target directory's
//! lock for the whole of a build.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use crate::workspace_root;

/// The checks lane's target directory, under the tests' one.
fn checks_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("ci-checks")
}

/// The checks lane, running: `cargo xtask checks` in a child process.
pub struct Checks {
    child: Child,
    echoes: Vec<JoinHandle<()>>,
}

impl Checks {
    /// Starts `xtask checks` (this very executable) at the lowest priority, in its own target
    /// directory; its output is echoed line by line under a `[checks]` prefix.
    pub fn start() -> Result<Checks, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the xtask executable to run the checks: {e}"))?;
        let target = checks_target_dir();
        eprintln!(
            "xtask: the checks (clippy, deps, docs) run beside the tests, at nice 19, in {}",
            target.display()
        );
        let spawn = |mut command: Command| {
            command
                .arg("checks")
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(workspace_root())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        };
        let mut niced = Command::new("nice");
        niced.args(["-n", "19"]).arg(&exe);
        // Without `nice` (not every system has coreutils) the lane runs at normal priority.
        let mut child = spawn(niced)
            .or_else(|_| spawn(Command::new(&exe)))
            .map_err(|e| format!("cannot start the checks lane: {e}"))?;
        let mut echoes = Vec::new();
        if let Some(out) = child.stdout.take() {
            echoes.push(echo(out));
        }
        if let Some(err) = child.stderr.take() {
            echoes.push(echo(err));
        }
        Ok(Checks { child, echoes })
    }

    /// Waits for the lane to end; an error names what failed (its output is above).
    pub fn wait(mut self) -> Result<(), String> {
        let status = self
            .child
            .wait()
            .map_err(|e| format!("lost the checks lane: {e}"))?;
        for echo in self.echoes {
            let _ = echo.join();
        }
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "the checks lane failed ({status}): its `[checks]` lines above say which step"
            ))
        }
    }
}

/// Copies `stream` to our stderr, a `[checks]` prefix on each line.
fn echo(stream: impl Read + Send + 'static) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(line) => eprintln!("[checks] {line}"),
                Err(_) => break,
            }
        }
    })
}
