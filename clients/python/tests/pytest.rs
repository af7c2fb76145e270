//! Runs the Python package's own suite (pytest, `tests/**/test_*.py`) against the extension of
//! this build, so `cargo test` and `.ci/run` cover it.
//!
//! The package is assembled under the target directory as an installed copy would look: the
//! Python sources, the extension module this build produced (`lib_native.so`, renamed to the
//! name CPython's stable ABI loads), and a `.dist-info` with the entry points of
//! `pyproject.toml`, so fleet-framework's `backend_from_url` finds our schemes as it would after
//! `pip install`. The tests run in a venv under the target directory (Python 3.12 or newer:
//! agentdeck 3.1.0 needs it) against a private Redis and PostgreSQL started by the harness and
//! the `switchyard` binary of the same build.

use std::path::{Path, PathBuf};
use std::process::Command;

use switchyard_conformance::harness::{
    built_extension, postgres_url, python_package, python_package_venv, redis_url,
};

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// `target/<profile>`: this test binary lives in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

#[test]
fn the_python_package_suite_passes() {
    let python = python_package_venv();
    let site = profile_dir().join("switchyard-py-site");
    python_package(&built_extension(&profile_dir()), &site);
    let gateway = profile_dir().join("switchyard");
    assert!(
        gateway.exists(),
        "the gateway binary {} is missing: build it with `cargo build -p switchyard-cli`",
        gateway.display()
    );
    let mut command = Command::new(&python);
    command
        .current_dir(package_dir())
        // Two workers: most of the suite waits on servers and timers, not on the CPU.
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "tests",
        ])
        .env("PYTHONPATH", &site)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SWITCHYARD_TEST_REDIS_URL", redis_url())
        .env("SWITCHYARD_TEST_POSTGRES_URL", postgres_url())
        .env("SWITCHYARD_BIN", &gateway);
    if let Ok(filter) = std::env::var("SWITCHYARD_PYTEST_ARGS") {
        command.args(filter.split_whitespace());
    }
    let status = command.status().expect("run pytest");
    assert!(
        status.success(),
        "the Python package's pytest suite failed (output above)"
    );
}
