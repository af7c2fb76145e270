//! The harness end to end on one tiny case (structure only: timings are never asserted).

use std::time::Duration;

use switchyard_bench::{Options, Report, Suite, run, write_docs, write_outputs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_run_of_one_case_reports_floor_and_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        suites: vec![Suite::StoreSqlite],
        only: Some("append, 1 writer".into()),
        quick: true,
        case_time: Some(Duration::from_millis(50)),
        sqlite_dir: Some(dir.path().join("db")),
        ..Options::default()
    };
    let report = run(options).await.expect("run");

    // The SQLite floor ran, and exactly the one case asked for.
    let names: Vec<(&str, &str)> = report
        .cases
        .iter()
        .map(|c| (c.suite.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("floor", "floor: SQLite 1-row write transaction"),
            ("store", "append, 1 writer, 1 event per call"),
        ]
    );
    let case = report
        .case("sqlite", "append, 1 writer, 1 event per call")
        .expect("the case");
    assert!(case.ops > 0, "it appended");
    assert_eq!(case.errors, 0, "{}", case.note);
    assert!(case.p50_ms.is_some() && case.p99_ms.is_some());
    assert!(case.p50_ms <= case.p99_ms);
    assert!(case.ratio.is_some(), "compared with the floor");
    assert!(
        case.target.is_some() && case.met.is_some(),
        "judged against its target"
    );
    assert!(report.machine.sqlite_version.is_some());
    assert!(
        report.machine.redis_version.is_none(),
        "no Redis suite, no Redis"
    );
    assert!(report.machine.nproc >= 1);

    // Markdown has a header and one row per case; JSON round-trips.
    let md = report.to_markdown();
    assert_eq!(md.lines().filter(|l| l.starts_with("| floor")).count(), 1);
    assert_eq!(md.lines().filter(|l| l.starts_with("| store")).count(), 1);
    let back: Report = serde_json::from_str(&report.to_json()).expect("json");
    assert_eq!(back, report);

    let out = dir.path().join("out");
    let latest = write_outputs(&report, &out).expect("write");
    assert_eq!(std::fs::read_to_string(latest).expect("md"), md);
    assert!(out.join("latest.json").exists());
    let docs = dir.path().join("docs/benchmarks.md");
    write_docs(&report, &docs).expect("docs");
    let page = std::fs::read_to_string(docs).expect("page");
    assert!(page.starts_with("# Benchmarks"));
    assert!(page.contains("append, 1 writer, 1 event per call"));
}

/// The enqueue hand-off case on SQLite: one row, judged against its target, every run started in
/// line order (structure only: the timing is not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_off_case_reports_its_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        suites: vec![Suite::StoreSqlite],
        only: Some("hand-off".into()),
        quick: true,
        case_time: Some(Duration::from_millis(50)),
        sqlite_dir: Some(dir.path().join("db")),
        ..Options::default()
    };
    let report = run(options).await.expect("run");
    let name = "enqueue hand-off (previous run ends → next run started)";
    let case = report.case("sqlite", name).expect("the hand-off case");
    assert_eq!(case.errors, 0, "{}", case.note);
    // At least one round of 32 hand-offs, each timed.
    assert!(case.ops >= 32, "{} hand-offs", case.ops);
    assert!(case.p50_ms.is_some() && case.p50_ms <= case.p99_ms);
    assert_eq!(case.target.as_deref(), Some("p50 ≤ 5 ms"));
    assert!(case.met.is_some());
    assert!(
        case.note.contains("every run started once, in line order"),
        "{}",
        case.note
    );
    assert_eq!(
        report.cases.iter().filter(|c| c.suite == "store").count(),
        1,
        "only the case asked for"
    );
}

#[test]
fn every_suite_has_a_name_that_parses_back() {
    for suite in Suite::ALL {
        assert_eq!(Suite::parse(suite.name()), Some(suite), "{suite:?}");
    }
    assert_eq!(Suite::parse("store-memory"), Some(Suite::StoreMemory));
}
