//! `switchyard`: a reference HTTP + SSE gateway over any switchyard backend (`serve`), and operator
//! commands that read and repair runs, queues and workers through a gateway (`--server`) or
//! straight from a backend URL (ADR 0240).

mod backends;
#[cfg(feature = "bench")]
mod bench;
mod ops;
mod serve;
mod telemetry;
mod token;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

/// mimalloc instead of the system allocator: under the gateway's load, glibc's malloc took
/// about a quarter of its CPU, half of it waiting on its arena locks (ADR 0349).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The persistence and coordination layer for agent platforms: gateway and operator commands.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about)]
struct Cli {
    #[command(flatten)]
    backends: backends::BackendArgs,
    #[command(flatten)]
    server: ops::ServerArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the HTTP + SSE gateway (embedded default: one SQLite file, memory bridge).
    Serve(serve::ServeArgs),
    /// Runs: list, show, tail, the line of a session, cancel.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Job queues: list, stats, peek, pause, rate limits, in-flight tasks, the worker verbs,
    /// dead letters.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Tasks: submit now, after a delay or at a time (through a gateway); show, wait for and
    /// cancel a task by id.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Recurring schedules (through a gateway): list, show, store, delete.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Webhook subscriptions to run and task ends (through a gateway): create, list, delete,
    /// and each one's delivery log.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// The worker registry.
    #[command(subcommand)]
    Workers(WorkersCommand),
    /// Gateway tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Prints the shell completion script (e.g. `switchyard completions bash >
    /// /etc/bash_completion.d/switchyard`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Prints the man page in roff (`switchyard man > switchyard.1`).
    Man,
    /// Prints the gateway's OpenAPI 3.1 document, as `GET /openapi.json` serves it, without
    /// starting a gateway (`switchyard openapi > openapi.json`; the TypeScript client's types
    /// are generated from it).
    Openapi,
    /// Measures every adapter against the Redis and SQLite floor of this machine; prints the
    /// Markdown table and saves it (with JSON) under --out.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
}

/// Options of the commands that only a gateway answers (worker verbs, submits, schedules):
/// they hold receipts, build envelopes or validate schedules where the gateway does (ADR 0310).
#[derive(Debug, Clone, Args)]
pub struct GwArgs {
    /// Prints JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options every operator command shares.
#[derive(Debug, Clone, Args)]
pub struct OpArgs {
    /// Backend URL of the port this command reads, opened directly instead of asking a gateway
    /// (overrides --server, --config and --redis for it).
    #[arg(long)]
    pub url: Option<String>,
    /// Prints JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Lists runs with their status.
    Ls {
        /// The namespace (none by default).
        #[arg(long)]
        namespace: Option<String>,
        /// Only runs in this status (running, paused, waiting_human, completed, failed, cancelled).
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Shows one run's events and status.
    Show {
        /// The run id.
        run: String,
        /// The run's session, if it has one (its log key).
        #[arg(long)]
        session: Option<String>,
        /// The namespace (none by default).
        #[arg(long)]
        namespace: Option<String>,
        /// Only events with seq >= this.
        #[arg(long, default_value_t = 0)]
        from_seq: u64,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Lists the runs waiting for a session (claimed with `multitask_strategy: enqueue`), the
    /// next to start first.
    Line {
        /// The session.
        session: String,
        /// The namespace (none by default).
        #[arg(long)]
        namespace: Option<String>,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Cancels a run: its worker is told at once (the run's signals), and the run ends
    /// cancelled when it confirms or when the grace period runs out; a waiting run leaves its
    /// session's line.
    Cancel {
        /// The run id.
        run: String,
        /// The run's session, if it has one.
        #[arg(long)]
        session: Option<String>,
        /// The namespace (none by default).
        #[arg(long)]
        namespace: Option<String>,
        /// Why (stored with the request and the run's end).
        #[arg(long)]
        reason: Option<String>,
        /// Seconds the worker has to confirm (default 30, at most 3600; 0 ends the run now).
        #[arg(long)]
        grace: Option<u64>,
        /// The queue task carrying the run, as QUEUE/ID: cancelled with it.
        #[arg(long)]
        task: Option<String>,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Follows a run's live stream until its end (exit code 3 on a gap), reconnecting with the
    /// last event id when the connection drops.
    Tail {
        /// The run id.
        run: String,
        /// The run's session, if it has one (part of its stream's address).
        #[arg(long)]
        session: Option<String>,
        /// The namespace (none by default).
        #[arg(long)]
        namespace: Option<String>,
        /// Resume after this event id (as an SSE client's Last-Event-ID).
        #[arg(long)]
        last_event_id: Option<String>,
        #[command(flatten)]
        op: OpArgs,
    },
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Lists the queues that hold tasks (and, through a gateway, those it watches).
    Ls {
        #[command(flatten)]
        op: OpArgs,
    },
    /// Every count of a queue from one snapshot: waiting per tier, in flight (overdue),
    /// scheduled (due), dead letters.
    Stats {
        /// The queue.
        queue: String,
        #[command(flatten)]
        op: OpArgs,
    },
    /// The next waiting tasks, in serve order.
    Peek {
        /// The queue.
        queue: String,
        /// How many.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(..=1000))]
        limit: u64,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Pauses reservations: workers get nothing until `queue resume`; submits are still taken
    /// and tasks already handed out can still be acked.
    Pause {
        /// The queue.
        queue: String,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Resumes reservations of a paused queue.
    Resume {
        /// The queue.
        queue: String,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Sets the queue's rate limit (`--max N --per SECONDS`: at most N reservations per
    /// SECONDS, across every worker) or removes it (`--off`); prints the queue's stats.
    RateLimit {
        /// The queue.
        queue: String,
        /// Reservations per interval (also the burst a rested queue allows).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..), required_unless_present = "off", requires = "per")]
        max: Option<u32>,
        /// The interval in seconds (0.001 to 86400).
        #[arg(long, value_name = "SECONDS", value_parser = ops::seconds_per, requires = "max")]
        per: Option<f64>,
        /// Removes the limit.
        #[arg(long, conflicts_with_all = ["max", "per"])]
        off: bool,
        #[command(flatten)]
        op: OpArgs,
    },
    /// The tasks workers hold now, soonest deadline first, with their last progress.
    InFlight {
        /// The queue.
        queue: String,
        /// How many.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(..=1000))]
        limit: u64,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Reserves tasks as a worker does and prints them with their receipts (through a gateway).
    Reserve {
        /// The queue.
        queue: String,
        /// How many at most (1 to 100).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
        max: u64,
        /// Seconds the tasks stay reserved before they go back to the queue (at most 43200).
        #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = ops::seconds_visibility)]
        visibility: f64,
        /// Seconds to wait for a task when none is due (at most 30).
        #[arg(long, value_name = "SECONDS", default_value_t = 0.0, value_parser = ops::seconds_wait)]
        wait: f64,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Acks a reserved task: it is done.
    Ack {
        /// The queue.
        queue: String,
        /// The receipt `queue reserve` printed.
        receipt: String,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Gives a reserved task back to the queue as it was delivered, now or after a delay.
    Nack {
        /// The queue.
        queue: String,
        /// The receipt `queue reserve` printed.
        receipt: String,
        /// Seconds before it can be reserved again.
        #[arg(long, value_name = "SECONDS", value_parser = ops::seconds_delay)]
        delay: Option<f64>,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Fails a reserved task into the dead letters, with the reason kept in its envelope.
    Fail {
        /// The queue.
        queue: String,
        /// The receipt `queue reserve` printed.
        receipt: String,
        /// Why it failed (kept as the envelope's `last_error.message`).
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Extends a reservation: the task stays reserved for SECONDS from now.
    Extend {
        /// The queue.
        queue: String,
        /// The receipt `queue reserve` printed.
        receipt: String,
        /// Seconds from now (at most 43200).
        #[arg(long, value_name = "SECONDS", value_parser = ops::seconds_visibility)]
        visibility: f64,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Reports progress on a reserved task: a JSON document (at most 64 KiB), `-` reads stdin.
    Progress {
        /// The queue.
        queue: String,
        /// The receipt `queue reserve` printed.
        receipt: String,
        /// The progress as JSON, e.g. `{"done": 40, "of": 100}`; `-` reads it from stdin.
        progress: String,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// What the queue keeps of finished tasks and of its end events; `--set` changes it.
    Retention {
        /// The queue.
        queue: String,
        /// Sets one field, e.g. `completed.count=100`, `failed.age_seconds=3600`,
        /// `events.count=10000` (kinds: completed, failed, events; fields: count, age_seconds).
        #[arg(long, value_name = "KIND.FIELD=VALUE", value_parser = ops::retention_setting)]
        set: Vec<(String, String, f64)>,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Dead letters.
    #[command(subcommand)]
    Dlq(DlqCommand),
}

#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// Submits a task: its payload is JSON (`-` reads stdin); now, after `--delay` or at
    /// `--run-at`.
    Submit {
        /// The queue.
        queue: String,
        /// The payload as JSON, e.g. `{"url": "https://example.org"}`; `-` reads it from stdin.
        payload: String,
        /// The tier: high, normal or low.
        #[arg(long, default_value = "normal")]
        priority: String,
        /// Seconds from now before it can be reserved.
        #[arg(long, value_name = "SECONDS", value_parser = ops::seconds_delay, conflicts_with = "run_at")]
        delay: Option<f64>,
        /// When it can be reserved: unix seconds or an RFC 3339 time (`2026-12-24T18:00:00Z`).
        #[arg(long, value_name = "TIME")]
        run_at: Option<String>,
        /// The task id (a fresh one by default).
        #[arg(long)]
        id: Option<String>,
        /// A key that makes the submit idempotent: a repeat submits nothing and prints the first
        /// task's id.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Deliveries before the task goes to the dead letters.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Seconds one attempt may run (more than 0, at most 86400); past it the consumer fails
        /// the attempt as timed out.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// A task's record by id: state, attempts, times, progress, last error, result.
    Show {
        /// The queue.
        queue: String,
        /// The task's id.
        id: String,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Waits for a task to end and prints its record (exit 6 when it has not ended in time).
    Wait {
        /// The queue.
        queue: String,
        /// The task's id.
        id: String,
        /// Seconds to wait at most.
        #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = ops::seconds_delay)]
        timeout: f64,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Cancels tasks by id (a waiting one never runs; a running one's worker is told and it ends
    /// cancelled), or every scheduled and waiting task with `--all-waiting`.
    Cancel {
        /// The queue.
        queue: String,
        /// The tasks' ids (1 to 1000).
        #[arg(required_unless_present = "all_waiting", num_args = 1..=1000)]
        ids: Vec<String>,
        /// Cancels every scheduled and waiting task of the queue (running ones are not touched).
        #[arg(long, conflicts_with = "ids")]
        all_waiting: bool,
        #[command(flatten)]
        op: OpArgs,
    },
}

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    /// Lists the schedules.
    Ls {
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Shows one schedule's spec.
    Get {
        /// The schedule.
        name: String,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Stores a schedule from its JSON spec (`{"cron", "timezone", "queue", "payload", …}`) in
    /// FILE, or stdin when FILE is `-` or absent.
    Put {
        /// The schedule.
        name: String,
        /// The JSON spec; `-` (the default) reads stdin.
        #[arg(default_value = "-")]
        file: PathBuf,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Deletes a schedule.
    Rm {
        /// The schedule.
        name: String,
        #[command(flatten)]
        gw: GwArgs,
    },
}

#[derive(Debug, Subcommand)]
enum WebhookCommand {
    /// Subscribes URL to run and task ends; prints the signing secret, shown this once.
    Create {
        /// Where to POST (http or https; a public address unless the gateway's `[webhooks]`
        /// allows more).
        url: String,
        /// An event type (repeatable): run.completed, run.failed, run.cancelled,
        /// task.completed, task.failed, task.dead, task.cancelled.
        #[arg(long = "event", value_name = "TYPE", required = true)]
        events: Vec<String>,
        /// Run events only from this namespace (repeatable; every namespace without it).
        #[arg(long = "namespace", value_name = "NAME")]
        namespaces: Vec<String>,
        /// A queue whose task ends are delivered (repeatable; required with task events).
        #[arg(long = "queue", value_name = "NAME")]
        queues: Vec<String>,
        /// The signing secret (`whsec_…`); generated when absent.
        #[arg(long, env = "SWITCHYARD_WEBHOOK_SECRET", hide_env_values = true)]
        secret: Option<String>,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Lists the subscriptions (never their secrets).
    Ls {
        #[command(flatten)]
        gw: GwArgs,
    },
    /// Deletes a subscription and its delivery log.
    Rm {
        /// The subscription's id.
        id: String,
        #[command(flatten)]
        gw: GwArgs,
    },
    /// A subscription's delivery log, newest first: attempt, status, latency, error.
    Deliveries {
        /// The subscription's id.
        id: String,
        #[command(flatten)]
        gw: GwArgs,
    },
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// Lists dead-lettered tasks, oldest first.
    Ls {
        /// The queue.
        queue: String,
        /// How many.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(..=1000))]
        limit: u64,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Moves dead letters back to the queue with a fresh attempt count: the ones named by
    /// `--ref` (from `dlq ls`), else the oldest (all by default), with progress on stderr.
    Requeue {
        /// The queue.
        queue: String,
        /// At most this many, oldest first.
        #[arg(long, conflicts_with = "refs")]
        limit: Option<u64>,
        /// A letter's REF as `dlq ls` prints it; repeat for several (at most 1000).
        #[arg(long = "ref", value_name = "REF", num_args = 1.., action = clap::ArgAction::Append)]
        refs: Vec<String>,
        /// The tier they go back to: high, normal or low.
        #[arg(long, default_value = "normal")]
        priority: String,
        #[command(flatten)]
        op: OpArgs,
    },
    /// Deprecated: `dlq requeue` (ADR 0311).
    #[command(hide = true)]
    Replay {
        /// The queue.
        queue: String,
        /// At most this many.
        #[arg(long)]
        limit: Option<u64>,
        /// The tier they go back to: high, normal or low.
        #[arg(long, default_value = "normal")]
        priority: String,
        #[command(flatten)]
        op: OpArgs,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Prints a fresh random secret (once) and the token-file entry to paste.
    New(token::NewTokenArgs),
}

#[derive(Debug, Subcommand)]
enum WorkersCommand {
    /// Lists registered workers.
    Ls {
        /// Only this automation type.
        #[arg(long)]
        automation_type: Option<String>,
        #[command(flatten)]
        op: OpArgs,
    },
}

/// Runs on a runtime worker thread each time it runs out of tasks and is about to sleep: hands
/// the pages its mimalloc heap holds empty back to mimalloc's shared arenas, which return them to
/// the OS a second later (ADR 0357). mimalloc frees a thread's empty pages only when that thread
/// allocates again, so after a burst of SSE streams the workers went to sleep holding the freed
/// memory of every stream: 5,000 closed streams left the gateway at 4× its start-up RSS for good.
/// A non-forced collect walks only this thread's own heap; measured, it costs nothing visible on
/// the request path (ADR 0357).
#[allow(unsafe_code)]
fn allocator_collect() {
    // SAFETY: mi_collect takes no arguments but the flag, touches only the calling thread's heap
    // and mimalloc's own (locked) arena state, and the binary's global allocator is mimalloc.
    unsafe { libmimalloc_sys::mi_collect(false) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(allocator_collect)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

async fn run(cli: Cli) -> Result<ExitCode, ops::Failure> {
    let command = match cli.command {
        Command::Token(TokenCommand::New(args)) => return Ok(token::new(args)?),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "switchyard",
                &mut std::io::stdout(),
            );
            return Ok(ExitCode::SUCCESS);
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command())
                .render(&mut std::io::stdout())
                .map_err(|e| ops::Failure::exit(1, format!("cannot write the man page: {e}")))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Openapi => {
            println!("{}", switchyard_gateway::Gateway::openapi_json());
            return Ok(ExitCode::SUCCESS);
        }
        other => other,
    };
    let config = backends::load_config(&cli.backends)?;
    let command = match command {
        Command::Serve(args) => {
            serve::serve(config, args).await?;
            return Ok(ExitCode::SUCCESS);
        }
        other => other,
    };
    let ops = ops::Ops::new(config, &cli.server);
    match command {
        Command::Runs(RunsCommand::Ls {
            namespace,
            status,
            op,
        }) => ops.runs_ls(&op, namespace, status).await,
        Command::Runs(RunsCommand::Show {
            run,
            session,
            namespace,
            from_seq,
            op,
        }) => ops.runs_show(&op, &run, session, namespace, from_seq).await,
        Command::Runs(RunsCommand::Line {
            session,
            namespace,
            op,
        }) => ops.runs_line(&op, &session, namespace).await,
        Command::Runs(RunsCommand::Cancel {
            run,
            session,
            namespace,
            reason,
            grace,
            task,
            op,
        }) => {
            let args = ops::CancelArgs {
                reason,
                grace_secs: grace,
                task,
            };
            ops.runs_cancel(&op, &run, session, namespace, args).await
        }
        Command::Runs(RunsCommand::Tail {
            run,
            session,
            namespace,
            last_event_id,
            op,
        }) => {
            let ctx = ops::context(&run, session, namespace)?;
            ops.runs_tail(&op, &ctx, last_event_id).await
        }
        Command::Queue(QueueCommand::Ls { op }) => ops.queue_ls(&op).await,
        Command::Queue(QueueCommand::Stats { queue, op }) => ops.queue_stats(&op, &queue).await,
        Command::Queue(QueueCommand::Peek { queue, limit, op }) => {
            ops.queue_peek(&op, &queue, limit).await
        }
        Command::Queue(QueueCommand::Dlq(DlqCommand::Ls { queue, limit, op })) => {
            ops.dlq_ls(&op, &queue, limit).await
        }
        Command::Queue(QueueCommand::Dlq(DlqCommand::Requeue {
            queue,
            limit,
            refs,
            priority,
            op,
        })) => {
            if refs.is_empty() {
                ops.dlq_requeue(&op, &queue, limit, &priority, "requeued")
                    .await
            } else {
                ops.dlq_requeue_refs(&op, &queue, &refs, &priority).await
            }
        }
        Command::Queue(QueueCommand::Dlq(DlqCommand::Replay {
            queue,
            limit,
            priority,
            op,
        })) => {
            eprintln!(
                "switchyard: `queue dlq replay` is deprecated and will be removed; use `queue dlq \
                 requeue` (same options)"
            );
            ops.dlq_requeue(&op, &queue, limit, &priority, "replayed")
                .await
        }
        Command::Queue(QueueCommand::Pause { queue, op }) => {
            ops.queue_pause(&op, &queue, true).await
        }
        Command::Queue(QueueCommand::Resume { queue, op }) => {
            ops.queue_pause(&op, &queue, false).await
        }
        Command::Queue(QueueCommand::RateLimit {
            queue,
            max,
            per,
            off: _,
            op,
        }) => {
            let limit = max.zip(per);
            ops.queue_rate_limit(&op, &queue, limit).await
        }
        Command::Queue(QueueCommand::InFlight { queue, limit, op }) => {
            ops.queue_in_flight(&op, &queue, limit).await
        }
        Command::Queue(QueueCommand::Reserve {
            queue,
            max,
            visibility,
            wait,
            gw,
        }) => ops.queue_reserve(&gw, &queue, max, visibility, wait).await,
        Command::Queue(QueueCommand::Ack { queue, receipt, gw }) => {
            ops.receipt_verb(&gw, &queue, &receipt, ops::Verb::Ack)
                .await
        }
        Command::Queue(QueueCommand::Nack {
            queue,
            receipt,
            delay,
            gw,
        }) => {
            ops.receipt_verb(&gw, &queue, &receipt, ops::Verb::Nack { delay })
                .await
        }
        Command::Queue(QueueCommand::Fail {
            queue,
            receipt,
            reason,
            gw,
        }) => {
            ops.receipt_verb(&gw, &queue, &receipt, ops::Verb::Fail { reason })
                .await
        }
        Command::Queue(QueueCommand::Extend {
            queue,
            receipt,
            visibility,
            gw,
        }) => {
            ops.receipt_verb(&gw, &queue, &receipt, ops::Verb::Extend { visibility })
                .await
        }
        Command::Queue(QueueCommand::Progress {
            queue,
            receipt,
            progress,
            gw,
        }) => {
            let progress = ops::json_arg("progress", &progress)?;
            ops.receipt_verb(&gw, &queue, &receipt, ops::Verb::Progress { progress })
                .await
        }
        Command::Task(TaskCommand::Submit {
            queue,
            payload,
            priority,
            delay,
            run_at,
            id,
            idempotency_key,
            max_attempts,
            timeout,
            gw,
        }) => {
            let submit = ops::TaskSubmit {
                payload: ops::json_arg("payload", &payload)?,
                priority,
                delay,
                run_at,
                id,
                idempotency_key,
                max_attempts,
                timeout,
            };
            ops.task_submit(&gw, &queue, submit).await
        }
        Command::Task(TaskCommand::Show { queue, id, op }) => ops.task_show(&op, &queue, &id).await,
        Command::Task(TaskCommand::Wait {
            queue,
            id,
            timeout,
            op,
        }) => ops.task_wait(&op, &queue, &id, timeout).await,
        Command::Task(TaskCommand::Cancel {
            queue,
            ids,
            all_waiting,
            op,
        }) => ops.task_cancel(&op, &queue, &ids, all_waiting).await,
        Command::Queue(QueueCommand::Retention { queue, set, op }) => {
            ops.queue_retention(&op, &queue, &set).await
        }
        Command::Schedule(ScheduleCommand::Ls { gw }) => ops.schedule_ls(&gw).await,
        Command::Schedule(ScheduleCommand::Get { name, gw }) => ops.schedule_get(&gw, &name).await,
        Command::Schedule(ScheduleCommand::Put { name, file, gw }) => {
            ops.schedule_put(&gw, &name, &file).await
        }
        Command::Schedule(ScheduleCommand::Rm { name, gw }) => ops.schedule_rm(&gw, &name).await,
        Command::Webhook(WebhookCommand::Create {
            url,
            events,
            namespaces,
            queues,
            secret,
            gw,
        }) => {
            let create = ops::WebhookCreate {
                url,
                events,
                namespaces,
                queues,
                secret,
            };
            ops.webhook_create(&gw, create).await
        }
        Command::Webhook(WebhookCommand::Ls { gw }) => ops.webhook_ls(&gw).await,
        Command::Webhook(WebhookCommand::Rm { id, gw }) => ops.webhook_rm(&gw, &id).await,
        Command::Webhook(WebhookCommand::Deliveries { id, gw }) => {
            ops.webhook_deliveries(&gw, &id).await
        }
        Command::Workers(WorkersCommand::Ls {
            automation_type,
            op,
        }) => ops.workers_ls(&op, automation_type).await,
        #[cfg(feature = "bench")]
        Command::Bench(args) => Ok(bench::run(args).await?),
        // Handled above.
        Command::Serve(_)
        | Command::Token(_)
        | Command::Completions { .. }
        | Command::Man
        | Command::Openapi => Ok(ExitCode::SUCCESS),
    }
}
