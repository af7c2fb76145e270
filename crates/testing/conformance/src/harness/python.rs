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
    super::python_candidates::python_candidates()
        .into_iter()
        .find(|python| python_runs(python, &NEW_ENOUGH))
        .unwrap_or_else(|| panic!("no Python 3.12: {how}"))
}

/// The extension module a cargo build of `switchyard-python` left in `profile_dir`
/// (`target/<profile>`): `cargo build` puts `lib_native.so` there, `cargo test` only in `deps/`;
/// the newer of the two.
pub fn built_extension(profile_dir: &Path) -> PathBuf {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let top = profile_dir.join("lib_native.so");
    let deps = profile_dir.join("deps").join("lib_native.so");
    match (modified(&top), modified(&deps)) {
        (Some(a), Some(b)) if b > a => deps,
        (None, Some(_)) => deps,
        _ => top,
    }
}

/// The Python package `switchyard-py` as pip would install it, under `site`: the sources of
/// `clients/python/python/switchyard`, the extension module `extension` (the `lib_native.so`
/// a cargo build made) under the name CPython's stable ABI loads, and a `.dist-info` with the
/// metadata and entry points of `pyproject.toml`, so `importlib.metadata` (fleet's
/// `backend_from_url`) finds our schemes. `site` is emptied first. Put it on `PYTHONPATH`.
///
/// # Panics
/// When the extension is missing (with the command that builds it) or a file cannot be copied.
pub fn python_package(extension: &Path, site: &Path) {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../clients/python");
    assert!(
        extension.exists(),
        "the extension module {} is missing: build it with `cargo build -p switchyard-python` \
         (add --release for the bench)",
        extension.display()
    );
    let _ = std::fs::remove_dir_all(site);
    copy_sources(&package.join("python/switchyard"), &site.join("switchyard"));
    std::fs::copy(extension, site.join("switchyard/_native.abi3.so"))
        .expect("copy the extension module");

    let pyproject: toml::Table = std::fs::read_to_string(package.join("pyproject.toml"))
        .expect("read clients/python/pyproject.toml")
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

/// The package's sources without byte code or a stray extension module.
fn copy_sources(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the package directory");
    for entry in std::fs::read_dir(from).expect("read the package sources") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().expect("a file name").to_owned();
        if name == "__pycache__" || path.extension().is_some_and(|e| e == "so") {
            continue;
        }
        if path.is_dir() {
            copy_sources(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy a package file");
        }
    }
}

/// The venv `target/switchyard-py-venv` the Python package's tests and bench run in: Python
/// 3.12 or newer ([`python_312`]) with pytest, httpx, psycopg and the seeds themselves
/// (agentdeck-sdk 3.1.0, fleet-framework 0.1.0) from PyPI, made on first use.
pub fn python_package_venv() -> PathBuf {
    python_venv(
        "switchyard-py-venv",
        &python_312("the Python package's tests run agentdeck 3.1.0, which needs Python 3.12"),
        &[
            "pytest>=8",
            "pytest-asyncio>=0.24",
            "pytest-xdist>=3.6",
            "httpx>=0.27",
            "agentdeck-sdk==3.1.0",
            "fleet-framework==0.1.0",
            "psycopg[binary]>=3.2",
        ],
        "import pytest, pytest_asyncio, xdist, httpx, psycopg, importlib.metadata as m; \
         assert m.version('agentdeck-sdk') == '3.1.0'; \
         assert m.version('fleet-framework') == '0.1.0'",
    )
}
