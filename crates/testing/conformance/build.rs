//! Makes the suite macros' case lists and the rustdoc index from `guarantees.toml`, the one
//! declaration of every port's guarantees and their cases (ADR 0362).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The ports of the table: its key, the suite macro, the module holding the cases, the port.
const PORTS: [(&str, &str, &str); 5] = [
    ("event_store", "event_store_suite", "EventStore"),
    ("stream_bridge", "stream_bridge_suite", "StreamBridge"),
    (
        "checkpoint_cache",
        "checkpoint_cache_suite",
        "CheckpointCache",
    ),
    ("fleet", "fleet_backend_suite", "FleetBackend"),
    ("fleet_tasks", "fleet_task_suite", "Tasks"),
];

fn main() {
    println!("cargo:rerun-if-changed=guarantees.toml");
    let text =
        std::fs::read_to_string("guarantees.toml").expect("guarantees.toml next to Cargo.toml");
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|e| panic!("guarantees.toml does not parse: {e}"));
    let mut rust = String::new();
    let mut doc = String::from(
        "Every guarantee of the ports, with its stable slug and the conformance cases that \
         pin it, as `guarantees.toml` declares them (ADR 0362). The suite macros run exactly \
         these cases; `tests/guarantees.rs` fails when a guarantee has no case, a case function \
         is missing from the table, or a port's doc and the table disagree.\n",
    );
    let mut slugs = BTreeSet::new();
    for (key, suite, port) in PORTS {
        let entries = table
            .get(key)
            .and_then(toml::Value::as_array)
            .unwrap_or_else(|| panic!("guarantees.toml has no [[{key}]] entries"));
        let _ = write!(
            doc,
            "\n## `{port}`\n\n| # | slug | guarantee | cases |\n|---|---|---|---|\n"
        );
        let _ = writeln!(
            rust,
            "/// The guarantees of `{port}`, in the order of its list.\npub const {}: &[Guarantee] = &[",
            key.to_uppercase()
        );
        let mut cases = Vec::new();
        for entry in entries {
            let field = |name: &str| {
                entry
                    .get(name)
                    .unwrap_or_else(|| panic!("a [[{key}]] entry lacks `{name}`: {entry}"))
            };
            let slug = field("slug").as_str().expect("slug is a string");
            let number = field("number").as_integer().expect("number is an integer");
            let title = field("title").as_str().expect("title is a string");
            let names: Vec<&str> = field("cases")
                .as_array()
                .expect("cases is a list")
                .iter()
                .map(|c| c.as_str().expect("a case is a function name"))
                .collect();
            assert!(
                slugs.insert(slug.to_owned()),
                "guarantees.toml: slug {slug:?} is declared twice"
            );
            let _ = writeln!(
                rust,
                "    Guarantee {{ slug: {slug:?}, number: {number}, title: {title:?}, cases: &{names:?} }},"
            );
            let listed: Vec<String> = names.iter().map(|c| format!("`{c}`")).collect();
            let _ = writeln!(
                doc,
                "| {number} | `{slug}` | {title} | {} |",
                listed.join(", ")
            );
            for name in names {
                if !cases.contains(&name) {
                    cases.push(name);
                }
            }
        }
        rust.push_str("];\n\n");
        let _ = writeln!(
            rust,
            "#[doc(hidden)]\n#[macro_export]\nmacro_rules! __{suite}_cases {{\n    ($factory:expr) => {{\n        $crate::{suite}!(@cases $factory; {});\n    }};\n}}\n",
            cases.join(", ")
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("guarantees.rs"), rust).expect("write guarantees.rs");
    std::fs::write(out.join("guarantees.md"), doc).expect("write guarantees.md");
}
