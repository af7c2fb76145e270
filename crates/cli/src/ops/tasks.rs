//! Control of a task (ADR 0380) as operator commands: `task show`, `task cancel` (ids, or every
//! waiting task), `task wait` and `queue retention`, through a gateway or straight from the
//! backend, both answering in the gateway's JSON shapes.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;
use switchyard_service::queues::tasks::MAX_TASK_WAIT_SECS;
use switchyard_service::queues::{RetentionBody, RetentionJson};

use super::source::{Source, to_json};
use super::{Failure, Ops, print_json};
use crate::OpArgs;

/// `task wait` ran out of time before the task ended.
pub const NOT_ENDED: u8 = 6;

/// Command-line misuse (clap's own code for it).
const USAGE: u8 = 2;

/// The longest one gateway long poll of `task wait` asks for; the command asks again until its
/// own `--timeout`.
const POLL: Duration = Duration::from_secs(25);

fn is_end(task: &Value) -> bool {
    matches!(
        task.get("state").and_then(Value::as_str),
        Some("completed" | "failed" | "dead" | "cancelled")
    )
}

/// A `--set KEY=VALUE` of `queue retention`: `completed.count=100`, `failed.age_seconds=3600`.
pub fn retention_setting(text: &str) -> Result<(String, String, f64), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE (e.g. completed.count=100)"))?;
    let (kind, field) = key
        .split_once('.')
        .ok_or_else(|| format!("{key:?} is not KIND.FIELD (e.g. completed.count)"))?;
    if !matches!(kind, "completed" | "failed" | "events") {
        return Err(format!("{kind:?} is not completed, failed or events"));
    }
    if !matches!(field, "count" | "age_seconds") {
        return Err(format!("{field:?} is not count or age_seconds"));
    }
    let n: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("{value:?} must be a number of at least 0"));
    }
    Ok((kind.to_string(), field.to_string(), n))
}

/// The body that sets `settings` over `current`: every kind named is sent whole (count and
/// age), its unnamed field kept as it is.
fn retention_body(
    current: &RetentionJson,
    settings: &[(String, String, f64)],
) -> Result<RetentionBody, Failure> {
    let mut body = RetentionBody::default();
    for (kind, field, n) in settings {
        let (slot, now) = match kind.as_str() {
            "completed" => (&mut body.completed, current.completed),
            "failed" => (&mut body.failed, current.failed),
            _ => (&mut body.events, current.events),
        };
        let keep = slot.get_or_insert(now);
        if field == "count" {
            if n.fract() != 0.0 || *n > u64::MAX as f64 {
                return Err(Failure::exit(
                    USAGE,
                    format!("--set {kind}.count={n}: a count is a whole number"),
                ));
            }
            keep.count = *n as u64;
        } else {
            keep.age_seconds = *n;
        }
    }
    Ok(body)
}

impl Source {
    /// The task's record as `GET …/tasks/{id}` answers, waiting up to `wait` for its end.
    pub async fn task(&self, queue: &str, id: &str, wait: Duration) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => Ok(to_json(gw.task(queue, id, Some(wait)).await?)),
            Source::Direct(d) => {
                let queues = d.queues().await?;
                Ok(to_json(queues.task_wait(queue, id, wait).await?))
            }
        }
    }

    /// Cancels `ids` (one answer each, in order), or every waiting task (`all_waiting`).
    pub async fn cancel(
        &self,
        queue: &str,
        ids: &[String],
        all_waiting: bool,
    ) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => match (all_waiting, ids) {
                (true, _) => Ok(to_json(gw.cancel_all_waiting(queue).await?)),
                (false, [one]) => {
                    let answer = gw.cancel_task(queue, one).await?;
                    Ok(serde_json::json!({"results": [{
                        "id": one, "outcome": answer.outcome, "state": answer.state,
                    }]}))
                }
                (false, _) => Ok(to_json(gw.cancel_tasks(queue, ids).await?)),
            },
            Source::Direct(d) => {
                let body = switchyard_service::queues::CancelBody {
                    ids: (!all_waiting).then(|| ids.to_vec()),
                    all_waiting: all_waiting.then_some(true),
                };
                Ok(to_json(d.queues().await?.cancel_many(queue, body).await?))
            }
        }
    }

    /// The queue's retention; with `settings`, set first.
    pub async fn retention(
        &self,
        queue: &str,
        settings: &[(String, String, f64)],
    ) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => {
                let current = gw.retention(queue).await?;
                if settings.is_empty() {
                    return Ok(to_json(current));
                }
                let body = retention_body(&current, settings)?;
                Ok(to_json(gw.set_retention(queue, &body).await?))
            }
            Source::Direct(d) => {
                let queues = d.queues().await?;
                let current = queues.retention(queue).await?;
                if settings.is_empty() {
                    return Ok(to_json(current));
                }
                let body = retention_body(&current, settings)?;
                Ok(to_json(queues.set_retention(queue, &body).await?))
            }
        }
    }
}

fn print_task(task: &Value) {
    let text = |k: &str| match task.get(k) {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(v) => v.to_string(),
    };
    let time = |k: &str| {
        task.get(k)
            .and_then(Value::as_f64)
            .map_or("-".to_string(), |t| format!("{t:.3}"))
    };
    let mut state = text("state");
    if task.get("cancel_requested").and_then(Value::as_bool) == Some(true) {
        state.push_str(" (cancel requested)");
    }
    if task.get("foreign").and_then(Value::as_bool) == Some(true) {
        state.push_str(" (moved by a consumer without records)");
    }
    let attempts = match task.get("max_attempts").and_then(Value::as_u64) {
        Some(max) => format!("{} of {max}", text("attempt")),
        None => text("attempt"),
    };
    println!("task          {}", text("id"));
    println!("state         {state}");
    println!("attempt       {attempts}");
    println!("priority      {}", text("priority"));
    println!("submitted     {}", time("submitted_at"));
    println!("started       {}", time("started_at"));
    println!("finished      {}", time("finished_at"));
    if task.get("visible_until").is_some_and(|v| !v.is_null()) {
        println!("visible until {}", time("visible_until"));
    }
    println!("progress      {}", text("progress"));
    println!("last error    {}", text("last_error"));
    match task.get("result_base64").and_then(Value::as_str) {
        Some(b) => println!("result        (not JSON, base64) {b}"),
        None => println!("result        {}", text("result")),
    }
}

impl Ops {
    /// `task show`: the task's record.
    pub async fn task_show(&self, op: &OpArgs, queue: &str, id: &str) -> Result<ExitCode, Failure> {
        let task = self.source(op)?.task(queue, id, Duration::ZERO).await?;
        if op.json {
            print_json(&task);
        } else {
            print_task(&task);
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `task wait`: the record once the task ends (exit 0), or as it is at `--timeout` (exit
    /// [`NOT_ENDED`]).
    pub async fn task_wait(
        &self,
        op: &OpArgs,
        queue: &str,
        id: &str,
        timeout: f64,
    ) -> Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout);
        // Direct: one wait as long as the service allows; through a gateway, polls inside its
        // request deadline. Either way asked again until the command's own timeout.
        let step = match source {
            Source::Gateway(_) => POLL,
            Source::Direct(_) => Duration::from_secs_f64(MAX_TASK_WAIT_SECS),
        };
        let task = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let task = source.task(queue, id, left.min(step)).await?;
            if is_end(&task) || left <= step {
                break task;
            }
        };
        if op.json {
            print_json(&task);
        } else {
            print_task(&task);
        }
        if is_end(&task) {
            Ok(ExitCode::SUCCESS)
        } else {
            eprintln!("switchyard: task {id} has not ended after {timeout} s");
            Ok(ExitCode::from(NOT_ENDED))
        }
    }

    /// `task cancel`: the ids given, or every waiting task (`--all-waiting`).
    pub async fn task_cancel(
        &self,
        op: &OpArgs,
        queue: &str,
        ids: &[String],
        all_waiting: bool,
    ) -> Result<ExitCode, Failure> {
        let answer = self.source(op)?.cancel(queue, ids, all_waiting).await?;
        if op.json {
            print_json(&answer);
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(n) = answer.get("purged").and_then(Value::as_u64) {
            println!("{n} scheduled or waiting task(s) of queue {queue} cancelled");
            return Ok(ExitCode::SUCCESS);
        }
        let results = answer
            .get("results")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut unknown = 0;
        for r in &results {
            let id = r.get("id").and_then(Value::as_str).unwrap_or("?");
            let state = r.get("state").and_then(Value::as_str).unwrap_or("-");
            match r.get("outcome").and_then(Value::as_str).unwrap_or("?") {
                "cancelled" => println!("{id}: cancelled (it had not started; it never will)"),
                "cancel_requested" => println!(
                    "{id}: cancel requested (it runs; its worker is told and it ends cancelled)"
                ),
                "finished" => println!("{id}: already ended ({state}); nothing changed"),
                _ => {
                    unknown += 1;
                    println!("{id}: unknown (no task of queue {queue} has this id)");
                }
            }
        }
        if unknown > 0 && unknown == results.len() {
            return Ok(ExitCode::from(super::NOT_FOUND));
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `queue retention`: prints it; with `--set`, sets those fields first.
    pub async fn queue_retention(
        &self,
        op: &OpArgs,
        queue: &str,
        settings: &[(String, String, f64)],
    ) -> Result<ExitCode, Failure> {
        let r = self.source(op)?.retention(queue, settings).await?;
        if op.json {
            print_json(&r);
            return Ok(ExitCode::SUCCESS);
        }
        println!("queue {queue} keeps:");
        for (kind, what) in [
            ("completed", "completed tasks"),
            ("failed", "failed and cancelled tasks"),
            ("events", "end events"),
        ] {
            let count = r[kind]["count"].as_u64().unwrap_or(0);
            let age = r[kind]["age_seconds"].as_f64().unwrap_or(0.0);
            println!("  {kind:<10} the last {count} {what}, each for {age} s");
        }
        println!("  dead       as long as their dead letter");
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_settings_name_a_kind_and_a_field() {
        assert_eq!(
            retention_setting("completed.count=100"),
            Ok(("completed".into(), "count".into(), 100.0))
        );
        for bad in [
            "completed.count",
            "dead.count=1",
            "completed.size=1",
            "events.age_seconds=-1",
            "failed.count=x",
        ] {
            assert!(retention_setting(bad).is_err(), "{bad}");
        }
        let current = RetentionJson::new(&switchyard_core::fleet::Retention::default());
        let body = retention_body(&current, &[("failed".into(), "age_seconds".into(), 60.0)])
            .expect("body");
        let failed = body.failed.expect("failed");
        assert_eq!((failed.count, failed.age_seconds), (1000, 60.0));
        assert!(body.completed.is_none());
    }
}
