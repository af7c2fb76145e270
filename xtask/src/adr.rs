//! `cargo xtask adr new "Title" | index | check`: the decision records in `adr/`.
//!
//! Every record is `adr/NNNN-slug.md` and begins with its heading, a blank line and two lines:
//!
//! ```text
//! # 363. The event store takes the run context and derives the log
//!
//! * Status: accepted; amends 0005, 0252
//! * Date: 2026-12-04
//! ```
//!
//! The status grammar: `* Status: ` then the state, one of `proposed`, `accepted`, `rejected`,
//! `deprecated` or `superseded by NNNN`; then, each at most once and in this order,
//! `; amends NNNN, NNNN`, `; supersedes NNNN` and `; amended by NNNN, NNNN`. ADR numbers are
//! always four digits, separated by `, `; each may carry a short note in parentheses, as in
//! `amended by 0355 (calls fail at once while Redis is down)`. A long status line may wrap onto
//! lines indented by two spaces. The date line is `* Date: YYYY-MM-DD`, the day the record was
//! written. Amendments are written on both sides: when 0363 says `amends 0005`, 0005 says
//! `amended by 0363`; `supersedes` and `superseded by` pair the same way.
//!
//! `index` writes `adr/README.md`, a table of every record built from those lines. `check` fails
//! on a record that breaks the grammar, a heading whose number is not the file's, an amendment
//! written on one side only, a mention of an ADR that does not exist, or a stale `adr/README.md`.

mod record;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use record::Record;

/// `cargo xtask adr …` with the arguments after `adr`.
pub fn command(root: &Path, args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("new") => new(root, &args[1..].join(" ")),
        Some("index") => index(root),
        Some("check") => check(root),
        _ => Err("usage: cargo xtask adr new \"title\" | adr index | adr check".into()),
    }
}

/// A problem in one file, printed as `adr/FILE: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    file: String,
    message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "adr/{}: {}", self.file, self.message)
    }
}

fn problem(file: &str, message: impl Into<String>) -> Problem {
    Problem {
        file: file.to_string(),
        message: message.into(),
    }
}

const INDEX: &str = "README.md";

/// Writes `adr/README.md` from the records' headers.
pub fn index(root: &Path) -> Result<(), String> {
    let dir = root.join("adr");
    let (records, problems) = parse_all(&read_dir(&dir)?);
    if !problems.is_empty() {
        return Err(report("adr index cannot read every record", &problems));
    }
    let path = dir.join(INDEX);
    std::fs::write(&path, render_index(&records))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

/// Fails, naming each file and what to do, unless every record and the index are in order.
pub fn check(root: &Path) -> Result<(), String> {
    let dir = root.join("adr");
    let files = read_dir(&dir)?;
    let (records, mut problems) = parse_all(&files);
    problems.extend(check_references(&files, &records));
    if problems.is_empty() {
        let written = std::fs::read_to_string(dir.join(INDEX)).ok();
        problems.extend(check_index(written.as_deref(), &records));
    }
    if problems.is_empty() {
        eprintln!("xtask: adr check: {} records in order", records.len());
        Ok(())
    } else {
        Err(report("adr check failed", &problems))
    }
}

fn report(what: &str, problems: &[Problem]) -> String {
    let mut out = format!("{what} ({} problems):", problems.len());
    for p in problems {
        let _ = write!(out, "\n  {p}");
    }
    out
}

/// `(file name, text)` of every `.md` file in `adr/` except the index, sorted by name.
fn read_dir(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.ends_with(".md") && name != INDEX {
            let text = std::fs::read_to_string(entry.path())
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            files.push((name, text));
        }
    }
    files.sort();
    Ok(files)
}

/// Parses every file; a file that does not parse contributes problems and no record.
fn parse_all(files: &[(String, String)]) -> (Vec<Record>, Vec<Problem>) {
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for (file, text) in files {
        match record::file_number(file) {
            None => problems.push(problem(
                file,
                "rename it `NNNN-slug.md`: four digits, a dash, lowercase words joined by dashes",
            )),
            Some(n) => {
                if let Some(other) = seen.insert(n, file) {
                    problems.push(problem(
                        file,
                        format!("{other} has the same number {n:04}: give one of them the next free number"),
                    ));
                }
            }
        }
        match record::parse_record(file, text) {
            Ok(r) => records.push(r),
            Err(messages) => problems.extend(messages.into_iter().map(|m| problem(file, m))),
        }
    }
    records.sort_by_key(|r| r.number);
    (records, problems)
}

/// Numbers that exist, and amendments written on both sides.
fn check_references(files: &[(String, String)], records: &[Record]) -> Vec<Problem> {
    // Files that failed to parse still exist: a reference to one is not dangling.
    let exists = |n: u32| files.iter().any(|(f, _)| record::file_number(f) == Some(n));
    let by_number: BTreeMap<u32, &Record> = records.iter().map(|r| (r.number, r)).collect();
    let mut problems = Vec::new();
    for r in records {
        let s = &r.status;
        let clauses: [(&str, &[u32]); 4] = [
            ("superseded by", &s.superseded_by),
            ("amends", &s.amends),
            ("supersedes", &s.supersedes),
            ("amended by", &s.amended_by),
        ];
        for (clause, numbers) in clauses {
            for &n in numbers {
                if n == r.number {
                    problems.push(problem(
                        &r.file,
                        format!("the status says `{clause} {n:04}`, this record itself: drop it"),
                    ));
                } else if !exists(n) {
                    problems.push(problem(&r.file, format!("the status says `{clause} {n:04}`, but there is no ADR {n:04}: fix the number or drop it")));
                }
            }
        }
        for &(line, n) in &r.mentions {
            if !exists(n) {
                problems.push(problem(
                    &r.file,
                    format!("line {line} mentions ADR {n}, which does not exist: fix the number"),
                ));
            }
        }
        // Each clause must be answered by its mirror in the other record.
        let pairs: [(&[u32], &str, &str, MirrorList); 4] = [
            (&s.amends, "amends", "amended by", |o| &o.status.amended_by),
            (&s.amended_by, "amended by", "amends", |o| &o.status.amends),
            (&s.supersedes, "supersedes", "superseded by", |o| {
                &o.status.superseded_by
            }),
            (&s.superseded_by, "superseded by", "supersedes", |o| {
                &o.status.supersedes
            }),
        ];
        for (numbers, said, mirror, mirror_of) in pairs {
            for &n in numbers {
                let Some(other) = by_number.get(&n) else {
                    continue;
                };
                if n != r.number && !mirror_of(other).contains(&r.number) {
                    problems.push(problem(
                        &other.file,
                        format!(
                            "{} says `{said} {n:04}`, but this record's status does not say `{mirror} {:04}`: add it here (or, if {0} is wrong, drop it there)",
                            r.file, r.number
                        ),
                    ));
                }
            }
        }
    }
    problems
}

/// Picks, from the other record, the list that must name this one.
type MirrorList = fn(&Record) -> &[u32];

fn check_index(written: Option<&str>, records: &[Record]) -> Vec<Problem> {
    match written {
        None => vec![problem(
            INDEX,
            "missing: run `cargo xtask adr index` and commit it",
        )],
        Some(text) if text != render_index(records) => vec![problem(
            INDEX,
            "stale, it is not what the records' headers say now: run `cargo xtask adr index` and commit it",
        )],
        Some(_) => Vec::new(),
    }
}

/// The index: a table of every record. Deterministic, so `check` can compare it byte for byte.
fn render_index(records: &[Record]) -> String {
    let files: BTreeMap<u32, &str> = records
        .iter()
        .map(|r| (r.number, r.file.as_str()))
        .collect();
    let links = |numbers: &[u32]| -> Vec<String> {
        let mut numbers = numbers.to_vec();
        numbers.sort_unstable();
        numbers
            .iter()
            .map(|n| match files.get(n) {
                Some(file) => format!("[{n:04}]({file})"),
                None => format!("{n:04}"),
            })
            .collect()
    };
    let cell = |plain: &[u32], replaced_word: &str, replaced: &[u32]| -> String {
        let mut parts = links(plain);
        if !replaced.is_empty() {
            parts.push(format!("{replaced_word} {}", links(replaced).join(", ")));
        }
        parts.join(", ")
    };

    let mut out = String::new();
    out.push_str(
        "<!-- Generated by `cargo xtask adr index` from the records' status and date lines; do \
         not edit by hand. `cargo xtask adr check` fails when it is stale. -->\n\n",
    );
    out.push_str("# Architecture decision records\n\n");
    out.push_str(
        "One file per decision, `NNNN-slug.md`; `cargo xtask adr new \"Title\"` starts the next \
         one. After adding or changing a record, run `cargo xtask adr index` to rewrite this \
         table.\n\n",
    );
    out.push_str(GRAMMAR);
    out.push_str("\n\n| ADR | Title | Status | Date | Amends | Amended by |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for r in records {
        let s = &r.status;
        let _ = writeln!(
            out,
            "| {:04} | [{}]({}) | {} | {} | {} | {} |",
            r.number,
            r.title.replace('|', "\\|"),
            r.file,
            s.state.word(),
            r.date,
            cell(&s.amends, "supersedes", &s.supersedes),
            cell(&s.amended_by, "superseded by", &s.superseded_by),
        );
    }
    out
}

/// The grammar as the index states it (the module's doc comment says the same).
const GRAMMAR: &str = "Each record starts with `# N. Title`, a blank line, then \
    `* Status: …` and `* Date: YYYY-MM-DD` (the day it was written). The status is one of `proposed`, `accepted`, \
    `rejected`, `deprecated` or `superseded by NNNN`, followed, each at most once and in \
    this order, by `; amends NNNN, NNNN`, `; supersedes NNNN` and `; amended by NNNN, NNNN`: \
    for example `* Status: accepted; amends 0005, 0252; amended by 0363`. ADR numbers are \
    always four digits; each may carry a short note in parentheses, and a long line may wrap \
    onto lines indented by two spaces. Amendments are written on both sides: when 0363 says \
    `amends 0005`, 0005 says `amended by 0363` (`supersedes` and `superseded by` pair the \
    same way). `cargo xtask adr check` enforces all of this.";

/// Starts the next record, `proposed`, dated today, and refreshes the index.
fn new(root: &Path, title: &str) -> Result<(), String> {
    if title.trim().is_empty() {
        return Err("adr new needs a title".into());
    }
    let dir = root.join("adr");
    let next = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.get(..4)?.parse::<u32>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let slug: String = title
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let path = dir.join(format!("{next:04}-{slug}.md"));
    let body = format!(
        "# {next}. {title}\n\n* Status: proposed\n* Date: {}\n\n## Context\n\n## Decision\n\n## Consequences\n",
        today()
    );
    std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{}", path.display());
    // The new record belongs in the table; a failure here (another record broken) is only reported.
    if let Err(e) = index(root) {
        eprintln!("xtask: {e}");
    }
    Ok(())
}

fn today() -> String {
    std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".into(), |s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(number: u32, status: &str) -> (String, String) {
        (
            format!("{number:04}-record-{number}.md"),
            format!(
                "# {number}. Record {number}\n\n* Status: {status}\n* Date: 2026-12-01\n\n## Context\n"
            ),
        )
    }

    fn problems_of(files: &[(String, String)]) -> Vec<String> {
        let (records, mut problems) = parse_all(files);
        problems.extend(check_references(files, &records));
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn agreeing_records_pass() {
        let files = [
            file(5, "accepted; amended by 0363"),
            file(55, "superseded by 0095"),
            file(95, "accepted; supersedes 0055"),
            file(363, "accepted; amends 0005"),
        ];
        assert_eq!(problems_of(&files), Vec::<String>::new());
    }

    #[test]
    fn an_amendment_on_one_side_is_named_where_it_is_missing() {
        let files = [file(5, "accepted"), file(363, "accepted; amends 0005")];
        assert_eq!(
            problems_of(&files),
            vec![
                "adr/0005-record-5.md: 0363-record-363.md says `amends 0005`, but this record's status does not say `amended by 0363`: add it here (or, if 0363-record-363.md is wrong, drop it there)"
            ]
        );
        let files = [file(5, "accepted; amended by 0363"), file(363, "accepted")];
        let p = problems_of(&files);
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("adr/0363-record-363.md: 0005-record-5.md says `amended by 0363`")
        );
        assert!(p[0].contains("does not say `amends 0005`"));
    }

    #[test]
    fn supersession_pairs_with_supersession_only() {
        let files = [
            file(55, "superseded by 0095"),
            file(95, "accepted; amends 0055"),
        ];
        let p = problems_of(&files);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p.iter()
                .any(|m| m.contains("does not say `supersedes 0055`"))
        );
        assert!(
            p.iter()
                .any(|m| m.contains("does not say `amended by 0095`"))
        );
    }

    #[test]
    fn missing_numbers_and_self_references() {
        let files = [file(5, "accepted; amends 0004")];
        let p = problems_of(&files);
        assert_eq!(
            p,
            vec![
                "adr/0005-record-5.md: the status says `amends 0004`, but there is no ADR 0004: fix the number or drop it"
            ]
        );
        let files = [file(5, "accepted; amends 0005")];
        assert!(problems_of(&files)[0].contains("this record itself"));
        let mut files = [file(5, "accepted")];
        files[0].1.push_str("\nAs ADR 6 said.\n");
        assert_eq!(
            problems_of(&files),
            vec![
                "adr/0005-record-5.md: line 8 mentions ADR 6, which does not exist: fix the number"
            ]
        );
    }

    #[test]
    fn a_broken_record_still_exists_for_references() {
        let mut broken = file(5, "accepted");
        broken.1 = broken.1.replace("* Date: 2026-12-01\n", "");
        let files = [broken, file(6, "accepted; amends 0005")];
        let p = problems_of(&files);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("no date line"));
    }

    #[test]
    fn file_names_and_duplicate_numbers() {
        let mut odd = file(5, "accepted");
        odd.0 = "notes.md".into();
        assert!(
            problems_of(&[odd])
                .iter()
                .any(|m| m.contains("rename it `NNNN-slug.md`"))
        );
        let twin = ("0005-twin.md".to_string(), file(5, "accepted").1);
        let p = problems_of(&[file(5, "accepted"), twin]);
        assert!(
            p.iter().any(|m| m.contains("has the same number 0005")),
            "{p:?}"
        );
    }

    #[test]
    fn the_index_is_a_table_and_staleness_is_caught() {
        let files = [
            file(54, "superseded by 0211; amended by 0177"),
            file(177, "accepted; amends 0054"),
            file(211, "accepted; supersedes 0054"),
        ];
        let (records, problems) = parse_all(&files);
        assert!(problems.is_empty());
        let index = render_index(&records);
        assert!(index.starts_with("<!-- Generated by `cargo xtask adr index`"));
        assert!(index.contains(
            "| 0054 | [Record 54](0054-record-54.md) | superseded | 2026-12-01 |  | [0177](0177-record-177.md), superseded by [0211](0211-record-211.md) |\n"
        ));
        assert!(index.contains("| 0211 | [Record 211](0211-record-211.md) | accepted | 2026-12-01 | supersedes [0054](0054-record-54.md) |  |\n"));
        assert_eq!(render_index(&records), index, "deterministic");
        assert!(check_index(Some(&index), &records).is_empty());
        assert!(
            check_index(Some(&index.replace("0177", "0178")), &records)[0]
                .message
                .contains("stale")
        );
        assert!(check_index(None, &records)[0].message.contains("missing"));
    }
}
