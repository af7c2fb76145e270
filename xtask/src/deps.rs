//! `cargo xtask deps`: guards the promise "pick the crates you need" (ADR 0001).
//!
//! 1. For every feature set of the facade, `cargo tree` must find exactly the backend client crates
//!    that set asks for: the SQLite feature never compiles fred nor sqlx's Postgres driver, the
//!    Redis feature never compiles sqlx, the Postgres feature never compiles fred nor SQLite, no
//!    feature compiles none of them. The sets (default, none, each backend alone, all) and each
//!    backend's client crates come from the facade's `[package.metadata.switchyard.backends]`
//!    table and its features, read with `cargo metadata` (ADR 0361).
//! 2. Every published crate compiles alone, with its default features and (where `default` turns
//!    something on) with none, so no crate leans on a feature another workspace member turns on.
//! 3. The docs build without warnings, on default features (the workspace, and each crate with
//!    optional features alone, as a user's `cargo doc` builds it) and, for the crates with
//!    optional features, on all of them.

use std::collections::BTreeSet;
use std::process::Command;

use crate::{cargo, cargo_env, workspace_root};

/// The facade crate: the one a user adds.
pub const FACADE: &str = "switchyard-kit";

/// A backend feature of the facade and the client crates that mean "this graph talks to it",
/// as the facade's `[package.metadata.switchyard.backends]` table declares them.
struct BackendFeature {
    feature: String,
    clients: Vec<String>,
}

/// One build of the facade to look at: its `cargo tree` arguments and the backend features it
/// turns on.
struct FeatureSet {
    name: String,
    args: Vec<String>,
    backends: BTreeSet<String>,
}

/// The facade's backend table and features, from `cargo metadata`: a backend added to the table
/// (and its feature) is checked without touching this file (ADR 0361).
fn feature_sets() -> Result<(Vec<BackendFeature>, Vec<FeatureSet>), String> {
    let meta = metadata()?;
    let kit = meta["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == FACADE))
        .ok_or_else(|| format!("cargo metadata does not list {FACADE}"))?;
    let table = kit["metadata"]["switchyard"]["backends"]
        .as_object()
        .ok_or_else(|| {
            format!(
                "{FACADE}'s Cargo.toml has no [package.metadata.switchyard.backends] table: list \
                 each backend feature with the client crates it compiles, e.g. \
                 redis = [\"fred\"]"
            )
        })?;
    let features = kit["features"]
        .as_object()
        .ok_or_else(|| format!("cargo metadata lists no features of {FACADE}"))?;
    let mut backends = Vec::new();
    for (feature, clients) in table {
        if !features.contains_key(feature) {
            return Err(format!(
                "{FACADE}: the backend table names `{feature}`, which is not a feature; add the \
                 feature or remove the entry"
            ));
        }
        let clients: Vec<String> = clients
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if clients.is_empty() {
            return Err(format!(
                "{FACADE}: backend `{feature}` names no client crate in the backend table"
            ));
        }
        backends.push(BackendFeature {
            feature: feature.clone(),
            clients,
        });
    }
    let names: BTreeSet<String> = backends.iter().map(|b| b.feature.clone()).collect();
    // The backend features a feature list turns on, following `feature = ["other", …]` links.
    let enabled = |start: &[String]| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = start.to_vec();
        while let Some(f) = todo.pop() {
            if !seen.insert(f.clone()) {
                continue;
            }
            for next in features[&f].as_array().into_iter().flatten() {
                if let Some(next) = next.as_str().filter(|n| features.contains_key(*n)) {
                    todo.push(next.to_owned());
                }
            }
        }
        seen.intersection(&names).cloned().collect()
    };
    let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let mut sets = vec![
        FeatureSet {
            name: "default".into(),
            args: Vec::new(),
            backends: enabled(&["default".to_owned()]),
        },
        FeatureSet {
            name: "none".into(),
            args: owned(&["--no-default-features"]),
            backends: BTreeSet::new(),
        },
    ];
    for b in &backends {
        sets.push(FeatureSet {
            name: format!("{} only", b.feature),
            args: owned(&["--no-default-features", "--features", &b.feature]),
            backends: enabled(std::slice::from_ref(&b.feature)),
        });
    }
    sets.push(FeatureSet {
        name: "all".into(),
        args: owned(&["--all-features"]),
        backends: names,
    });
    Ok((backends, sets))
}

pub fn deps() -> Result<(), String> {
    graphs()?;
    alone()?;
    docs()
}

/// Check 1: which backend clients each feature set of the facade pulls in.
fn graphs() -> Result<(), String> {
    let (backends, sets) = feature_sets()?;
    let mut failures = Vec::new();
    for set in &sets {
        let args: Vec<&str> = set.args.iter().map(String::as_str).collect();
        let graph = normal_graph(FACADE, &args)?;
        for backend in &backends {
            let wanted = set.backends.contains(&backend.feature);
            let found: Vec<&str> = backend
                .clients
                .iter()
                .map(String::as_str)
                .filter(|c| graph.contains(*c))
                .collect();
            if wanted && found.is_empty() {
                failures.push(format!(
                    "{FACADE} [{}]: asks for {} but none of its clients is in the graph \
                     (looked for {}); is the feature wired to its adapter crates?",
                    set.name,
                    backend.feature,
                    backend.clients.join(", ")
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
            "xtask deps: {FACADE} [{}]: {} crates, backends: {}",
            set.name,
            graph.len(),
            if set.backends.is_empty() {
                "none".to_owned()
            } else {
                set.backends.iter().cloned().collect::<Vec<_>>().join(", ")
            }
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

/// A published workspace member, as `cargo metadata` describes it.
pub struct Published {
    pub name: String,
    /// Its `default` feature turns something on, so "no features" is a different build.
    pub has_default_features: bool,
    /// It has features a user may turn on (other than `default`).
    pub has_optional_features: bool,
}

/// Crates whose optional features are test fallbacks nobody reads documentation for (the
/// conformance harness's Docker containers); their docs are built on default features only.
const TEST_ONLY_FEATURES: &[&str] = &["switchyard-conformance"];

/// The workspace members that are published (`publish` not `false`), from `cargo metadata`.
pub fn published_crates() -> Result<Vec<Published>, String> {
    let meta = metadata()?;
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages")?;
    published_of(packages)
}

/// `cargo metadata --no-deps` of the workspace.
fn metadata() -> Result<serde_json::Value, String> {
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
    Ok(meta)
}

/// The published members among `packages`, by name.
fn published_of(packages: &[serde_json::Value]) -> Result<Vec<Published>, String> {
    let mut crates: Vec<Published> = packages
        .iter()
        // `publish: []` is how cargo metadata spells `publish = false`.
        .filter(|p| !matches!(p["publish"].as_array(), Some(registries) if registries.is_empty()))
        .filter_map(|p| {
            let features = p["features"].as_object();
            Some(Published {
                name: p["name"].as_str()?.to_owned(),
                has_default_features: features
                    .and_then(|f| f.get("default"))
                    .and_then(|d| d.as_array())
                    .is_some_and(|d| !d.is_empty()),
                has_optional_features: features.is_some_and(|f| f.keys().any(|k| k != "default")),
            })
        })
        .collect();
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// Check 2: every published crate compiles alone, with its default features and, where those
/// turn something on, with none.
fn alone() -> Result<(), String> {
    for krate in published_crates()? {
        cargo(&["check", "--quiet", "-p", &krate.name])?;
        if krate.has_default_features {
            cargo(&[
                "check",
                "--quiet",
                "-p",
                &krate.name,
                "--no-default-features",
            ])?;
        }
    }
    Ok(())
}

/// Check 3: `cargo doc` without warnings: the workspace on default features, each published
/// crate that has optional features alone on its defaults and all together on all of them
/// (`doc(cfg)` items included).
fn docs() -> Result<(), String> {
    let mut all_features = vec!["doc", "--no-deps", "--quiet", "--all-features"];
    let published = published_crates()?;
    for krate in &published {
        if krate.has_optional_features && !TEST_ONLY_FEATURES.contains(&krate.name.as_str()) {
            all_features.extend(["-p", krate.name.as_str()]);
        }
    }
    // A crate's default features, documented alone: in the workspace build, another member's
    // feature choice (the binary takes the facade with every feature) would hide a link that
    // breaks for a user who depends on the crate with its defaults.
    let mut passes = vec![vec!["doc", "--workspace", "--no-deps", "--quiet"]];
    for krate in &published {
        if krate.has_optional_features && !TEST_ONLY_FEATURES.contains(&krate.name.as_str()) {
            passes.push(vec![
                "doc",
                "--no-deps",
                "--quiet",
                "-p",
                krate.name.as_str(),
            ]);
        }
    }
    passes.push(all_features);
    for args in passes {
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
