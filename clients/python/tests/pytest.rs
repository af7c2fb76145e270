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

use switchyard_conformance::harness::{postgres_url, python_312, python_venv, redis_url};

const PACKAGES: &[&str] = &[
    "pytest>=8",
    "pytest-asyncio>=0.24",
    "httpx>=0.27",
    "agentdeck-sdk==3.1.0",
    "fleet-framework==0.1.0",
    "psycopg[binary]>=3.2",
];

const READY: &str = "import pytest, pytest_asyncio, httpx, psycopg, importlib.metadata as m; \
                     assert m.version('agentdeck-sdk') == '3.1.0'; \
                     assert m.version('fleet-framework') == '0.1.0'";

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

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the package directory");
    for entry in std::fs::read_dir(from).expect("read the package sources") {
        let entry = entry.expect("a directory entry");
        let path = entry.path();
        let name = entry.file_name();
        if name == "__pycache__" || path.extension().is_some_and(|e| e == "so") {
            continue;
        }
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy a package file");
        }
    }
}

/// The `.dist-info` pip would write: metadata and the entry points of `pyproject.toml`.
fn write_dist_info(site: &Path) {
    let pyproject: toml::Table = std::fs::read_to_string(package_dir().join("pyproject.toml"))
        .expect("read pyproject.toml")
        .parse()
        .expect("pyproject.toml parses");
    let project = pyproject["project"].as_table().expect("[project]");
    let name = project["name"].as_str().expect("project.name");
    let version = project["version"].as_str().expect("project.version");
    let info = site.join(format!("{}-{version}.dist-info", name.replace('-', "_")));
    std::fs::create_dir_all(&info).expect("create the dist-info");
    std::fs::write(
        info.join("METADATA"),
        format!("Metadata-Version: 2.3\nName: {name}\nVersion: {version}\n"),
    )
    .expect("write METADATA");
    let mut entry_points = String::new();
    if let Some(groups) = project.get("entry-points").and_then(|e| e.as_table()) {
        for (group, entries) in groups {
            entry_points.push_str(&format!("[{group}]\n"));
            for (key, target) in entries.as_table().expect("an entry-point group") {
                let target = target.as_str().expect("an entry point");
                entry_points.push_str(&format!("{key} = {target}\n"));
            }
            entry_points.push('\n');
        }
    }
    std::fs::write(info.join("entry_points.txt"), entry_points).expect("write entry_points.txt");
}

/// The package as installed, under `target/<profile>/switchyard-py-site`.
fn assemble() -> PathBuf {
    let site = profile_dir().join("switchyard-py-site");
    let _ = std::fs::remove_dir_all(&site);
    copy_tree(
        &package_dir().join("python/switchyard"),
        &site.join("switchyard"),
    );
    let built = profile_dir().join("lib_native.so");
    assert!(
        built.exists(),
        "the extension module {} is missing: build it with `cargo build -p switchyard-python`",
        built.display()
    );
    std::fs::copy(&built, site.join("switchyard/_native.abi3.so"))
        .expect("copy the extension module");
    write_dist_info(&site);
    site
}

#[test]
fn the_python_package_suite_passes() {
    let python = python_venv(
        "switchyard-py-venv",
        &python_312("the Python package's tests run agentdeck 3.1.0, which needs Python 3.12"),
        PACKAGES,
        READY,
    );
    let site = assemble();
    let gateway = profile_dir().join("switchyard");
    assert!(
        gateway.exists(),
        "the gateway binary {} is missing: build it with `cargo build -p switchyard-cli`",
        gateway.display()
    );
    let mut command = Command::new(&python);
    command
        .current_dir(package_dir())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
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
