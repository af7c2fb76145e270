//! `switchyard-bench [--quick] [--url redis://…] [--postgres postgres://…] [--suite a,b]
//! [--only TEXT] [--sqlite-dir DIR] [--out DIR] [--docs FILE]`: runs the benchmarks, prints the Markdown table, saves it with a JSON
//! copy under `--out` (default `target/bench`) and, with `--docs`, rewrites that page.
//! `cargo xtask bench` runs this with `--docs docs/benchmarks.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use switchyard_bench::{Options, Suite, run, write_docs, write_outputs};

const USAGE: &str = "usage: switchyard-bench [--quick] [--url redis://HOST:PORT] [--postgres postgres://USER@HOST/DB] [--suite store-redis,store-sqlite,bridge,queue-redis,queue-sqlite,cache,store-postgres,store-memory,queue-postgres,gateway,python] [--only TEXT] [--case-ms N] [--sqlite-dir DIR] [--out DIR] [--docs FILE]";

fn parse() -> Result<(Options, Option<PathBuf>), String> {
    let mut options = Options {
        out_dir: Some(PathBuf::from("target/bench")),
        ..Options::default()
    };
    let mut docs = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--url" => options.redis_url = Some(value("--url")?),
            "--postgres" => options.postgres_url = Some(value("--postgres")?),
            "--suite" => {
                for name in value("--suite")?.split(',') {
                    options
                        .suites
                        .push(Suite::parse(name).ok_or_else(|| format!("unknown suite {name:?}"))?);
                }
            }
            "--only" => options.only = Some(value("--only")?),
            "--case-ms" => {
                let ms: u64 = value("--case-ms")?
                    .parse()
                    .map_err(|e| format!("--case-ms: {e}"))?;
                options.case_time = Some(Duration::from_millis(ms));
            }
            "--sqlite-dir" => options.sqlite_dir = Some(value("--sqlite-dir")?.into()),
            "--out" => options.out_dir = Some(value("--out")?.into()),
            "--docs" => docs = Some(PathBuf::from(value("--docs")?)),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok((options, docs))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let (options, docs) = match parse() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let out = options.out_dir.clone();
    let report = match run(options).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("switchyard-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report.to_markdown());
    if let Some(dir) = out {
        match write_outputs(&report, &dir) {
            Ok(path) => eprintln!("saved {} (and .json)", path.display()),
            Err(e) => eprintln!("cannot save to {}: {e}", dir.display()),
        }
    }
    if let Some(path) = docs {
        match write_docs(&report, &path) {
            Ok(()) => eprintln!("rewrote {}", path.display()),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
    ExitCode::SUCCESS
}
