//! The console in a real headless Chromium: the real `switchyard` binary on free ports, one
//! browser for the whole binary (starting Chromium is the expensive part), scenarios one after
//! the other. A custom harness (`harness = false`) so the browser is closed once at the end.
//! `cargo test -p switchyard-cli --test console -- <filter>` runs the scenarios whose name
//! contains the filter.

#[allow(dead_code)]
#[path = "../e2e/common.rs"]
mod common;

mod auth;
mod browser;
mod fleet;
mod restart;
mod runs;
mod webhooks;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use browser::Browser;

type Scenario = fn(Arc<Browser>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

const SCENARIOS: [(&str, Scenario); 11] = [
    ("runs_list_and_live_run_page", |b| {
        Box::pin(runs::list_and_live_run_page(b))
    }),
    ("resume_from_two_tabs_one_wins", |b| {
        Box::pin(runs::resume_from_two_tabs_one_wins(b))
    }),
    ("dead_letter_replayed_from_queue_page", |b| {
        Box::pin(fleet::dead_letter_replayed(b))
    }),
    ("dead_letters_chosen_and_queue_paused", |b| {
        Box::pin(fleet::dead_letters_chosen_and_queue_paused(b))
    }),
    ("task_page_and_cancel", |b| {
        Box::pin(fleet::task_page_and_cancel(b))
    }),
    ("finished_tasks_filtered_and_dead_letters_readable", |b| {
        Box::pin(fleet::finished_tasks_filtered_and_dead_letters_readable(b))
    }),
    ("auth_wrong_token_refused_right_one_scoped", |b| {
        Box::pin(auth::wrong_token_refused_right_one_scoped(b))
    }),
    ("gateway_restart_mid_stream_on_redis", |b| {
        Box::pin(restart::gateway_restart_mid_stream(b))
    }),
    ("gap_reloads_from_the_store", |b| {
        Box::pin(restart::gap_reloads_from_the_store(b))
    }),
    ("webhooks_page_lists_subscriptions_and_deliveries", |b| {
        Box::pin(webhooks::webhooks_page_lists_subscriptions_and_deliveries(
            b,
        ))
    }),
    ("session_line_and_cancel_from_run_page", |b| {
        Box::pin(webhooks::session_line_and_cancel_from_run_page(b))
    }),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // libtest's flags are accepted and ignored; the words left are name filters.
    let mut filters: Vec<&String> = Vec::new();
    let mut skip_value = false;
    for arg in &args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if ["--test-threads", "--skip", "--color", "--format", "-Z"].contains(&arg.as_str()) {
            skip_value = true;
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    let chosen: Vec<&(&str, Scenario)> = SCENARIOS
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let failed = runtime.block_on(async {
        if chosen.is_empty() {
            return Vec::new();
        }
        let browser = Arc::new(Browser::start().await);
        let mut failed = Vec::new();
        println!("\nrunning {} console scenarios", chosen.len());
        for (name, scenario) in chosen {
            browser.reset().await;
            // Its own task, so a failed assertion is reported and the next scenario still runs.
            let outcome = tokio::spawn(scenario(browser.clone())).await;
            match outcome {
                Ok(()) => println!("test {name} ... ok"),
                Err(e) => {
                    println!("test {name} ... FAILED ({e})");
                    failed.push(*name);
                }
            }
        }
        if let Ok(browser) = Arc::try_unwrap(browser) {
            browser.close().await;
        }
        failed
    });
    if failed.is_empty() {
        println!("\ntest result: ok");
        ExitCode::SUCCESS
    } else {
        println!("\ntest result: FAILED: {failed:?}");
        ExitCode::FAILURE
    }
}
