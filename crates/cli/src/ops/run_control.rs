//! Runs waiting for a session (ADR 0394) and a run's cancel (ADR 0396) as operator commands:
//! `runs line SESSION` and `runs cancel RUN`.

use std::process::ExitCode;

use serde_json::Value;
use switchyard_client::RunRef;
use switchyard_service::runs::{CancelRun, TaskRef};

use super::source::{Source, to_json};
use super::{Failure, Ops, context, print_json};
use crate::OpArgs;

/// What `runs cancel` asks, from its flags.
#[derive(Debug, Clone, Default)]
pub struct CancelArgs {
    pub reason: Option<String>,
    pub grace_secs: Option<u64>,
    /// `QUEUE/ID` of the task carrying the run.
    pub task: Option<String>,
}

impl Source {
    /// The runs waiting for `session`, as `GET /v1/sessions/{session}/line` answers.
    pub async fn line(&self, session: &str, namespace: Option<String>) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => Ok(to_json(
                gw.session_line(session, namespace.as_deref()).await?,
            )),
            Source::Direct(d) => {
                let ctx = context("line", Some(session.to_string()), namespace)?;
                Ok(to_json(d.runs_with_fleet().await?.line(&ctx).await?))
            }
        }
    }

    /// Cancels a run, as `POST /v1/runs/{run}/cancel` does.
    pub async fn cancel_run(
        &self,
        run: &str,
        session: Option<String>,
        namespace: Option<String>,
        request: CancelRun,
    ) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => {
                let address = RunRef {
                    run_id: run.to_string(),
                    session,
                    namespace,
                };
                Ok(to_json(gw.cancel_run(&address, &request).await?))
            }
            Source::Direct(d) => {
                let ctx = context(run, session, namespace)?;
                Ok(to_json(
                    d.runs_with_fleet().await?.cancel(&ctx, request).await?,
                ))
            }
        }
    }
}

impl Ops {
    /// `runs line SESSION`: the waiting runs, the next to start first.
    pub async fn runs_line(
        &self,
        op: &OpArgs,
        session: &str,
        namespace: Option<String>,
    ) -> Result<ExitCode, Failure> {
        let line = self.source(op)?.line(session, namespace).await?;
        if op.json {
            print_json(&line);
            return Ok(ExitCode::SUCCESS);
        }
        let runs = line
            .get("runs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if runs.is_empty() {
            println!("no run waits for session {session}");
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self.style.table(&["PLACE", "RUN", "INVOCABLE", "ORIGIN"]);
        for r in &runs {
            let text = |k: &str| match r.get(k) {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "-".into(),
            };
            table.add_row(vec![
                text("position"),
                text("run_id"),
                text("invocable"),
                text("origin"),
            ]);
        }
        super::table::print(&mut table);
        Ok(ExitCode::SUCCESS)
    }

    /// `runs cancel RUN`: asks the run's worker to stop, and ends the run after the grace.
    pub async fn runs_cancel(
        &self,
        op: &OpArgs,
        run: &str,
        session: Option<String>,
        namespace: Option<String>,
        args: CancelArgs,
    ) -> Result<ExitCode, Failure> {
        let task = match args.task.as_deref() {
            Some(t) => match t.split_once('/') {
                Some((queue, id)) if !queue.is_empty() && !id.is_empty() => Some(TaskRef {
                    queue: queue.to_string(),
                    id: id.to_string(),
                }),
                _ => {
                    return Err(Failure::exit(
                        2,
                        format!(
                            "--task takes QUEUE/ID (the queue task carrying the run), not {t:?}"
                        ),
                    ));
                }
            },
            None => None,
        };
        let request = CancelRun {
            reason: args.reason,
            grace_secs: args.grace_secs,
            task,
            origin: Some("operator".into()),
        };
        let answer = self
            .source(op)?
            .cancel_run(run, session, namespace, request)
            .await?;
        if op.json {
            print_json(&answer);
            return Ok(ExitCode::SUCCESS);
        }
        let field = |k: &str| answer.get(k).and_then(Value::as_str).unwrap_or("-");
        match field("outcome") {
            "requested" => println!(
                "{run}: cancel requested; its worker is told and the run ends cancelled when it \
                 confirms, or when the grace period runs out"
            ),
            "ended" => println!("{run}: ended cancelled"),
            "left_line" => println!("{run}: was waiting for its session; it will not start"),
            _ => println!(
                "{run}: already ended ({}); nothing changed",
                field("status")
            ),
        }
        if let Some(task) = answer.get("task").and_then(Value::as_str) {
            println!("its task: {task}");
        }
        Ok(ExitCode::SUCCESS)
    }
}
