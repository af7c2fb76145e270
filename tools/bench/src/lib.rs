#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod commandstats;
mod floor;
mod measure;
mod redis_server;
mod report;
mod suites;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use report::{Case, Machine, Report};
use switchyard_conformance::harness::PostgresServer;

use crate::redis_server::PrivateRedis;

/// A group of cases. Floors run automatically for the backends the chosen suites use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Suite {
    /// Redis event store.
    StoreRedis,
    /// SQLite event store.
    StoreSqlite,
    /// Redis stream bridge.
    Bridge,
    /// Redis fleet backend job queue.
    QueueRedis,
    /// SQLite fleet backend job queue.
    QueueSqlite,
    /// Redis checkpoint cache.
    Cache,
    /// PostgreSQL event store.
    StorePostgres,
    /// The in-process event store: the enqueue hand-off only, the line's cost without I/O.
    StoreMemory,
    /// PostgreSQL fleet backend job queue.
    QueuePostgres,
    /// The `switchyard serve` gateway: HTTP appends and HTTP workers on SQLite and Redis, SSE
    /// clients.
    Gateway,
    /// Through Python: the seeds' own Redis stores against `switchyard-py`'s (ADR 0389).
    Python,
}

impl Suite {
    /// Every suite, in report order.
    pub const ALL: [Suite; 11] = [
        Suite::StoreRedis,
        Suite::StoreSqlite,
        Suite::Bridge,
        Suite::QueueRedis,
        Suite::QueueSqlite,
        Suite::Cache,
        Suite::StorePostgres,
        Suite::StoreMemory,
        Suite::QueuePostgres,
        Suite::Gateway,
        Suite::Python,
    ];

    /// The suite's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::StoreRedis => "store-redis",
            Suite::StoreSqlite => "store-sqlite",
            Suite::Bridge => "bridge",
            Suite::QueueRedis => "queue-redis",
            Suite::QueueSqlite => "queue-sqlite",
            Suite::Cache => "cache",
            Suite::StorePostgres => "store-postgres",
            Suite::StoreMemory => "store-memory",
            Suite::QueuePostgres => "queue-postgres",
            Suite::Gateway => "gateway",
            Suite::Python => "python",
        }
    }

    /// Parses a command-line name (`store` and `queue` are not suites: name the backend).
    pub fn parse(name: &str) -> Option<Suite> {
        Suite::ALL.into_iter().find(|s| s.name() == name.trim())
    }

    fn uses_redis(self) -> bool {
        !matches!(
            self,
            Suite::StoreSqlite
                | Suite::QueueSqlite
                | Suite::StorePostgres
                | Suite::QueuePostgres
                | Suite::StoreMemory
        )
    }

    fn uses_postgres(self) -> bool {
        matches!(self, Suite::StorePostgres | Suite::QueuePostgres)
    }
}

/// What to measure and where. No CLI types: the `switchyard bench` command and the
/// `switchyard-bench` binary both build one.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Suites to run; empty means all.
    pub suites: Vec<Suite>,
    /// Only cases whose name contains this (floors always run).
    pub only: Option<String>,
    /// Shorter measurements and smaller setups; the whole run stays under a minute.
    pub quick: bool,
    /// Overrides the measuring time of every timed case (for tests).
    pub case_time: Option<Duration>,
    /// Redis to measure; `None` starts a private `redis-server` (needs it on `PATH`). Keys are
    /// written under a fresh prefix either way and removed where cheap.
    pub redis_url: Option<String>,
    /// Directory for the SQLite files; `None` uses a temporary directory.
    pub sqlite_dir: Option<PathBuf>,
    /// PostgreSQL to measure (a user that may create schemas); `None` starts a private server
    /// with `initdb` and `pg_ctl`, fsync on. Tables go into a fresh schema either way, dropped at
    /// the end.
    pub postgres_url: Option<String>,
    /// Where [`write_outputs`] saves `bench-<date>.md` / `.json` and `latest.md` / `.json`.
    pub out_dir: Option<PathBuf>,
}

impl Options {
    fn suites(&self) -> Vec<Suite> {
        if self.suites.is_empty() {
            Suite::ALL.to_vec()
        } else {
            Suite::ALL
                .into_iter()
                .filter(|s| self.suites.contains(s))
                .collect()
        }
    }

    fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|f| name.contains(f))
    }
}

/// What the suites share during one run.
pub(crate) struct Ctx {
    pub quick: bool,
    pub case_time: Duration,
    pub redis_url: Option<String>,
    pub prefix: String,
    pub sqlite_dir: PathBuf,
    pub floors: floor::Floors,
    pub only: Option<String>,
    /// The PostgreSQL URL; Postgres suites only run when there is one.
    pub postgres_url: Option<String>,
}

impl Ctx {
    pub fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|f| name.contains(f))
    }

    /// The Redis URL; suites that need Redis are only run when there is one.
    pub fn redis(&self) -> &str {
        self.redis_url
            .as_deref()
            .unwrap_or("redis://127.0.0.1:6379")
    }

    /// The PostgreSQL URL (set whenever a Postgres suite runs).
    pub fn postgres(&self) -> &str {
        self.postgres_url
            .as_deref()
            .unwrap_or("postgres://localhost/postgres")
    }

    /// A fresh schema name of this run for `what` (a store, a queue, the floor).
    pub fn pg_schema(&self, what: &str) -> String {
        format!("{}_{what}", self.prefix)
    }

    /// A scale: `quick` in quick mode, else `full`.
    pub fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// Errors that stop a run before it measures anything (no Redis, no writable directory).
#[derive(Debug)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

/// Runs the chosen suites and their floors; returns the report. A case that fails is reported
/// with its errors, not raised; only setup failures are errors.
pub async fn run(options: Options) -> Result<Report, SetupError> {
    let started = Instant::now();
    let suites = options.suites();
    let needs_redis = suites.iter().any(|s| s.uses_redis());
    let needs_sqlite = suites
        .iter()
        .any(|s| matches!(s, Suite::StoreSqlite | Suite::QueueSqlite));
    let needs_postgres = suites.iter().any(|s| s.uses_postgres());
    let mut machine = Machine {
        nproc: std::thread::available_parallelism().map_or(1, usize::from),
        cpu: cpu_model(),
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        load_before: loadavg(),
        ..Machine::default()
    };

    let mut private = None;
    let redis_url = if !needs_redis {
        None
    } else if let Some(url) = &options.redis_url {
        Some(url.clone())
    } else {
        let server = PrivateRedis::start().map_err(SetupError)?;
        let url = server.url();
        machine.private_redis = true;
        private = Some(server);
        Some(url)
    };
    let mut private_pg = None;
    let postgres_url = if !needs_postgres {
        None
    } else if let Some(url) = &options.postgres_url {
        Some(url.clone())
    } else {
        let server = tokio::task::spawn_blocking(PostgresServer::start_durable)
            .await
            .map_err(|e| SetupError(format!("postgres start: {e}")))?
            .map_err(|e| {
                SetupError(format!(
                    "cannot start a private PostgreSQL (install Debian's `postgresql`, or pass a \
                     URL): {e}"
                ))
            })?;
        let url = server.url();
        machine.private_postgres = true;
        private_pg = Some(server);
        Some(url)
    };
    let temp;
    let sqlite_dir = match &options.sqlite_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| SetupError(format!("{}: {e}", d.display())))?;
            d.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("switchyard-bench-")
                .tempdir()
                .map_err(|e| SetupError(format!("temporary directory: {e}")))?;
            temp.path().to_path_buf()
        }
    };
    let case_time = options.case_time.unwrap_or(if options.quick {
        Duration::from_millis(400)
    } else {
        Duration::from_millis(1500)
    });
    let mut ctx = Ctx {
        quick: options.quick,
        case_time,
        redis_url,
        prefix: format!("bench{:08x}", rand::random::<u32>()),
        sqlite_dir,
        floors: floor::Floors::default(),
        only: options.only.clone(),
        postgres_url,
    };

    let mut cases = Vec::new();
    if let Some(url) = &ctx.redis_url {
        machine.redis_version = floor::redis_version(url).await;
        cases.extend(floor::redis(&mut ctx).await.map_err(SetupError)?);
    }
    if needs_sqlite {
        machine.sqlite_version = floor::sqlite_version().await;
        cases.extend(floor::sqlite(&mut ctx).await.map_err(SetupError)?);
    }
    if needs_postgres {
        machine.postgres_version = floor::postgres_version(ctx.postgres()).await;
        cases.extend(floor::postgres(&mut ctx).await.map_err(SetupError)?);
    }
    for suite in suites {
        let mut got = match suite {
            Suite::StoreRedis => suites::store::redis(&ctx).await,
            Suite::StoreSqlite => suites::store::sqlite(&ctx).await,
            Suite::Bridge => suites::bridge::run(&ctx).await,
            Suite::QueueRedis => {
                let mut cases = suites::queue::redis(&ctx).await;
                cases.extend(suites::batches::redis(&ctx).await);
                cases
            }
            Suite::QueueSqlite => {
                let mut got = suites::queue::sqlite(&ctx).await;
                got.extend(suites::queue_batch::sqlite(&ctx).await);
                got
            }
            Suite::Cache => suites::cache::run(&ctx).await,
            Suite::StorePostgres => suites::store::postgres(&ctx).await,
            Suite::StoreMemory => suites::store::memory(&ctx).await,
            Suite::QueuePostgres => suites::queue::postgres(&ctx).await,
            Suite::Gateway => suites::gateway::run(&ctx).await,
            Suite::Python => suites::python::run(&ctx).await,
        };
        got.retain(|c| options.wants(&c.name));
        cases.extend(got);
    }
    if let (Some(url), false) = (&ctx.redis_url, machine.private_redis) {
        floor::cleanup(url, &ctx.prefix).await;
    }
    if needs_postgres && !machine.private_postgres {
        floor::postgres_cleanup(&ctx).await;
    }
    drop(private);
    if let Some(server) = private_pg {
        let _ = tokio::task::spawn_blocking(move || drop(server)).await;
    }
    machine.load_after = loadavg();
    Ok(Report {
        machine,
        quick: options.quick,
        secs: started.elapsed().as_secs_f64(),
        cases,
    })
}

/// Saves the report under `dir` as `bench-<timestamp>.{md,json}` and `latest.{md,json}`; returns
/// the Markdown path.
pub fn write_outputs(report: &Report, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let stamp: String = report
        .machine
        .date
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let md = report.to_markdown();
    let json = report.to_json();
    std::fs::write(dir.join(format!("bench-{stamp}.md")), &md)?;
    std::fs::write(dir.join(format!("bench-{stamp}.json")), &json)?;
    std::fs::write(dir.join("latest.json"), &json)?;
    let latest = dir.join("latest.md");
    std::fs::write(&latest, &md)?;
    Ok(latest)
}

/// Rewrites the docs page (`docs/benchmarks.md`) with this report.
pub fn write_docs(report: &Report, path: &Path) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, report.docs_page())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}
