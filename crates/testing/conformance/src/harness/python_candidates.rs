//! Where a Python 3.12 or newer may be, in the order the test harness and `cargo xtask wheel`
//! try them after `PYTHON`. One source file, compiled into both (xtask includes it by path), so
//! xtask needs no dependency on the harness and the two never look in different places.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `python3.12` on the PATH, pyenv's `python3.12`, then every installed pyenv version, newest
/// first (a version installed but not selected: `pyenv which` refuses it). Candidates only: the
/// caller runs each to see whether it is new enough.
pub fn python_candidates() -> Vec<PathBuf> {
    let mut candidates = vec![PathBuf::from("python3.12")];
    if let Ok(out) = Command::new("pyenv").args(["which", "python3.12"]).output()
        && out.status.success()
    {
        candidates.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    if let Ok(out) = Command::new("pyenv").arg("root").output()
        && out.status.success()
        && let Ok(versions) = std::fs::read_dir(
            Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("versions"),
        )
    {
        let mut found: Vec<PathBuf> = versions
            .filter_map(|v| v.ok().map(|v| v.path().join("bin/python3")))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().rev());
    }
    candidates
}
