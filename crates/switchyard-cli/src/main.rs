//! `switchyard`: a reference HTTP + SSE gateway over any switchyard backend (`serve`), and operator
//! commands that read and repair runs, queues and workers through a gateway (`--server`) or
//! straight from a backend URL (ADR 0240).

mod backends;
#[cfg(feature = "bench")]
mod bench;
mod console;
mod gateway;
mod ops;
mod telemetry;
mod token;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

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
    Serve(gateway::ServeArgs),
    /// Runs: list, show, tail.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Job queues: list, stats, peek, dead letters.
    #[command(subcommand)]
    Queue(QueueCommand),
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
    /// Measures every adapter against the Redis and SQLite floor of this machine; prints the
    /// Markdown table and saves it (with JSON) under --out.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
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
    /// Dead letters.
    #[command(subcommand)]
    Dlq(DlqCommand),
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
    /// Moves dead-lettered tasks back to the queue (all by default), with progress on stderr.
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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
        other => other,
    };
    let config = backends::load_config(&cli.backends)?;
    let command = match command {
        Command::Serve(args) => {
            gateway::serve(config, args).await?;
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
        Command::Queue(QueueCommand::Dlq(DlqCommand::Replay {
            queue,
            limit,
            priority,
            op,
        })) => ops.dlq_replay(&op, &queue, limit, &priority).await,
        Command::Workers(WorkersCommand::Ls {
            automation_type,
            op,
        }) => ops.workers_ls(&op, automation_type).await,
        #[cfg(feature = "bench")]
        Command::Bench(args) => Ok(bench::run(args).await?),
        // Handled above.
        Command::Serve(_) | Command::Token(_) | Command::Completions { .. } | Command::Man => {
            Ok(ExitCode::SUCCESS)
        }
    }
}
