//! Operator commands: runs, queues and workers, read and repaired through a gateway (`--server`,
//! SWITCHYARD_SERVER, config `server`) with a bearer token, or straight from the backends when no
//! gateway runs (`--url`, or the configuration's backends). ADR 0240.
//!
//! Exit codes (documented in docs/operations.md): 0 done; 1 failed (unreachable, unavailable,
//! invalid); 2 command-line misuse; 3 `runs tail` hit a gap; 4 not found (no such run, unknown
//! queue, no database file, no token file, no such task); 5 refused by the gateway (token missing,
//! unknown or out of scope); 6 `task wait` ran out of time before the task ended.

mod flow;
mod remote;
mod run_control;
mod source;
mod table;
mod tail;
mod tasks;
mod webhooks;

pub use run_control::CancelArgs;

use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Args;
use comfy_table::Cell;
use serde_json::{Value, json};
use switchyard_kit::core::{Error, Priority, Result, RunContext};
use switchyard_kit::{BackendUrl, Config, Port};

use crate::OpArgs;
use crate::backends;
pub use flow::{
    TaskSubmit, Verb, json_arg, seconds_delay, seconds_per, seconds_visibility, seconds_wait,
};
use source::{Direct, Source};
use switchyard_client::Client;
use switchyard_service::queues::parse_priority_text;
use table::{Style, raw};
pub use tasks::retention_setting;
pub use webhooks::WebhookCreate;

/// `runs tail` reached a gap: the events after the cursor are no longer retained.
pub const GAP: u8 = 3;
/// No such run, queue, database file or token file.
pub const NOT_FOUND: u8 = 4;
/// The gateway refused the token (401) or its scope (403).
pub const REFUSED: u8 = 5;

/// How operator commands reach a gateway (global options).
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The gateway to ask, e.g. `http://127.0.0.1:8080` (also SWITCHYARD_SERVER, config
    /// `server`); operator commands then need a URL and a token, never the backends' credentials.
    #[arg(long, global = true, env = "SWITCHYARD_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// A file whose first line is the gateway token's secret (else SWITCHYARD_TOKEN).
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A PEM certificate to trust for an `https://` server, besides the system's roots (a
    /// self-signed gateway).
    #[arg(long, global = true, value_name = "PEM")]
    pub server_ca: Option<PathBuf>,
}

/// Why an operator command stopped: a backend's error (exit 1), or a message and its exit code.
#[derive(Debug)]
pub enum Failure {
    Core(Error),
    Exit { code: u8, message: String },
}

impl Failure {
    pub fn exit(code: u8, message: impl Into<String>) -> Self {
        Failure::Exit {
            code,
            message: message.into(),
        }
    }

    /// Prints the message on stderr and gives the exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Core(e) => {
                eprintln!("switchyard: {e}");
                ExitCode::FAILURE
            }
            Failure::Exit { code, message } => {
                eprintln!("switchyard: {message}");
                ExitCode::from(code)
            }
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

/// The service's refusals as the commands report them: a broken rule is the backends' invalid
/// input (exit 1, as a port's refusal of the same input), a missing thing exit 4.
impl From<switchyard_service::Error> for Failure {
    fn from(e: switchyard_service::Error) -> Self {
        use switchyard_service::Error as S;
        match e {
            S::Invalid { field, message, .. } => {
                // The message names the field already; the core error's text names it once.
                let prefix = format!("`{field}` ");
                let reason = message
                    .strip_prefix(&prefix)
                    .unwrap_or(&message)
                    .to_string();
                Failure::Core(Error::InvalidInput { field, reason })
            }
            S::NotFound { message, .. } => Failure::exit(NOT_FOUND, message),
            S::Backend(e) => Failure::Core(e),
            other => Failure::exit(1, other.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Core(e) => write!(f, "{e}"),
            Failure::Exit { message, .. } => f.write_str(message),
        }
    }
}

pub fn context(
    run: &str,
    session: Option<String>,
    namespace: Option<String>,
) -> Result<RunContext> {
    let mut ctx = RunContext::new(run);
    if let Some(s) = session {
        ctx = ctx.with_session(s);
    }
    if let Some(n) = namespace {
        ctx = ctx.with_namespace(n)?;
    }
    Ok(ctx)
}

/// A tier's name on the wire.
pub fn tier(priority: Priority) -> &'static str {
    match priority {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// The attempt a listed task was at: the attempt its last failure recorded (`last_error.attempt`,
/// written when a delivery fails, as the gateway's worker API and the consumer do), else the
/// envelope's own `attempt`. The envelope's field is the count it was submitted with, so a letter
/// that died at its third attempt would otherwise show 0.
fn attempt_of(task: &Value) -> Option<&Value> {
    task.get("last_error")
        .and_then(|e| e.get("attempt"))
        .filter(|a| !a.is_null())
        .or_else(|| task.get("attempt"))
}

/// The bytes a REF names, or `None` when it is not base64url.
pub fn ref_bytes(r: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(r.trim_end_matches('=')).ok()
}

pub(crate) fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// The operator commands, with the configuration and the global `--server` options.
#[derive(Debug)]
pub struct Ops {
    pub config: Config,
    server: ServerArgs,
    style: Style,
}

impl Ops {
    pub fn new(config: Config, server: &ServerArgs) -> Self {
        Ops {
            config,
            server: server.clone(),
            style: Style::detect(),
        }
    }

    /// `--server`, SWITCHYARD_SERVER or the config's `server`, in that order.
    fn server_url(&self) -> Option<&str> {
        self.server
            .server
            .as_deref()
            .or(self.config.server.as_deref())
    }

    fn gateway(&self, server: &str) -> std::result::Result<Client, Failure> {
        let token = remote::token(self.server.token_file.as_deref())?;
        remote::connect(server, token, self.server.server_ca.as_deref())
    }

    /// The backends of `--url` when given; else a gateway when one is named; else the
    /// configuration's backends.
    fn source(&self, op: &OpArgs) -> std::result::Result<Source, Failure> {
        match (&op.url, self.server_url()) {
            (None, Some(server)) => Ok(Source::Gateway(self.gateway(server)?)),
            _ => Ok(Source::Direct(Box::new(Direct::new(
                self.config.clone(),
                op.url.clone(),
            )))),
        }
    }

    pub async fn runs_ls(
        &self,
        op: &OpArgs,
        namespace: Option<String>,
        status: Option<String>,
    ) -> std::result::Result<ExitCode, Failure> {
        let runs = self.source(op)?.runs(namespace, status).await?;
        if op.json {
            print_json(&Value::Array(runs));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self.style.table(&["RUN", "LOG", "STATUS"]);
        for r in &runs {
            table.add_row(vec![
                Cell::new(raw(r.get("run_id"))),
                Cell::new(raw(r.get("log_key"))),
                self.style.status(&raw(r.get("status"))),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} run(s)", runs.len());
        Ok(ExitCode::SUCCESS)
    }

    /// Without `--session`, a run that is not its own log is looked up in the run list, so the
    /// README's session runs show by id alone when the id is unambiguous.
    pub async fn runs_show(
        &self,
        op: &OpArgs,
        run: &str,
        session: Option<String>,
        namespace: Option<String>,
        from_seq: u64,
    ) -> std::result::Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let mut found = source
            .run(run, session.clone(), namespace.clone(), from_seq)
            .await?;
        if found.is_none() && session.is_none() {
            let logs: Vec<String> = source
                .runs(namespace.clone(), None)
                .await?
                .iter()
                .filter(|r| r.get("run_id").and_then(Value::as_str) == Some(run))
                .filter_map(|r| r.get("log_key").and_then(Value::as_str).map(str::to_string))
                .collect();
            match logs.as_slice() {
                [log] => {
                    found = source
                        .run(run, Some(log.clone()), namespace, from_seq)
                        .await?
                }
                [] => {}
                many => {
                    return Err(Failure::exit(
                        NOT_FOUND,
                        format!(
                            "run {run:?} is in several sessions ({}); pass --session",
                            many.join(", ")
                        ),
                    ));
                }
            }
        }
        let Some(body) = found else {
            return Err(Failure::exit(
                NOT_FOUND,
                format!(
                    "no run {run:?}{} (`switchyard runs ls` lists them)",
                    session.map_or_else(String::new, |s| format!(" in session {s:?}"))
                ),
            ));
        };
        if op.json {
            print_json(&body);
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "run {}  log {}  status {}",
            raw(body.get("run_id")),
            raw(body.get("log_key")),
            raw(body.get("status"))
        );
        let mut table = self.style.table(&["SEQ", "TIME", "KIND", "PAYLOAD"]);
        for e in body
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // The payload without its kind (a column of its own).
            let mut payload = e
                .get("payload")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            payload.remove("kind");
            table.add_row(vec![
                Cell::new(raw(e.get("seq"))),
                Cell::new(raw(e.get("ts"))),
                Cell::new(raw(e.get("kind"))),
                Cell::new(Value::Object(payload).to_string()),
            ]);
        }
        table::print(&mut table);
        Ok(ExitCode::SUCCESS)
    }

    /// Through a gateway when one is named; on the embedded default (the memory bridge lives in
    /// the gateway process) through the gateway at the configured `listen` address; else from
    /// the shared bridge.
    pub async fn runs_tail(
        &self,
        op: &OpArgs,
        ctx: &RunContext,
        last_event_id: Option<String>,
    ) -> std::result::Result<ExitCode, Failure> {
        match self.source(op)? {
            Source::Gateway(gw) => tail::over_gateway(&gw, ctx, last_event_id, op.json).await,
            Source::Direct(_) => {
                let url = backends::url_for(&self.config, Port::StreamBridge, op.url.as_deref())?;
                if !BackendUrl::parse("stream_bridge", &url)?.is_memory() {
                    return tail::direct(&self.config, &url, ctx, last_event_id, op.json).await;
                }
                if op.url.is_some() {
                    return Err(Failure::exit(
                        1,
                        "a memory:// stream bridge lives inside one gateway process: tail through \
                         the gateway with --server URL, or a shared bridge with --url redis://…",
                    ));
                }
                let server = format!("http://{}", self.config.listen);
                let gw = self.gateway(&server).map_err(|e| {
                    Failure::exit(1, format!("{e} (tailing the embedded default's gateway)"))
                })?;
                tail::over_gateway(&gw, ctx, last_event_id, op.json)
                    .await
                    .map_err(|e| match e {
                        Failure::Exit { code, message } => Failure::Exit {
                            code,
                            message: format!(
                                "{message}\n(the embedded default streams from inside its gateway: \
                                 this tail asked {server}, the configured `listen`; name another \
                                 gateway with --server URL)"
                            ),
                        },
                        other => other,
                    })
            }
        }
    }

    pub async fn queue_ls(&self, op: &OpArgs) -> std::result::Result<ExitCode, Failure> {
        let names = self.source(op)?.queue_names().await?;
        if op.json {
            print_json(&json!(names));
        } else {
            for name in &names {
                println!("{name}");
            }
            eprintln!("{} queue(s)", names.len());
        }
        Ok(ExitCode::SUCCESS)
    }

    /// An empty answer for a queue nobody knows is a misspelt name: exit 4 with the known ones.
    async fn check_known(&self, source: &Source, queue: &str) -> std::result::Result<(), Failure> {
        let names = source.queue_names().await?;
        if names.iter().any(|n| n == queue) {
            return Ok(());
        }
        let known = if names.is_empty() {
            "no queue holds a task".to_string()
        } else {
            let mut shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
            if names.len() > shown.len() {
                shown.push("…");
            }
            format!("queues with tasks: {}", shown.join(", "))
        };
        Err(Failure::exit(
            NOT_FOUND,
            format!(
                "unknown queue {queue:?}: it holds no task in any state ({known}). A queue exists \
                 while it holds tasks; a gateway also knows the queues it watches (`serve \
                 --watch-queue`). `switchyard queue ls` lists them"
            ),
        ))
    }

    pub async fn queue_stats(
        &self,
        op: &OpArgs,
        queue: &str,
    ) -> std::result::Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let stats = source.queue_stats(queue).await?;
        let n = |k: &str| stats.get(k).and_then(Value::as_u64).unwrap_or(0);
        // A paused or limited queue is known even while it holds nothing: its state outlives
        // its tasks.
        let controlled = stats.get("paused").and_then(Value::as_bool) == Some(true)
            || stats.get("rate_limit").is_some_and(|v| !v.is_null());
        if !controlled
            && ["waiting", "in_flight", "scheduled", "dead"]
                .iter()
                .all(|k| n(k) == 0)
        {
            self.check_known(&source, queue).await?;
        }
        if op.json {
            print_json(&stats);
            return Ok(ExitCode::SUCCESS);
        }
        self.print_stats(queue, &stats);
        Ok(ExitCode::SUCCESS)
    }

    /// The stats of `GET /v1/queues/{queue}` for people.
    fn print_stats(&self, queue: &str, stats: &Value) {
        let n = |k: &str| stats.get(k).and_then(Value::as_u64).unwrap_or(0);
        let tier = |k: &str| stats["tiers"].get(k).and_then(Value::as_u64).unwrap_or(0);
        let paused = stats
            .get("paused")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        println!("queue         {queue}");
        println!(
            "state         {}",
            if paused {
                "paused (workers get nothing until `queue resume`)"
            } else {
                "running"
            }
        );
        println!(
            "waiting       {}  (high {}, normal {}, low {})",
            n("waiting"),
            tier("high"),
            tier("normal"),
            tier("low")
        );
        println!(
            "in flight     {}  ({} overdue, back at the next sweep)",
            n("in_flight"),
            n("overdue")
        );
        println!(
            "scheduled     {}  ({} due, back at the next reserve)",
            n("scheduled"),
            n("due")
        );
        println!("dead letters  {}", n("dead"));
        println!(
            "ended         {} completed, {} failed, {} dead-lettered, {} cancelled  (tasks with an id)",
            n("completed"),
            n("failed"),
            n("dead_lettered"),
            n("cancelled")
        );
        match stats.get("rate_limit").filter(|v| !v.is_null()) {
            Some(limit) => {
                let per = limit
                    .get("per_seconds")
                    .and_then(Value::as_f64)
                    .or_else(|| {
                        limit
                            .get("per_ms")
                            .and_then(Value::as_f64)
                            .map(|ms| ms / 1000.0)
                    });
                println!(
                    "rate limit    {} per {} s  (next token in {} ms)",
                    raw(limit.get("max")),
                    per.map_or_else(|| "-".to_string(), |p| p.to_string()),
                    n("throttled_ms")
                );
            }
            None => println!("rate limit    none"),
        }
    }

    /// Tasks as a table; dead letters (`refs`) get their REF last, for `dlq requeue --ref`.
    fn print_tasks(&self, op: &OpArgs, tasks: Vec<Value>, refs: bool) {
        if op.json {
            print_json(&Value::Array(tasks));
            return;
        }
        let headers: &[&str] = if refs {
            &["ID", "ATTEMPT", "PAYLOAD", "REF"]
        } else {
            &["ID", "ATTEMPT", "PAYLOAD"]
        };
        let mut table = self.style.table(headers);
        for t in &tasks {
            let payload = t.get("payload").unwrap_or(t);
            let mut row = vec![
                Cell::new(raw(t.get("id"))),
                Cell::new(raw(attempt_of(t))),
                Cell::new(payload.to_string()),
            ];
            if refs {
                row.push(Cell::new(raw(t.get("ref"))));
            }
            table.add_row(row);
        }
        table::print(&mut table);
        if !refs {
            eprintln!("{} task(s)", tasks.len());
        }
    }

    pub async fn queue_peek(
        &self,
        op: &OpArgs,
        queue: &str,
        limit: u64,
    ) -> std::result::Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let tasks = source.queue_peek(queue, limit).await?;
        if tasks.is_empty() && limit > 0 {
            self.check_known(&source, queue).await?;
        }
        self.print_tasks(op, tasks, false);
        Ok(ExitCode::SUCCESS)
    }

    pub async fn dlq_ls(
        &self,
        op: &OpArgs,
        queue: &str,
        limit: u64,
    ) -> std::result::Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let (tasks, total) = source.dead_letters(queue, limit).await?;
        if total == 0 {
            self.check_known(&source, queue).await?;
        }
        if op.json {
            // The gateway's shape, whichever source answered, so a script reads `total` too.
            print_json(&json!({"queue": queue, "total": total, "dead_letters": tasks}));
            return Ok(ExitCode::SUCCESS);
        }
        let shown = tasks.len();
        self.print_tasks(op, tasks, true);
        if (shown as u64) < total {
            eprintln!("showing {shown} of {total}; --limit N for more (at most 1000)");
        } else {
            eprintln!("{total} dead letter(s)");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// Requeues the oldest dead letters in batches, so a long requeue shows progress and can be
    /// interrupted between batches without losing anything (each batch moves atomically). `verb`
    /// names the count in the output: `requeued`, or `replayed` for the deprecated alias, whose
    /// scripts read that key.
    pub async fn dlq_requeue(
        &self,
        op: &OpArgs,
        queue: &str,
        limit: Option<u64>,
        priority: &str,
        verb: &str,
    ) -> std::result::Result<ExitCode, Failure> {
        const BATCH: u64 = 100;
        let priority = parse_priority_text(priority)?;
        let source = self.source(op)?;
        let (_, dead) = source.dead_letters(queue, 0).await?;
        if dead == 0 {
            self.check_known(&source, queue).await?;
        }
        let total = limit.map_or(dead, |n| n.min(dead));
        let mut done = 0u64;
        while done < total {
            let moved = source
                .requeue(queue, BATCH.min(total - done), priority)
                .await?;
            done = done.saturating_add(moved);
            eprint!("\r{verb} {done}/{total}");
            if moved == 0 {
                break;
            }
        }
        if total > 0 {
            eprintln!();
        }
        if op.json {
            print_json(&json!({"queue": queue, verb: done}));
        } else {
            println!("{verb} {done} dead letter(s) of {queue}");
        }
        Ok(ExitCode::SUCCESS)
    }

    pub async fn workers_ls(
        &self,
        op: &OpArgs,
        automation_type: Option<String>,
    ) -> std::result::Result<ExitCode, Failure> {
        let workers = self.source(op)?.workers(automation_type).await?;
        if op.json {
            print_json(&Value::Array(workers));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self
            .style
            .table(&["TYPE", "WORKER", "STATE", "GEN", "LAST SEEN"]);
        for w in &workers {
            table.add_row(vec![
                Cell::new(raw(w.get("automation_type"))),
                Cell::new(raw(w.get("worker_id"))),
                self.style.status(&raw(w.get("state"))),
                Cell::new(raw(w.get("config_gen"))),
                Cell::new(raw(w.get("last_seen"))),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} worker(s)", workers.len());
        Ok(ExitCode::SUCCESS)
    }
}
