//! `switchyard-chaos [--quick] [--scenario client-kill|sigkill|failover|postgres]…`: runs the fault
//! scenarios, prints what each drove and checked, exits non-zero on any violation.

use std::process::ExitCode;

use switchyard_chaos::{Scale, Scenario, run};

const USAGE: &str =
    "usage: switchyard-chaos [--quick] [--scenario client-kill|sigkill|failover|postgres]...";

fn main() -> ExitCode {
    let mut scale = Scale::full();
    let mut scenarios = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => scale = Scale::quick(),
            "--scenario" => match args.next().as_deref().and_then(Scenario::from_name) {
                Some(s) => scenarios.push(s),
                None => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if scenarios.is_empty() {
        scenarios = Scenario::ALL.to_vec();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let reports = runtime.block_on(async {
        let mut out = Vec::new();
        for s in scenarios {
            let r = run(&[s], &scale).await;
            for report in &r {
                println!("{report}");
            }
            out.extend(r);
        }
        out
    });
    let violations: Vec<String> = reports.iter().flat_map(|r| r.violations()).collect();
    let checks: usize = reports
        .iter()
        .flat_map(|r| &r.adapters)
        .map(|a| a.checks.len())
        .sum();
    let ops: u64 = reports
        .iter()
        .flat_map(|r| &r.adapters)
        .map(|a| a.ok + a.errored)
        .sum();
    let faults: u64 = reports.iter().map(|r| r.fault_count).sum();
    println!(
        "== chaos: {} scenarios, {ops} operations, {faults} faults, {checks} checks, {} violations",
        reports.len(),
        violations.len()
    );
    for v in &violations {
        println!("VIOLATION {v}");
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
