//! `cargo xtask wheel`: the Python package as a user gets it (ADR 0397).
//!
//! The test suite loads the extension of the debug build from a copy assembled under `target/`
//! (`clients/python/tests/pytest.rs`), which proves the code but not the package: the wheel's
//! metadata, its entry points, the stable-ABI tag, the `.pyi` and `py.typed` files and the extras
//! are only real once `maturin` has built a wheel and `pip` has installed it. So this step
//!
//! 1. builds the release wheel with `maturin build --release` (maturin from PyPI in a venv of its
//!    own under `target/wheel/`),
//! 2. installs it, with its `agentdeck` and `fleet` extras, into a new empty venv,
//! 3. runs `clients/python/wheel_check.py` there from an empty directory, with no `PYTHONPATH`:
//!    the installed files, the version, the entry points, the drop-ins' base classes, then the
//!    package's examples as a user runs them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

// The harness's list of places to look, shared as a source file (no dependency on the harness).
#[path = "../../crates/testing/conformance/src/harness/python_candidates.rs"]
mod python_candidates;

/// The maturin the wheel is built with: the range `pyproject.toml`'s `build-system` asks for.
const MATURIN: &str = "maturin>=1.9,<2";

pub fn wheel() -> Result<(), String> {
    let root = workspace_root();
    let work = root.join("target/wheel");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let python = python_312()?;

    // 1. maturin in a venv of its own, kept between runs (pip finds it installed).
    let build_venv = work.join("build-venv");
    let build_python = venv(&python, &build_venv, false)?;
    run(
        Command::new(&build_python).args(["-m", "pip", "install", "-q", MATURIN]),
        "install maturin from PyPI",
    )?;
    let dist = work.join("dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist)
            .map_err(|e| format!("cannot clear {}: {e}", dist.display()))?;
    }
    let maturin = build_venv.join("bin/maturin");
    run(
        Command::new(&maturin)
            .args(["build", "--release", "--manifest-path"])
            .arg(root.join("clients/python/Cargo.toml"))
            .arg("--out")
            .arg(&dist)
            .arg("--interpreter")
            .arg(&python)
            .current_dir(&root),
        "build the release wheel (maturin build --release)",
    )?;
    let wheel = only_wheel(&dist)?;
    eprintln!("xtask: built {}", wheel.display());

    // 2. A new venv each run: nothing in it but what the wheel and its extras bring.
    let clean = work.join("clean-venv");
    let clean_python = venv(&python, &clean, true)?;
    run(
        Command::new(&clean_python)
            .args(["-m", "pip", "install", "-q"])
            .arg(format!("{}[agentdeck,fleet]", wheel.display())),
        "install the wheel with its extras into a new venv",
    )?;

    // 3. From an empty directory, so nothing of the source tree is importable.
    let cwd = work.join("run");
    if cwd.exists() {
        std::fs::remove_dir_all(&cwd)
            .map_err(|e| format!("cannot clear {}: {e}", cwd.display()))?;
    }
    std::fs::create_dir_all(&cwd).map_err(|e| format!("cannot create {}: {e}", cwd.display()))?;
    run(
        Command::new(&clean_python)
            .arg(root.join("clients/python/wheel_check.py"))
            .arg(root.join("clients/python/examples"))
            .env_remove("PYTHONPATH")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("SWITCHYARD_EXPECTED_VERSION", wheel_version(&wheel)?)
            .current_dir(&cwd),
        "check the installed wheel (clients/python/wheel_check.py)",
    )?;
    eprintln!("xtask: the wheel installs and runs in a new venv");
    Ok(())
}

/// The one wheel `maturin build` left in `dist`.
fn only_wheel(dist: &Path) -> Result<PathBuf, String> {
    let wheels: Vec<PathBuf> = std::fs::read_dir(dist)
        .map_err(|e| format!("maturin left no {}: {e}", dist.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one wheel in {}, found {}",
            dist.display(),
            wheels.len()
        )),
    }
}

/// The version in the wheel's file name (`switchyard_py-0.1.0-cp311-abi3-….whl`), which the
/// installed distribution and `switchyard.__version__` (the crate's) must both carry.
fn wheel_version(wheel: &Path) -> Result<String, String> {
    wheel
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('-').nth(1))
        .map(str::to_string)
        .ok_or_else(|| format!("{} is not named as a wheel is", wheel.display()))
}

/// A venv at `dir` made by `python` (made anew when `fresh`), and its interpreter.
fn venv(python: &Path, dir: &Path, fresh: bool) -> Result<PathBuf, String> {
    let inner = dir.join("bin/python");
    if fresh && dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    if !inner.exists() {
        run(
            Command::new(python).args(["-m", "venv"]).arg(dir),
            "create a venv (install Python's venv module: Debian's python3.12-venv)",
        )?;
    }
    Ok(inner)
}

/// Python 3.12 or newer (agentdeck 3.1.0, the `agentdeck` extra, needs it), found as the test
/// harness finds it: `PYTHON`, then the harness's candidates (`python3.12`, pyenv's).
fn python_312() -> Result<PathBuf, String> {
    let new_enough = |p: &Path| {
        Command::new(p)
            .args(["-c", "import sys, venv; assert sys.version_info >= (3, 12)"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut candidates: Vec<PathBuf> = std::env::var_os("PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.extend(python_candidates::python_candidates());
    candidates
        .into_iter()
        .find(|p| new_enough(p))
        .ok_or_else(|| {
            "no Python 3.12 or newer with its venv module: install one (pyenv install 3.12, or \
         Debian's python3.12 and python3.12-venv) or set PYTHON to one"
                .to_string()
        })
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("failed to {what} ({status})"))
    }
}
