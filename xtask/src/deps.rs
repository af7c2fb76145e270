//! `cargo xtask deps`: guards the promise "pick the crates you need" (ADR 0001).
//!
//! 1. For every feature set of the facade, `cargo tree` must find exactly the backend client crates
//!    that set asks for: the SQLite feature never compiles fred, the Redis feature never compiles
//!    sqlx, no feature compiles neither.
//! 2. Every published crate compiles alone, with its default features and with none, so no crate
//!    leans on a feature another workspace member happens to turn on.
//! 3. The docs build without warnings, on default features and on all features.

use std::collections::BTreeSet;
use std::process::Command;

use crate::{cargo, cargo_env, workspace_root};

/// The facade crate: the one a user adds.
pub const FACADE: &str = "switchyard-kit";

/// Crates that mean "this graph talks to Redis".
const REDIS_CLIENTS: &[&str] = &["fred", "redis", "rustls", "ring"];
/// Crates that mean "this graph talks to SQLite".
const SQLITE_CLIENTS: &[&str] = &["sqlx", "sqlx-core", "sqlx-sqlite", "libsqlite3-sys"];

struct FeatureSet {
    name: &'static str,
    args: &'static [&'static str],
    redis: bool,
    sqlite: bool,
}

const FEATURE_SETS: &[FeatureSet] = &[
    FeatureSet {
        name: "default",
        args: &[],
        redis: false,
        sqlite: true,
    },
    FeatureSet {
        name: "none",
        args: &["--no-default-features"],
        redis: false,
        sqlite: false,
    },
    FeatureSet {
        name: "sqlite only",
        args: &["--no-default-features", "--features", "sqlite"],
        redis: false,
        sqlite: true,
    },
    FeatureSet {
        name: "redis only",
        args: &["--no-default-features", "--features", "redis"],
        redis: true,
        sqlite: false,
    },
    FeatureSet {
        name: "all",
        args: &["--all-features"],
        redis: true,
        sqlite: true,
    },
];

pub fn deps() -> Result<(), String> {
    graphs()?;
    alone()?;
    docs()
}

/// Check 1: which backend clients each feature set of the facade pulls in.
fn graphs() -> Result<(), String> {
    let mut failures = Vec::new();
    for set in FEATURE_SETS {
        let graph = normal_graph(FACADE, set.args)?;
        for (wanted, clients, backend) in [
            (set.redis, REDIS_CLIENTS, "Redis"),
            (set.sqlite, SQLITE_CLIENTS, "SQLite"),
        ] {
            let found: Vec<&str> = clients
                .iter()
                .copied()
                .filter(|c| graph.contains(*c))
                .collect();
            if wanted && found.is_empty() {
                failures.push(format!(
                    "{FACADE} [{}]: asks for {backend} but no {backend} client is in the graph \
                     (looked for {}); is the feature wired to its adapter crates?",
                    set.name,
                    clients.join(", ")
                ));
            }
            if !wanted && !found.is_empty() {
                failures.push(format!(
                    "{FACADE} [{}]: {} leaked into the graph; run `cargo tree -p {FACADE} -e normal {} -i {}` \
                     to see which crate pulls it and make that dependency optional",
                    set.name,
                    found.join(", "),
                    set.args.join(" "),
                    found[0]
                ));
            }
        }
        eprintln!(
            "xtask deps: {FACADE} [{}]: {} crates, redis={} sqlite={}",
            set.name,
            graph.len(),
            set.redis,
            set.sqlite
        );
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "dependency check failed:\n  {}",
            failures.join("\n  ")
        ))
    }
}

/// The names of every crate in the normal (non-dev, non-build) dependency graph of `package`.
fn normal_graph(package: &str, features: &[&str]) -> Result<BTreeSet<String>, String> {
    let mut args = vec![
        "tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}",
    ];
    args.extend_from_slice(features);
    let out = Command::new(cargo_env())
        .args(&args)
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`cargo {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// The workspace members that are published (`publish` not `false`), from `cargo metadata`.
pub fn published_crates() -> Result<Vec<String>, String> {
    let out = Command::new(cargo_env())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed something that is not JSON: {e}"))?;
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages")?;
    let mut names: Vec<String> = packages
        .iter()
        // `publish: []` is how cargo metadata spells `publish = false`.
        .filter(|p| !matches!(p["publish"].as_array(), Some(registries) if registries.is_empty()))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    Ok(names)
}

/// Check 2: every published crate compiles alone, with default features and with none.
fn alone() -> Result<(), String> {
    for name in published_crates()? {
        cargo(&["check", "--quiet", "-p", &name])?;
        cargo(&["check", "--quiet", "-p", &name, "--no-default-features"])?;
    }
    Ok(())
}

/// Check 3: `cargo doc` without warnings: the workspace on default features, and the published
/// crates on all features (the test-only crates' optional extras, such as the conformance
/// harness's containers, are not documentation anyone reads).
fn docs() -> Result<(), String> {
    let published = published_crates()?;
    let mut all_features = vec!["doc", "--no-deps", "--quiet", "--all-features"];
    for name in &published {
        all_features.extend(["-p", name.as_str()]);
    }
    for args in [
        vec!["doc", "--workspace", "--no-deps", "--quiet"],
        all_features,
    ] {
        eprintln!(
            "xtask: RUSTDOCFLAGS=\"-D warnings\" cargo {}",
            args.join(" ")
        );
        let status = Command::new(cargo_env())
            .args(&args)
            .env("RUSTDOCFLAGS", "-D warnings")
            .current_dir(workspace_root())
            .status()
            .map_err(|e| format!("cannot run cargo doc: {e}"))?;
        if !status.success() {
            return Err(format!(
                "`cargo {}` found documentation warnings ({status}); fix them, they are errors here",
                args.join(" ")
            ));
        }
    }
    Ok(())
}
