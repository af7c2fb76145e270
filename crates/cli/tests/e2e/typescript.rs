//! The TypeScript client (`clients/typescript`) against this build's `switchyard`: its types
//! are the ones generated from this build's OpenAPI document, its public declarations hold no
//! `any`, `npm pack` packs what a user installs, and its own suite (node's test runner: the
//! walkthrough, a stream resumed across a gateway restart, 200 tasks through 4 workers, scoped
//! tokens and stream tickets, a page in headless Chromium) passes against gateways it starts
//! itself, on the embedded default and on private Redis servers.

use std::path::{Path, PathBuf};
use std::process::Command;

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/typescript")
}

/// Runs `npm <args>` in the package with `SWITCHYARD_BIN` set to this build's binary; fails
/// with its output.
fn npm(args: &[&str]) -> String {
    let out = Command::new("npm")
        .args(args)
        .current_dir(package_dir())
        .env("SWITCHYARD_BIN", env!("CARGO_BIN_EXE_switchyard"))
        .env_remove("REDIS_URL")
        .env_remove("POSTGRES_URL")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run npm ({e}): install Node.js 20 or newer with npm (Debian: apt-get \
                 install nodejs npm; .ci/run installs them when missing)"
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`npm {}` failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn node_major() -> u32 {
    let out = Command::new("node")
        .arg("--version")
        .output()
        .expect("node is not installed: install Node.js 20 or newer (.ci/run installs it)");
    let version = String::from_utf8_lossy(&out.stdout);
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_typescript_client_is_current_typed_packable_and_passes_its_suite() {
    let major = node_major();
    assert!(
        major >= 20,
        "Node.js {major} is too old for clients/typescript: install Node.js 20 or newer"
    );
    npm(&["ci", "--no-audit", "--no-fund", "--prefer-offline"]);
    // The committed document and types are what this build's gateway serves.
    npm(&["run", "check:generated"]);
    npm(&["run", "check:types"]);
    let packed: serde_json::Value =
        serde_json::from_str(&npm(&["pack", "--dry-run", "--json", "--silent"]))
            .expect("npm pack --json");
    let files: Vec<&str> = packed[0]["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    for needed in [
        "dist/index.js",
        "dist/index.d.ts",
        "dist/worker.js",
        "README.md",
        "openapi.json",
        "package.json",
    ] {
        assert!(
            files.contains(&needed),
            "npm pack leaves out {needed}: {files:?}"
        );
    }
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("test/") || f.starts_with("build/") || f.starts_with("src/")),
        "npm pack ships sources or tests: {files:?}"
    );
    npm(&["test"]);
}
