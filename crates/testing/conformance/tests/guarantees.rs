//! The table of guarantees (`guarantees.toml`, ADR 0362) agrees with the code it describes: every
//! guarantee has a case, every case function of a suite is in the table (so its macro runs it),
//! every port's doc lists each guarantee under its number and slug, and every slug or case a doc
//! or comment names exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use switchyard_conformance::guarantees::{
    CHECKPOINT_CACHE, EVENT_STORE, FLEET, FLEET_TASKS, Guarantee, STREAM_BRIDGE,
};

/// One port of the table: its guarantees, the suite's case files and the port's doc files.
struct Port {
    name: &'static str,
    guarantees: &'static [Guarantee],
    /// Files (or folders, walked) of the conformance crate holding the port's cases.
    suite: &'static [&'static str],
    /// Files of `switchyard-core` whose docs list the port's guarantees.
    docs: &'static [&'static str],
}

const PORTS: [Port; 5] = [
    Port {
        name: "event_store",
        guarantees: EVENT_STORE,
        suite: &["src/event_store"],
        docs: &["src/store/mod.rs"],
    },
    Port {
        name: "stream_bridge",
        guarantees: STREAM_BRIDGE,
        suite: &["src/stream_bridge"],
        docs: &["src/stream/mod.rs"],
    },
    Port {
        name: "checkpoint_cache",
        guarantees: CHECKPOINT_CACHE,
        suite: &["src/checkpoint_cache.rs"],
        docs: &["src/cache/mod.rs"],
    },
    Port {
        name: "fleet",
        guarantees: FLEET,
        suite: &["src/fleet"],
        docs: &["src/fleet/port.rs", "src/fleet/flow.rs"],
    },
    Port {
        name: "fleet_tasks",
        guarantees: FLEET_TASKS,
        suite: &["src/tasks"],
        docs: &["src/fleet/tasks.rs"],
    },
];

fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_root() -> PathBuf {
    conformance_dir().join("../../..")
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "target" || name.starts_with('.') || name == "node_modules" {
                continue;
            }
            rust_files(&entry, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The `pub async fn` names of a suite's files: its cases, and `run` (the suite's driver).
fn case_functions(port: &Port) -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    for part in port.suite {
        rust_files(&conformance_dir().join(part), &mut files);
    }
    let mut found = BTreeMap::new();
    for file in files {
        for line in read(&file).lines() {
            if let Some(rest) = line.trim_start().strip_prefix("pub async fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != "run" {
                    found.insert(name, file.clone());
                }
            }
        }
    }
    found
}

/// A doc bullet of a guarantee: `N. **Title** (`slug`…`, as `//!` or `///`.
fn bullet(line: &str) -> Option<(u32, String)> {
    let body = line
        .trim_start()
        .strip_prefix("///")
        .or_else(|| line.trim_start().strip_prefix("//!"))?
        .trim_start();
    let (number, rest) = body.split_once(". **")?;
    let number: u32 = number.parse().ok()?;
    let (_title, rest) = rest.split_once("** (`")?;
    let slug: String = rest.chars().take_while(|c| *c != '`').collect();
    Some((number, slug))
}

/// The identifiers in backticks inside `\\[ … \\]` case lists of a doc line; `open` carries a
/// list that goes on over the next lines.
fn named_cases(line: &str, open: &mut bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    loop {
        if !*open {
            let Some(start) = rest.find("\\[") else {
                break;
            };
            rest = &rest[start + 2..];
            *open = true;
        }
        match rest.find("\\]") {
            Some(end) => {
                names.extend(backticked(&rest[..end]));
                rest = &rest[end + 2..];
                *open = false;
            }
            None => {
                names.extend(backticked(rest));
                break;
            }
        }
    }
    names
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_guarantee_has_a_case_and_its_position() {
    for port in &PORTS {
        for (index, g) in port.guarantees.iter().enumerate() {
            assert!(
                !g.cases.is_empty(),
                "{}: guarantee `{}` has no case in guarantees.toml",
                port.name,
                g.slug
            );
            assert_eq!(
                g.number as usize,
                index + 1,
                "{}: `{}` is entry {} of the port's list but says number {}",
                port.name,
                g.slug,
                index + 1,
                g.number
            );
            let (area, rule) = g.slug.split_once('.').unwrap_or(("", ""));
            assert!(
                !area.is_empty()
                    && !rule.is_empty()
                    && g.slug
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.'),
                "{}: slug `{}` is not `area.rule` in lowercase",
                port.name,
                g.slug
            );
        }
    }
}

#[test]
fn every_case_function_is_in_the_table_and_every_listed_case_exists() {
    for port in &PORTS {
        let functions = case_functions(port);
        let listed: BTreeSet<&str> = port
            .guarantees
            .iter()
            .flat_map(|g| g.cases.iter().copied())
            .collect();
        for (name, file) in &functions {
            assert!(
                listed.contains(name.as_str()),
                "{}: case `{name}` ({}) is in no guarantee of guarantees.toml, so the suite macro \
                 never runs it: add it to the guarantee it pins",
                port.name,
                file.display()
            );
        }
        for name in listed {
            assert!(
                functions.contains_key(name),
                "{}: guarantees.toml lists case `{name}`, which is no `pub async fn` of the suite",
                port.name
            );
        }
    }
}

#[test]
fn port_docs_list_every_guarantee_by_number_and_slug() {
    let core = workspace_root().join("crates/core");
    for port in &PORTS {
        let by_slug: BTreeMap<&str, &Guarantee> =
            port.guarantees.iter().map(|g| (g.slug, g)).collect();
        let cases: BTreeSet<&str> = port
            .guarantees
            .iter()
            .flat_map(|g| g.cases.iter().copied())
            .collect();
        let mut documented = BTreeSet::new();
        for doc in port.docs {
            let path = core.join(doc);
            let mut open = false;
            for (index, line) in read(&path).lines().enumerate() {
                let at = format!("{}:{}", path.display(), index + 1);
                if let Some((number, slug)) = bullet(line) {
                    let g = by_slug.get(slug.as_str()).unwrap_or_else(|| {
                        panic!("{at}: the bullet names `{slug}`, which guarantees.toml lacks")
                    });
                    assert_eq!(
                        g.number, number,
                        "{at}: `{slug}` is number {} in guarantees.toml, the doc says {number}",
                        g.number
                    );
                    documented.insert(slug);
                }
                for case in named_cases(line, &mut open) {
                    assert!(
                        cases.contains(case.as_str()),
                        "{at}: the doc names case `{case}`, which is no case of the {} suite",
                        port.name
                    );
                }
            }
        }
        for g in port.guarantees {
            assert!(
                documented.contains(g.slug),
                "{}: guarantee {} `{}` has no bullet `{}. **{}** (`{}`)` in the port's docs",
                port.name,
                g.number,
                g.slug,
                g.number,
                g.title,
                g.slug
            );
        }
    }
}

#[test]
fn every_cited_slug_exists() {
    let slugs: BTreeSet<&str> = PORTS
        .iter()
        .flat_map(|p| p.guarantees.iter().map(|g| g.slug))
        .collect();
    let mut files = Vec::new();
    for dir in ["crates", "tools", "xtask"] {
        rust_files(&workspace_root().join(dir), &mut files);
    }
    let mut cited = 0;
    for file in files {
        for (index, line) in read(&file).lines().enumerate() {
            // A citation is `guarantee `store.dense_seqs`` or a list:
            // `guarantees `kv.entries`, `lock.fenced` and `counter.atomic``.
            let mut rest = line;
            while let Some(at) = rest.find("uarantee") {
                rest = &rest[at + "uarantee".len()..];
                let tail = rest.strip_prefix('s').unwrap_or(rest);
                let Some(list) = tail.strip_prefix(" `") else {
                    continue;
                };
                let list = format!("`{list}");
                let mut tokens = list.as_str();
                while let Some(slug) = tokens.strip_prefix('`') {
                    let Some((slug, after)) = slug.split_once('`') else {
                        break;
                    };
                    // A format string's placeholder (this file's own messages) is not a
                    // citation.
                    if slug.contains('{') {
                        break;
                    }
                    cited += 1;
                    assert!(
                        slugs.contains(slug),
                        "{}:{}: cites guarantee `{slug}`, which guarantees.toml lacks",
                        file.display(),
                        index + 1
                    );
                    tokens = after
                        .strip_prefix(", ")
                        .or_else(|| after.strip_prefix(" and "))
                        .unwrap_or("");
                }
            }
        }
    }
    assert!(
        cited > 50,
        "only {cited} citations found: the scan is broken"
    );
}

#[test]
fn the_scanners_read_what_they_claim() {
    assert_eq!(
        bullet("/// 3. **Atomic batches** (`store.atomic_batches`). A batch"),
        Some((3, "store.atomic_batches".to_owned()))
    );
    assert_eq!(bullet("/// 3. Atomic batches"), None);
    let mut open = false;
    assert_eq!(
        named_cases(
            "/// 1. **Order** (`s.o`) \\[`a_case`, `b_case`\\]. text `not`",
            &mut open
        ),
        vec!["a_case".to_owned(), "b_case".to_owned()]
    );
    assert_eq!(
        named_cases("/// 2. **Gap** \\[`c_case`,", &mut open),
        vec!["c_case".to_owned()]
    );
    assert!(open);
    assert_eq!(
        named_cases("///    `d_case`\\]. See `not`", &mut open),
        vec!["d_case".to_owned()]
    );
    assert!(!open);
}
