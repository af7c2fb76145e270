//! `cargo xtask deps`: guards the promise "pick the crates you need" (ADR 0001).
//!
//! 1. For every feature set of the facade, `cargo tree` must find exactly the backend client crates
//!    that set asks for: the SQLite feature never compiles fred nor sqlx's Postgres driver, the
//!    Redis feature never compiles sqlx, the Postgres feature never compiles fred nor SQLite, no
//!    feature compiles none of them.
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

/// Crates that mean "this graph talks to Redis". (rustls and ring are TLS, shared with the
/// Postgres driver since ADR 0220.)
const REDIS_CLIENTS: &[&str] = &["fred", "redis"];
/// Crates that mean "this graph talks to SQLite".
const SQLITE_CLIENTS: &[&str] = &["sqlx-sqlite", "libsqlite3-sys"];
/// Crates that mean "this graph talks to PostgreSQL".
const POSTGRES_CLIENTS: &[&str] = &["sqlx-postgres"];

struct FeatureSet {
    name: &'static str,
    args: &'static [&'static str],
    redis: bool,
    sqlite: bool,
    postgres: bool,
}

const FEATURE_SETS: &[FeatureSet] = &[
    FeatureSet {
        name: "default",
        args: &[],
        redis: false,
        sqlite: true,
        postgres: false,
    },
    FeatureSet {
        name: "none",
        args: &["--no-default-features"],
        redis: false,
        sqlite: false,
        postgres: false,
    },
    FeatureSet {
        name: "sqlite only",
        args: &["--no-default-features", "--features", "sqlite"],
        redis: false,
        sqlite: true,
        postgres: false,
    },
    FeatureSet {
        name: "redis only",
        args: &["--no-default-features", "--features", "redis"],
        redis: true,
        sqlite: false,
        postgres: false,
    },
    FeatureSet {
        name: "postgres only",
        args: &["--no-default-features", "--features", "postgres"],
        redis: false,
        sqlite: false,
        postgres: true,
    },
    FeatureSet {
        name: "all",
        args: &["--all-features"],
        redis: true,
        sqlite: true,
        postgres: true,
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
            (set.postgres, POSTGRES_CLIENTS, "PostgreSQL"),
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
            "xtask deps: {FACADE} [{}]: {} crates, redis={} sqlite={} postgres={}",
            set.name,
            graph.len(),
            set.redis,
            set.sqlite,
            set.postgres
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
