//! `cargo xtask ci`'s second lane (ADR 0401): once the test build is done, the checks that build
//! nothing a test runs (clippy, the dependency check, the docs) run beside the test binaries, at
//! the lowest CPU priority.
//!
//! The test binaries spend much of their time waiting on their servers, browsers and timers, and
//! run two at a time for that reason (see `binaries.rs`); one after the other, the checks left
//! that time idle. They run under `nice -n 19`, so the tests keep the CPU they would have had
//! alone and their timing is not starved; the checks take what is left. They use the same
//! target directory: they start after the test build, whose build scripts and proc macros they
//! reuse (a first version, in a directory of their own from the start, compiled those twice and
//! made the test build slower than all it overlapped), and the test binaries run without cargo,
//! so only the doc tests take turns with the checks for cargo's lock.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use crate::workspace_root;

/// The checks lane, running: `cargo xtask checks` in a child process.
pub struct Checks {
    child: Child,
    echoes: Vec<JoinHandle<()>>,
}

impl Checks {
    /// Starts `xtask checks` (this very executable) at the lowest priority; its output is
    /// echoed line by line under a `[checks]` prefix.
    pub fn start() -> Result<Checks, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the xtask executable to run the checks: {e}"))?;
        eprintln!("xtask: the checks (clippy, deps, docs) run beside the tests, at nice 19");
        let spawn = |mut command: Command| {
            command
                .arg("checks")
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
