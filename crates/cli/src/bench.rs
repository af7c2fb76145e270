//! `switchyard bench`: runs the `switchyard-bench` library (every adapter against the Redis and
//! SQLite floor of the same run), prints the Markdown table and saves it with its JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use switchyard_bench::{Options, Suite};
use switchyard_kit::core::{Error, Result};

/// Options of `switchyard bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The Redis to measure (keys go under a fresh prefix and are removed). Default: a private
    /// `redis-server` started for the run (needs it on PATH).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Shorter measurements and smaller setups (under a minute).
    #[arg(long)]
    pub quick: bool,
    /// Suites to run, comma-separated or repeated: store-redis, store-sqlite, store-memory,
    /// bridge, queue-redis, queue-sqlite, cache, store-postgres, queue-postgres, gateway, python.
    /// Default: all.
    #[arg(long = "suite", value_name = "SUITE", value_delimiter = ',')]
    pub suites: Vec<String>,
    /// Only cases whose name contains this text (floors always run).
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Milliseconds each timed case measures (default 400 with --quick, else 1500).
    #[arg(long, value_name = "MS")]
    pub case_ms: Option<u64>,
    /// Directory for the SQLite files (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub sqlite_dir: Option<PathBuf>,
    /// The PostgreSQL of the postgres suites (a user that may create schemas; the run's schemas
    /// are dropped). Default: a private server started with initdb and pg_ctl.
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
    /// Where the table is saved as `latest.md` / `latest.json` and a dated copy.
    #[arg(long, value_name = "DIR", default_value = "target/bench")]
    pub out: PathBuf,
}

impl BenchArgs {
    /// The library's options for these arguments.
    pub fn options(&self) -> Result<Options> {
        let suites = self
            .suites
            .iter()
            .map(|name| {
                Suite::parse(name).ok_or_else(|| {
                    let known: Vec<&str> = Suite::ALL.iter().map(|s| s.name()).collect();
                    Error::invalid(
                        "--suite",
                        format!("unknown suite {name:?}; use {}", known.join(", ")),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if self.case_ms == Some(0) {
            return Err(Error::invalid("--case-ms", "must be at least 1"));
        }
        Ok(Options {
            suites,
            only: self.only.clone(),
            quick: self.quick,
            case_time: self.case_ms.map(Duration::from_millis),
            redis_url: self.url.clone(),
            sqlite_dir: self.sqlite_dir.clone(),
            postgres_url: self.postgres.clone(),
            out_dir: Some(self.out.clone()),
        })
    }
}

/// Runs the benchmark; the table goes to stdout, progress and the saved path to stderr.
pub async fn run(args: BenchArgs) -> Result<ExitCode> {
    let options = args.options()?;
    eprintln!(
        "measuring{} (load average {})…",
        if options.quick { " (quick)" } else { "" },
        loadavg()
    );
    let report = switchyard_bench::run(options)
        .await
        .map_err(|e| Error::config("bench", e.to_string()))?;
    println!("{}", report.to_markdown());
    match switchyard_bench::write_outputs(&report, &args.out) {
        Ok(path) => eprintln!("saved {} (and .json)", path.display()),
        Err(e) => {
            eprintln!("cannot save to {}: {e}", args.out.display());
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<Options> {
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("parse").bench.options()
    }

    #[test]
    fn arguments_map_onto_the_library_options() {
        let o = parse(&[
            "--url",
            "redis://h:1/2",
            "--quick",
            "--suite",
            "store-sqlite,queue-redis",
            "--suite",
            "cache",
            "--only",
            "append",
            "--case-ms",
            "50",
            "--sqlite-dir",
            "/tmp/d",
            "--out",
            "out",
        ])
        .expect("options");
        assert_eq!(o.redis_url.as_deref(), Some("redis://h:1/2"));
        assert!(o.quick);
        assert_eq!(
            o.suites,
            [Suite::StoreSqlite, Suite::QueueRedis, Suite::Cache]
        );
        assert_eq!(o.only.as_deref(), Some("append"));
        assert_eq!(o.case_time, Some(Duration::from_millis(50)));
        assert_eq!(o.sqlite_dir, Some(PathBuf::from("/tmp/d")));
        assert_eq!(o.out_dir, Some(PathBuf::from("out")));
    }

    #[test]
    fn defaults_run_everything_on_a_private_redis() {
        let o = parse(&[]).expect("options");
        assert!(o.suites.is_empty() && !o.quick && o.only.is_none());
        assert_eq!(o.redis_url, None);
        assert_eq!(o.case_time, None);
        assert_eq!(o.out_dir, Some(PathBuf::from("target/bench")));
    }

    #[test]
    fn bad_values_are_named() {
        for (args, field) in [
            (&["--suite", "store"][..], "--suite"),
            (&["--case-ms", "0"][..], "--case-ms"),
        ] {
            match parse(args) {
                Err(Error::InvalidInput { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
