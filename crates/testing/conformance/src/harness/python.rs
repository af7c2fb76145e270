//! Python virtual environments for the tests that run a seed's own Python code beside ours
//! (fleet-framework's backend, agentdeck's stores): made under the target directory on first use
//! and reused by later runs, so only the first run needs the package index.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's target directory (`CARGO_TARGET_DIR`, else `target/` at the root).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../target"))
}

/// Whether `program args…` runs and exits with success.
pub fn python_runs(program: &Path, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The Python of the venv `target/<name>`: reused when `import_check` (a `python -c` program)
/// succeeds in it, else made with `base` and given `packages` by pip. Fails, with what to
/// install, when the venv or the packages cannot be had.
pub fn python_venv(name: &str, base: &Path, packages: &[&str], import_check: &str) -> PathBuf {
    let venv = target_dir().join(name);
    let py = venv.join("bin").join("python");
    let ready = |py: &Path| python_runs(py, &["-c", import_check]);
    if ready(&py) {
        return py;
    }
    let made = Command::new(base)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        made,
        "`{} -m venv {}` failed: install Python's venv module (Debian: python3-venv)",
        base.display(),
        venv.display()
    );
    let installed = Command::new(&py)
        .args(["-m", "pip", "install", "--quiet"])
        .args(packages)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        installed && ready(&py),
        "`pip install {}` into {} failed: it needs the package index, or PIP_FIND_LINKS pointing \
         at the wheels",
        packages.join(" "),
        venv.display()
    );
    py
}
