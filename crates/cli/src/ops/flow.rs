//! The queue features of issue 16 as operator commands: pause and resume, rate limits, the
//! in-flight list and chosen dead letters (through a gateway or straight from the backend), and
//! the worker verbs, delayed submits and schedules (through a gateway only, ADR 0310).

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use comfy_table::Cell;
use serde_json::{Value, json};

use super::source::{Source, to_json};
use super::table::{self, raw};
use super::{Failure, NOT_FOUND, Ops, print_json};
use crate::GwArgs;
use crate::OpArgs;
use switchyard_client::Client;
use switchyard_service::queues::submit::Instant;
use switchyard_service::queues::{
    ExtendBody, FailBody, NackBody, PriorityInput, RateLimitBody, RequeueBody, ReserveBody,
    SubmitBody, parse_priority_text,
};

/// Command-line misuse (clap's own code for it).
const USAGE: u8 = 2;

/// A worker verb on one receipt.
#[derive(Debug)]
pub enum Verb {
    Ack,
    Nack { delay: Option<f64> },
    Fail { reason: Option<String> },
    Extend { visibility: f64 },
    Progress { progress: Value },
}

/// What `task submit` sends.
#[derive(Debug)]
pub struct TaskSubmit {
    pub payload: Value,
    pub priority: String,
    pub delay: Option<f64>,
    pub run_at: Option<String>,
    pub id: Option<String>,
    pub idempotency_key: Option<String>,
    pub max_attempts: Option<u32>,
    pub timeout: Option<f64>,
}

fn seconds(text: &str, min: f64, max: f64) -> Result<f64, String> {
    let n: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !n.is_finite() || n < min || n > max {
        return Err(format!("must be between {min} and {max} seconds"));
    }
    Ok(n)
}

/// `--delay`: zero to a year of seconds.
pub fn seconds_delay(text: &str) -> Result<f64, String> {
    seconds(text, 0.0, 31_536_000.0)
}

/// `--visibility`: more than nothing, at most 12 hours (the gateway's bound).
pub fn seconds_visibility(text: &str) -> Result<f64, String> {
    seconds(text, 0.001, 43_200.0)
}

/// `--wait`: at most 30 s (the gateway's long-poll bound).
pub fn seconds_wait(text: &str) -> Result<f64, String> {
    seconds(text, 0.0, 30.0)
}

/// `--per` of a rate limit: 1 ms to a day, as the port takes it.
pub fn seconds_per(text: &str) -> Result<f64, String> {
    seconds(text, 0.001, 86_400.0)
}

/// A JSON argument, or stdin when it is `-`; not JSON is a usage error (exit 2).
pub fn json_arg(what: &str, text: &str) -> Result<Value, Failure> {
    let text = if text == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .read_to_string(&mut buf)
            .map_err(|e| Failure::exit(1, format!("cannot read the {what} from stdin: {e}")))?;
        buf
    } else {
        text.to_string()
    };
    serde_json::from_str(&text).map_err(|e| {
        Failure::exit(
            USAGE,
            format!(
                "the {what} is not JSON ({e}); quote it for the shell, e.g. '{{\"n\": 1}}', or \
                 pass - and pipe it in"
            ),
        )
    })
}

/// Unix seconds as a cell with millisecond precision.
fn instant(v: Option<&Value>) -> String {
    match v.and_then(Value::as_f64) {
        Some(t) => format!("{t:.3}"),
        None => raw(v),
    }
}

impl Ops {
    /// The gateway these commands need: `--url` is no way to reach them (ADR 0310).
    pub(super) fn gateway_only(&self, what: &str) -> Result<Client, Failure> {
        match self.server_url() {
            Some(server) => self.gateway(server),
            None => Err(Failure::exit(
                1,
                format!(
                    "{what} goes through a gateway: name it with --server URL (or \
                     SWITCHYARD_SERVER, or `server` in --config)"
                ),
            )),
        }
    }

    /// `queue pause` (`pause = true`) and `queue resume`.
    pub async fn queue_pause(
        &self,
        op: &OpArgs,
        queue: &str,
        pause: bool,
    ) -> Result<ExitCode, Failure> {
        let body = self.source(op)?.pause(queue, pause).await?;
        if op.json {
            print_json(&body);
            return Ok(ExitCode::SUCCESS);
        }
        let changed = body.get("changed").and_then(Value::as_bool).unwrap_or(true);
        let state = if pause { "paused" } else { "running" };
        if changed {
            println!("queue {queue} is {state}");
        } else {
            println!("queue {queue} was already {state}");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `queue rate-limit`: sets `(max, per seconds)` or removes the limit; prints the stats.
    pub async fn queue_rate_limit(
        &self,
        op: &OpArgs,
        queue: &str,
        limit: Option<(u32, f64)>,
    ) -> Result<ExitCode, Failure> {
        let stats = self.source(op)?.rate_limit(queue, limit).await?;
        if op.json {
            print_json(&stats);
            return Ok(ExitCode::SUCCESS);
        }
        self.print_stats(queue, &stats);
        Ok(ExitCode::SUCCESS)
    }

    /// `queue in-flight`: the reservations, soonest deadline first, with their progress.
    pub async fn queue_in_flight(
        &self,
        op: &OpArgs,
        queue: &str,
        limit: u64,
    ) -> Result<ExitCode, Failure> {
        let source = self.source(op)?;
        let tasks = source.in_flight(queue, limit).await?;
        if tasks.is_empty() && limit > 0 {
            self.check_known(&source, queue).await?;
        }
        if op.json {
            print_json(&Value::Array(tasks));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self.style.table(&[
            "ID",
            "ATTEMPT",
            "PRIORITY",
            "VISIBLE UNTIL",
            "PROGRESS",
            "PAYLOAD",
        ]);
        for t in &tasks {
            table.add_row(vec![
                Cell::new(raw(t.get("id"))),
                Cell::new(raw(t.get("attempt"))),
                Cell::new(raw(t.get("priority"))),
                Cell::new(instant(t.get("visible_until"))),
                Cell::new(raw(t.get("progress"))),
                Cell::new(raw(t.get("payload"))),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} task(s) in flight", tasks.len());
        Ok(ExitCode::SUCCESS)
    }

    /// `queue dlq requeue --ref …`: exactly the letters named; exit 4 when some were gone.
    pub async fn dlq_requeue_refs(
        &self,
        op: &OpArgs,
        queue: &str,
        refs: &[String],
        priority: &str,
    ) -> Result<ExitCode, Failure> {
        if refs.len() > switchyard_core::fleet::MAX_BATCH {
            return Err(Failure::exit(
                USAGE,
                "at most 1000 --ref per call: split the list",
            ));
        }
        let priority = parse_priority_text(priority)?;
        let (requeued, missing) = self
            .source(op)?
            .requeue_chosen(queue, refs, priority)
            .await?;
        if op.json {
            print_json(&json!({"queue": queue, "requeued": requeued, "missing": missing}));
        } else {
            println!("requeued {requeued} dead letter(s) of {queue}");
        }
        if missing.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        Err(Failure::exit(
            NOT_FOUND,
            format!(
                "{} of the letters named are no longer dead (requeued or cleared meanwhile): {}",
                missing.len(),
                missing
                    .iter()
                    .filter_map(Value::as_str)
                    .map(short)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }

    /// `queue reserve`: reserves as a worker does and prints receipts.
    pub async fn queue_reserve(
        &self,
        gw: &GwArgs,
        queue: &str,
        max: u64,
        visibility: f64,
        wait: f64,
    ) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("queue reserve")?;
        let request = ReserveBody {
            max: Some(max),
            visibility_seconds: Some(visibility),
            wait_seconds: Some(wait),
        };
        let reserved = gateway.reserve(queue, &request).await?;
        let tasks: Vec<Value> = reserved.tasks.into_iter().map(to_json).collect();
        if gw.json {
            print_json(&Value::Array(tasks));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self.style.table(&[
            "RECEIPT",
            "ID",
            "ATTEMPT",
            "PRIORITY",
            "VISIBLE UNTIL",
            "PAYLOAD",
        ]);
        for t in &tasks {
            table.add_row(vec![
                Cell::new(raw(t.get("receipt"))),
                Cell::new(raw(t.get("id"))),
                Cell::new(raw(t.get("attempt"))),
                Cell::new(raw(t.get("priority"))),
                Cell::new(instant(t.get("visible_until"))),
                Cell::new(raw(t.get("payload"))),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} task(s) reserved", tasks.len());
        Ok(ExitCode::SUCCESS)
    }

    /// `queue ack|nack|fail|extend|progress QUEUE RECEIPT`.
    pub async fn receipt_verb(
        &self,
        gw: &GwArgs,
        queue: &str,
        receipt: &str,
        verb: Verb,
    ) -> Result<ExitCode, Failure> {
        let name = match &verb {
            Verb::Ack => "ack",
            Verb::Nack { .. } => "nack",
            Verb::Fail { .. } => "fail",
            Verb::Extend { .. } => "extend",
            Verb::Progress { .. } => "progress",
        };
        let gateway = self.gateway_only(&format!("queue {name}"))?;
        // A receipt that is no longer current is the gateway's 409 `receipt_not_current`, whose
        // message says to reserve again: exit 1 with it. The verbs but nack answer `{"ok": true}`.
        let ok = json!({"ok": true});
        let (answer, done) = match verb {
            Verb::Ack => {
                gateway.ack(queue, receipt).await?;
                (ok, "acked".to_string())
            }
            Verb::Nack { delay } => {
                let body = NackBody {
                    delay_seconds: delay,
                    reason: None,
                };
                let nacked = gateway.nack(queue, receipt, &body).await?;
                let done = match delay {
                    Some(d) => format!("back in the queue in {d} s"),
                    None => "back in the queue".to_string(),
                };
                (to_json(nacked), done)
            }
            Verb::Fail { reason } => {
                gateway.fail(queue, receipt, &FailBody { reason }).await?;
                (ok, "moved to the dead letters".to_string())
            }
            Verb::Extend { visibility } => {
                let body = ExtendBody {
                    visibility_seconds: visibility,
                };
                gateway.extend(queue, receipt, &body).await?;
                (ok, format!("reserved for {visibility} s from now"))
            }
            Verb::Progress { progress } => {
                gateway.progress(queue, receipt, &progress).await?;
                (ok, "progress stored".to_string())
            }
        };
        if gw.json {
            print_json(&answer);
        } else {
            println!("{queue}: task of receipt {receipt} {done}");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `task submit`: now, after a delay or at a time.
    pub async fn task_submit(
        &self,
        gw: &GwArgs,
        queue: &str,
        submit: TaskSubmit,
    ) -> Result<ExitCode, Failure> {
        parse_priority_text(&submit.priority)?;
        let body = SubmitBody {
            payload: submit.payload,
            id: submit.id,
            priority: Some(PriorityInput::Name(submit.priority)),
            ttl_seconds: None,
            max_attempts: submit.max_attempts.map(u64::from),
            idempotency_key: submit.idempotency_key,
            delay_seconds: submit.delay,
            // Unix seconds as a number; anything else goes as text for the gateway to read as
            // RFC 3339 (and refuse with its own message).
            run_at: submit.run_at.as_ref().map(|at| match at.parse::<f64>() {
                Ok(n) if n.is_finite() => Instant::Unix(n),
                _ => Instant::Text(at.clone()),
            }),
            timeout_seconds: submit.timeout,
            retry: None,
        };
        let gateway = self.gateway_only("task submit")?;
        let submitted = gateway.submit(queue, &body).await?;
        if gw.json {
            print_json(&to_json(&submitted));
            return Ok(ExitCode::SUCCESS);
        }
        let id = submitted.id;
        if submitted.duplicate {
            println!("{queue}: already submitted as task {id} (same idempotency key)");
        } else if let Some(d) = submit.delay.filter(|d| *d > 0.0) {
            println!("{queue}: task {id} submitted, due in {d} s");
        } else if let Some(at) = submit.run_at {
            println!("{queue}: task {id} submitted, due at {at}");
        } else {
            println!("{queue}: task {id} submitted");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `schedule ls`.
    pub async fn schedule_ls(&self, gw: &GwArgs) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("schedule ls")?;
        let body = to_json(gateway.schedules().await?);
        let schedules = schedule_list(&body);
        if gw.json {
            print_json(&Value::Array(schedules));
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = self
            .style
            .table(&["NAME", "CRON", "TIMEZONE", "QUEUE", "ENABLED", "CATCH UP"]);
        for s in &schedules {
            table.add_row(vec![
                Cell::new(raw(s.get("name"))),
                Cell::new(raw(s.get("cron"))),
                Cell::new(raw(s.get("timezone"))),
                Cell::new(raw(s.get("queue"))),
                Cell::new(raw(s.get("enabled"))),
                Cell::new(raw(s.get("catch_up"))),
            ]);
        }
        table::print(&mut table);
        eprintln!("{} schedule(s)", schedules.len());
        Ok(ExitCode::SUCCESS)
    }

    /// `schedule get NAME`: the spec as JSON (it is a document; a table would hide its payload).
    pub async fn schedule_get(&self, gw: &GwArgs, name: &str) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("schedule get")?;
        let body = to_json(
            gateway
                .schedule(name)
                .await
                .map_err(|e| no_schedule(e.into(), name))?,
        );
        if gw.json {
            print_json(&body);
            return Ok(ExitCode::SUCCESS);
        }
        let spec = body.get("spec").unwrap_or(&body);
        println!("schedule  {name}");
        for key in [
            "cron",
            "timezone",
            "queue",
            "priority",
            "catch_up",
            "enabled",
            "created_at",
        ] {
            if let Some(v) = spec.get(key) {
                println!("{key:<10}{}", raw(Some(v)));
            }
        }
        if let Some(p) = spec.get("payload") {
            println!("payload   {p}");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `schedule put NAME [FILE|-]`.
    pub async fn schedule_put(
        &self,
        gw: &GwArgs,
        name: &str,
        file: &Path,
    ) -> Result<ExitCode, Failure> {
        let text = if file.as_os_str() == "-" {
            let mut buf = String::new();
            std::io::stdin().read_to_string(&mut buf).map_err(|e| {
                Failure::exit(1, format!("cannot read the schedule spec from stdin: {e}"))
            })?;
            buf
        } else {
            std::fs::read_to_string(file).map_err(|e| {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    NOT_FOUND
                } else {
                    1
                };
                Failure::exit(
                    code,
                    format!("cannot read the schedule spec {}: {e}", file.display()),
                )
            })?
        };
        let spec = json_arg("schedule spec", &text)?;
        let gateway = self.gateway_only("schedule put")?;
        let answer = to_json(gateway.put_schedule(name, &spec).await?);
        if gw.json {
            print_json(&answer);
        } else {
            println!("schedule {name} stored");
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `schedule rm NAME`: exit 4 when there was none.
    pub async fn schedule_rm(&self, gw: &GwArgs, name: &str) -> Result<ExitCode, Failure> {
        let gateway = self.gateway_only("schedule rm")?;
        let deleted = gateway
            .delete_schedule(name)
            .await
            .map_err(|e| no_schedule(e.into(), name))?;
        if !deleted.deleted {
            return Err(no_schedule(
                Failure::exit(NOT_FOUND, "the gateway has no such schedule"),
                name,
            ));
        }
        if gw.json {
            print_json(&to_json(deleted));
        } else {
            println!("schedule {name} deleted");
        }
        Ok(ExitCode::SUCCESS)
    }
}

impl Source {
    /// Pauses (or resumes) reservations: `{queue, paused, changed}` as the gateway answers.
    pub async fn pause(&self, queue: &str, pause: bool) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => {
                let state = if pause {
                    gw.pause(queue).await?
                } else {
                    gw.resume(queue).await?
                };
                Ok(to_json(state))
            }
            Source::Direct(d) => {
                let answer = d.queues().await?.set_paused(queue, pause).await?;
                Ok(serde_json::to_value(answer).unwrap_or(Value::Null))
            }
        }
    }

    /// Sets or removes the rate limit; the queue's stats afterwards.
    pub async fn rate_limit(
        &self,
        queue: &str,
        limit: Option<(u32, f64)>,
    ) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => {
                let stats = match limit {
                    Some((max, per)) => {
                        let body = RateLimitBody {
                            max: u64::from(max),
                            per_seconds: per,
                        };
                        gw.set_rate_limit(queue, &body).await?
                    }
                    None => gw.clear_rate_limit(queue).await?,
                };
                Ok(to_json(stats))
            }
            Source::Direct(d) => {
                let body = limit.map(|(max, per)| RateLimitBody {
                    max: u64::from(max),
                    per_seconds: per,
                });
                let queues = d.queues().await?;
                let stats = queues.set_rate_limit(queue, body.as_ref()).await?;
                Ok(serde_json::to_value(stats).unwrap_or(Value::Null))
            }
        }
    }

    /// Up to `limit` reservations as `GET …/in-flight` lists them (no receipts).
    pub async fn in_flight(&self, queue: &str, limit: u64) -> Result<Vec<Value>, Failure> {
        match self {
            Source::Gateway(gw) => {
                let list = gw.in_flight(queue, Some(limit)).await?;
                Ok(list.in_flight.into_iter().map(to_json).collect())
            }
            Source::Direct(d) => {
                let n = usize::try_from(limit).unwrap_or(usize::MAX);
                let list = d.queues().await?.in_flight(queue, Some(n)).await?;
                let list = serde_json::to_value(list.in_flight).unwrap_or(Value::Null);
                Ok(list.as_array().cloned().unwrap_or_default())
            }
        }
    }

    /// Requeues the letters named by their refs; how many moved and the refs no longer dead.
    pub async fn requeue_chosen(
        &self,
        queue: &str,
        refs: &[String],
        priority: switchyard_core::Priority,
    ) -> Result<(u64, Vec<Value>), Failure> {
        match self {
            Source::Gateway(gw) => {
                let body = RequeueBody {
                    limit: None,
                    refs: Some(refs.to_vec()),
                    priority: Some(PriorityInput::Name(super::tier(priority).to_string())),
                };
                let answer = gw.requeue(queue, &body).await?;
                let missing = answer.missing.into_iter().map(Value::String).collect();
                Ok((answer.requeued, missing))
            }
            Source::Direct(d) => {
                let bodies = refs
                    .iter()
                    .map(|r| {
                        super::ref_bytes(r).ok_or_else(|| {
                            Failure::exit(
                                USAGE,
                                format!(
                                    "--ref {} is not a REF as `dlq ls` prints it (base64url)",
                                    short(r)
                                ),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let answers = d
                    .fleet()
                    .await?
                    .dlq_requeue_chosen(queue, &bodies, priority)
                    .await?;
                let requeued = answers.iter().filter(|moved| **moved).count() as u64;
                let missing = refs
                    .iter()
                    .zip(&answers)
                    .filter(|(_, moved)| !**moved)
                    .map(|(r, _)| json!(r))
                    .collect();
                Ok((requeued, missing))
            }
        }
    }
}

/// A ref shortened for a message (refs are whole bodies, base64-encoded).
fn short(r: &str) -> String {
    if r.chars().count() <= 24 {
        r.to_string()
    } else {
        format!("{}…", r.chars().take(24).collect::<String>())
    }
}

/// A 404 on a schedule names it.
fn no_schedule(e: Failure, name: &str) -> Failure {
    match e {
        Failure::Exit { code, message } if code == NOT_FOUND => Failure::exit(
            NOT_FOUND,
            format!("no schedule {name:?} ({message}); `switchyard schedule ls` lists them"),
        ),
        other => other,
    }
}

/// `GET /v1/schedules` as a list of specs each with its `name`, whether the gateway answers a
/// list or a map by name.
fn schedule_list(body: &Value) -> Vec<Value> {
    let inner = body.get("schedules").unwrap_or(body);
    match inner {
        Value::Array(items) => items
            .iter()
            .map(|item| match item.get("spec") {
                Some(spec) => {
                    let mut spec = spec.clone();
                    if let (Some(obj), Some(name)) = (spec.as_object_mut(), item.get("name")) {
                        obj.insert("name".into(), name.clone());
                    }
                    spec
                }
                None => item.clone(),
            })
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(name, spec)| {
                let mut spec = spec.clone();
                if let Some(obj) = spec.as_object_mut() {
                    obj.insert("name".into(), json!(name));
                }
                spec
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(seconds_delay("1.5"), Ok(1.5));
        assert!(seconds_delay("-1").is_err());
        assert!(seconds_delay("NaN").is_err());
        assert!(seconds_wait("31").is_err());
        assert!(seconds_visibility("0").is_err());
        assert!(seconds_per("86401").is_err());
    }

    #[test]
    fn schedule_lists_of_either_shape_name_each_spec() {
        let map = json!({"schedules": {"nightly": {"cron": "0 3 * * *"}}});
        let list = json!({"schedules": [{"name": "nightly", "spec": {"cron": "0 3 * * *"}}]});
        for body in [map, list] {
            let specs = schedule_list(&body);
            assert_eq!(specs.len(), 1);
            assert_eq!(specs[0]["name"], "nightly");
            assert_eq!(specs[0]["cron"], "0 3 * * *");
        }
    }
}
