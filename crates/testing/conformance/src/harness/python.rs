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

/// A Python 3.12 or newer, with its venv module: `PYTHON`, else `python3.12` on the PATH, else
/// the newest of pyenv's installed versions that is new enough. `why` says which test needs it
/// (agentdeck 3.1.0 needs 3.12); the panic adds what to install.
pub fn python_312(why: &str) -> PathBuf {
    const NEW_ENOUGH: [&str; 2] = ["-c", "import sys; assert sys.version_info >= (3, 12)"];
    let how = format!(
        "{why}: install Python 3.12 or newer with its venv module (pyenv install 3.12, or \
         Debian's python3.12 and python3.12-venv) or set PYTHON to one"
    );
    if let Some(python) = std::env::var_os("PYTHON").filter(|p| !p.is_empty()) {
        let python = PathBuf::from(python);
        assert!(
            python_runs(&python, &NEW_ENOUGH),
            "PYTHON={}: {how}",
            python.display()
        );
        return python;
    }
    let mut candidates = vec![PathBuf::from("python3.12")];
    if let Ok(out) = Command::new("pyenv").args(["which", "python3.12"]).output()
        && out.status.success()
    {
        candidates.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    // A pyenv version that is installed but not selected: `pyenv which` refuses it.
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
        .into_iter()
        .find(|python| python_runs(python, &NEW_ENOUGH))
        .unwrap_or_else(|| panic!("no Python 3.12: {how}"))
}
