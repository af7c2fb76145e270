//! The short fault suite of the normal test run: every scenario, small. The full one is
//! `cargo xtask chaos`.

use switchyard_chaos::{Scale, Scenario, ScenarioReport, run_scenario};

fn assert_clean(report: &ScenarioReport) {
    println!("{report}");
    let violations = report.violations();
    assert!(
        violations.is_empty(),
        "violations:\n{}",
        violations.join("\n")
    );
    assert!(
        report.fault_count > 0,
        "the faults happened: {}",
        report.faults
    );
    for a in &report.adapters {
        assert!(a.ok > 0, "{} did some work under the faults", a.adapter);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_kill() {
    assert_clean(&run_scenario(Scenario::ClientKill, &Scale::tiny()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_restart() {
    assert_clean(&run_scenario(Scenario::SigKill, &Scale::tiny()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover() {
    assert_clean(&run_scenario(Scenario::Failover, &Scale::tiny()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_terminate_and_sigkill() {
    assert_clean(&run_scenario(Scenario::Postgres, &Scale::tiny()).await);
}
