//! Event store load: claim a session, append to the run, close it; from several tasks over a few
//! sessions. Checked: no two certain holds of one session overlap, at most one open run per
//! session in the store, every won claim's run exists with its opening event, seqs are dense,
//! every acknowledged append is at its seq, no append is there twice, no error is untyped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_conformance::harness::{unique_prefix, unique_schema};
use switchyard_core::event::{
    Block, InvocableKind, MessageText, Payload, RunCompleted, RunPaused, RunResumed, RunStarted,
    Usage,
};
use switchyard_core::{Error, Event, EventStore, RunContext, RunStatus};
use switchyard_store_postgres::{PostgresEventStore, PostgresOptions};
use switchyard_store_redis::{RedisEventStore, RedisStoreOptions};
use tokio::task::JoinHandle;

use crate::env::{Backend, Target};
use crate::report::AdapterReport;
use crate::{Flags, Scale};

const HOUR: Duration = Duration::from_secs(3600);
const ORIGIN: &str = "chaos";

/// How a claim ended, as the caller saw it.
#[derive(Debug, Clone)]
enum Claimed {
    /// `claim_start` returned a win and this opening event.
    Won(Box<Event>),
    /// `claim_start` returned `held_by`.
    Lost,
    /// `claim_start` failed; a later read found the run's opening event (we hold it from then on).
    FoundAfterError,
    /// `claim_start` failed and the read found nothing (or could not read): unknown.
    Unknown,
}

#[derive(Debug, Clone)]
struct ClaimRec {
    session: String,
    run: String,
    claimed: Claimed,
    /// From when the caller certainly held the session: the claim's reply (or the read that found
    /// the run after an error).
    held_from: Instant,
    /// Until when it certainly held it: the first close call was sent then (`None`: never closed).
    held_until: Option<Instant>,
}

#[derive(Debug, Clone)]
struct AppendRec {
    session: String,
    run: String,
    text: String,
    /// The stored event the call returned; `None` = the call failed (unknown outcome).
    acked: Option<Event>,
}

#[derive(Debug, Default)]
struct Log {
    claims: Vec<ClaimRec>,
    appends: Vec<AppendRec>,
    /// Resumes that returned their event.
    resumes: Vec<AppendRec>,
    ok: u64,
    errored: u64,
    untyped: Vec<String>,
}

impl Log {
    fn outcome<T>(&mut self, r: &Result<T, Error>) {
        match r {
            Ok(_) => self.ok += 1,
            Err(e) => {
                self.errored += 1;
                if !e.is_transient() {
                    self.untyped.push(e.to_string());
                }
            }
        }
    }
}

pub(crate) struct Load {
    connect: Connect,
    namespace: String,
    log: Arc<Mutex<Log>>,
    tasks: Vec<JoinHandle<()>>,
    setup_error: Option<String>,
}

/// How the load (and the checks, with a fresh client) open the event store under test.
#[derive(Debug, Clone)]
enum Connect {
    Redis {
        url: String,
        options: RedisStoreOptions,
    },
    Postgres {
        url: String,
        options: PostgresOptions,
    },
}

impl Connect {
    fn of(target: &Target) -> Connect {
        match target.backend {
            Backend::Redis => {
                let mut options = RedisStoreOptions::default().prefix(unique_prefix("chaos-store"));
                // Fail fast under faults: an error is an unknown outcome the checks account for.
                options.command_timeout = Duration::from_secs(2);
                Connect::Redis {
                    url: target.url.clone(),
                    options,
                }
            }
            Backend::Postgres => Connect::Postgres {
                url: target.url.clone(),
                options: PostgresOptions::default()
                    .schema(unique_schema("chaos_store"))
                    // Fail fast while the server is down: an error is an unknown outcome.
                    .acquire_timeout(Duration::from_secs(2)),
            },
        }
    }

    async fn open(&self) -> Result<Arc<dyn EventStore>, Error> {
        match self {
            Connect::Redis { url, options } => Ok(Arc::new(
                RedisEventStore::connect_with(url, options.clone()).await?,
            )),
            Connect::Postgres { url, options } => Ok(Arc::new(
                PostgresEventStore::open_with(url, options.clone()).await?,
            )),
        }
    }

    /// The namespace the loads use: on a cluster, one whose slot the failover hits.
    async fn namespace(&self, target: &Target) -> String {
        match self {
            Connect::Redis { url, options } => {
                let Ok(store) = RedisEventStore::connect_with(url, options.clone()).await else {
                    return "ns-0".into();
                };
                let keys = store.keys().clone();
                let _ = store.close().await;
                let t = target.clone();
                tokio::task::spawn_blocking(move || {
                    crate::name_on_target(&t, "ns", |ns| keys.runs(ns))
                })
                .await
                .unwrap_or_else(|_| "ns-0".into())
            }
            Connect::Postgres { .. } => "ns-0".into(),
        }
    }
}

fn started() -> RunStarted {
    RunStarted {
        invocable: "chaos".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("go")],
    }
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            usd: None,
        },
    })
}

fn text_of(e: &Event) -> Option<&str> {
    match &e.payload {
        Payload::TextDelta(m) => Some(&m.text),
        _ => None,
    }
}

fn is_open(s: RunStatus) -> bool {
    matches!(
        s,
        RunStatus::Running | RunStatus::Paused | RunStatus::WaitingHuman
    )
}

impl Load {
    pub async fn start(target: &Target, scale: &Scale, flags: &Flags) -> Load {
        let connect = Connect::of(target);
        let mut load = Load {
            connect: connect.clone(),
            namespace: String::new(),
            log: Arc::default(),
            tasks: Vec::new(),
            setup_error: None,
        };
        let store = match connect.open().await {
            Ok(s) => s,
            Err(e) => {
                load.setup_error = Some(format!("connect: {e}"));
                return load;
            }
        };
        // One namespace = one slot: put it on the master the failover kills.
        load.namespace = connect.namespace(target).await;
        for w in 0..scale.store_tasks {
            let (store, log, flags) = (store.clone(), load.log.clone(), flags.clone());
            let (ns, sessions, appends) = (
                load.namespace.clone(),
                scale.sessions,
                scale.appends_per_run,
            );
            load.tasks.push(tokio::spawn(async move {
                worker(w, store, ns, sessions, appends, log, flags).await;
            }));
        }
        load
    }

    pub async fn finish(self, target: &Target, scale: &Scale, lossy: bool) -> AdapterReport {
        let mut report = AdapterReport::new("event-store");
        if let Some(e) = self.setup_error {
            report.check("setup", String::new(), vec![e]);
            return report;
        }
        let hung = crate::stop_all(self.tasks, scale.settle_timeout, "a claim/append task").await;
        report.check("no_task_hangs", "every load task stopped".into(), hung);
        let log = std::mem::take(&mut *lock(&self.log));
        report.ok = log.ok;
        report.errored = log.errored;
        report.check(
            "errors_are_transient",
            format!("{} errors, all Unavailable/Contended", log.errored),
            log.untyped.clone(),
        );

        // A fresh client, after the faults.
        let store = match self.connect.open().await {
            Ok(s) => s,
            Err(e) => {
                report.check("fresh_client", String::new(), vec![format!("connect: {e}")]);
                return report;
            }
        };
        check(store.as_ref(), &self.namespace, &log, lossy, &mut report).await;
        let _ = target;
        drop(store);
        report
    }
}

async fn worker(
    w: usize,
    store: Arc<dyn EventStore>,
    ns: String,
    sessions: usize,
    appends: usize,
    log: Arc<Mutex<Log>>,
    flags: Flags,
) {
    let mut n = 0usize;
    while !flags.stopped() {
        n += 1;
        let session = format!("s{}", rand::random_range(0..sessions));
        let run = format!("r{w}-{n}");
        let Ok(ctx) = RunContext::new(run.clone())
            .with_session(session.clone())
            .with_namespace(ns.clone())
        else {
            return;
        };
        let r = store.claim_start(&ctx, started(), ORIGIN, HOUR).await;
        let replied = Instant::now();
        lock(&log).outcome(&r);
        let claimed = match r {
            Ok((claim, Some(event))) if claim.won() => Claimed::Won(Box::new(event)),
            Ok(_) => Claimed::Lost,
            Err(_) => resolve(store.as_ref(), &ctx, &flags).await,
        };
        let mut rec = ClaimRec {
            session: session.clone(),
            run: run.clone(),
            claimed,
            held_from: replied,
            held_until: None,
        };
        if matches!(rec.claimed, Claimed::FoundAfterError) {
            rec.held_from = Instant::now();
        }
        if !matches!(rec.claimed, Claimed::Won(_) | Claimed::FoundAfterError) {
            lock(&log).claims.push(rec);
            tokio::time::sleep(Duration::from_millis(rand::random_range(1..5))).await;
            continue;
        }
        for i in 0..appends {
            let text = format!("{run}/{i}");
            let payload = Payload::TextDelta(MessageText {
                message_id: "m".into(),
                text: text.clone(),
            });
            let r = store.append(&ctx, vec![payload], ORIGIN).await;
            let mut l = lock(&log);
            l.outcome(&r);
            l.appends.push(AppendRec {
                session: session.clone(),
                run: run.clone(),
                text,
                acked: r.ok().and_then(|mut v| v.pop()),
            });
        }
        // One run in three pauses and is resumed (a `claim_resume` that must apply once).
        if n.is_multiple_of(3) {
            let r = store
                .append(
                    &ctx,
                    vec![Payload::RunPaused(RunPaused {
                        reason: Some("chaos".into()),
                    })],
                    ORIGIN,
                )
                .await;
            lock(&log).outcome(&r);
            let resumed = RunResumed {
                reason: Some("chaos".into()),
                value: None,
            };
            let r = store.claim_resume(&ctx, resumed, ORIGIN).await;
            let mut l = lock(&log);
            l.outcome(&r);
            if let Ok(Some(event)) = r {
                l.resumes.push(AppendRec {
                    session: session.clone(),
                    run: run.clone(),
                    text: "run.resumed".into(),
                    acked: Some(event),
                });
            }
        }
        // Close; after an error, read the status before trying again (as a runtime would).
        rec.held_until = Some(Instant::now());
        loop {
            let r = store.append(&ctx, vec![completed()], ORIGIN).await;
            lock(&log).outcome(&r);
            if r.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let s = store.run_status(&ctx).await;
            lock(&log).outcome(&s);
            if s.is_ok_and(|s| !is_open(s)) || flags.stopped() {
                break;
            }
        }
        lock(&log).claims.push(rec);
    }
}

/// After a failed claim: does the run exist? Retries the read a few times.
async fn resolve(store: &dyn EventStore, ctx: &RunContext, flags: &Flags) -> Claimed {
    for _ in 0..50 {
        match store.read_run(ctx, 0).await {
            Ok(events) if events.first().is_some_and(|e| e.kind() == "run.started") => {
                return Claimed::FoundAfterError;
            }
            Ok(_) => return Claimed::Unknown,
            Err(_) if flags.stopped() => return Claimed::Unknown,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    Claimed::Unknown
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

async fn check(
    store: &dyn EventStore,
    ns: &str,
    log: &Log,
    lossy: bool,
    report: &mut AdapterReport,
) {
    let Ok(ns_ctx) = RunContext::new("checker").with_namespace(ns.to_string()) else {
        return;
    };
    let mut lost = 0usize;

    // Every run we know of, read back.
    let mut runs: BTreeMap<(String, String), Result<Vec<Event>, String>> = BTreeMap::new();
    for c in &log.claims {
        if matches!(c.claimed, Claimed::Lost) {
            continue;
        }
        let ctx = ns_ctx.for_run(c.run.clone(), Some(c.session.clone()));
        let got = read_retrying(store, &ctx).await;
        runs.insert((c.session.clone(), c.run.clone()), got);
    }
    let mut read_errors = Vec::new();
    for ((s, r), got) in &runs {
        if let Err(e) = got {
            read_errors.push(format!("{s}/{r}: {e}"));
        }
    }
    report.check(
        "fresh_reads",
        format!("{} runs read back", runs.len()),
        read_errors,
    );
    let events_of = |s: &str, r: &str| -> Option<&Vec<Event>> {
        runs.get(&(s.to_string(), r.to_string()))
            .and_then(|g| g.as_ref().ok())
    };

    // Won claims exist, with the opening event the caller was given.
    let mut missing = Vec::new();
    let mut won = 0usize;
    let mut absent_runs: BTreeSet<(String, String)> = BTreeSet::new();
    for c in &log.claims {
        let Claimed::Won(opening) = &c.claimed else {
            continue;
        };
        won += 1;
        match events_of(&c.session, &c.run).and_then(|e| e.first()) {
            Some(first) if first.to_json() == opening.to_json() => {}
            Some(first) if lossy && first.kind() != "run.started" => {
                lost += 1;
                absent_runs.insert((c.session.clone(), c.run.clone()));
            }
            Some(first) => missing.push(format!(
                "{}/{}: first event is {} not the opening returned",
                c.session,
                c.run,
                first.kind()
            )),
            None if lossy => {
                lost += 1;
                absent_runs.insert((c.session.clone(), c.run.clone()));
            }
            None => missing.push(format!("{}/{}: won but no run stored", c.session, c.run)),
        }
    }
    report.check(
        "won_claims_exist",
        format!("{won} claims returned Started, each run stored with its opening event"),
        missing,
    );

    // No two certain holds of one session overlap (from what the callers saw).
    let mut by_session: BTreeMap<&str, Vec<&ClaimRec>> = BTreeMap::new();
    for c in &log.claims {
        if matches!(c.claimed, Claimed::Won(_) | Claimed::FoundAfterError)
            && !absent_runs.contains(&(c.session.clone(), c.run.clone()))
        {
            by_session.entry(&c.session).or_default().push(c);
        }
    }
    let mut overlaps = Vec::new();
    for (s, holds) in by_session {
        let spans = holds
            .iter()
            .map(|c| (c.run.as_str(), c.held_from, c.held_until))
            .collect();
        for (a, b) in overlapping(spans) {
            overlaps.push(format!("{s}: {a} and {b} held it at once"));
        }
    }
    report.check(
        "one_claim_at_a_time",
        format!(
            "{} held claims over {} sessions, none overlapping",
            log.claims
                .iter()
                .filter(|c| matches!(c.claimed, Claimed::Won(_) | Claimed::FoundAfterError))
                .count(),
            log.claims
                .iter()
                .map(|c| &c.session)
                .collect::<BTreeSet<_>>()
                .len()
        ),
        overlaps,
    );

    // The store's state: at most one open run per session; no run we never claimed.
    let known: BTreeSet<&str> = log.claims.iter().map(|c| c.run.as_str()).collect();
    match store.list_runs(&ns_ctx, None).await {
        Ok(listed) => {
            let mut open: HashMap<&str, Vec<&str>> = HashMap::new();
            let mut phantoms = Vec::new();
            for r in &listed {
                if is_open(r.status) {
                    open.entry(&r.log_key).or_default().push(&r.run_id);
                }
                if !known.contains(r.run_id.as_str()) {
                    phantoms.push(format!("{}/{}", r.log_key, r.run_id));
                }
            }
            let doubles: Vec<String> = open
                .iter()
                .filter(|(_, runs)| runs.len() > 1)
                .map(|(s, runs)| format!("{s}: open runs {runs:?}"))
                .collect();
            report.check(
                "at_most_one_open_run",
                format!(
                    "{} runs listed, {} open",
                    listed.len(),
                    open.values().map(Vec::len).sum::<usize>()
                ),
                doubles,
            );
            report.check(
                "no_phantom_runs",
                "every listed run was claimed by the load".into(),
                phantoms,
            );
        }
        Err(e) => report.check("at_most_one_open_run", String::new(), vec![e.to_string()]),
    }

    // Dense seqs; no append twice; every acknowledged append at its seq.
    let mut holes = Vec::new();
    let mut doubled = Vec::new();
    let mut seqs_checked = 0usize;
    for ((s, r), got) in &runs {
        let Ok(events) = got else { continue };
        seqs_checked += events.len();
        if let Some((i, e)) = events.iter().enumerate().find(|(i, e)| e.seq != *i as u64) {
            holes.push(format!("{s}/{r}: event {i} has seq {}", e.seq));
        }
        let mut seen = BTreeSet::new();
        for t in events.iter().filter_map(text_of) {
            if !seen.insert(t) {
                doubled.push(format!("{s}/{r}: {t:?} stored twice"));
            }
        }
        let starts = events.iter().filter(|e| e.kind() == "run.started").count();
        if starts > 1 {
            doubled.push(format!("{s}/{r}: {starts} run.started events"));
        }
    }
    report.check(
        "dense_seqs",
        format!("{seqs_checked} events in {} runs, seqs 0..n", runs.len()),
        holes,
    );
    report.check(
        "nothing_applied_twice",
        format!(
            "{} appends ({} with unknown outcome) at most once each",
            log.appends.len(),
            log.appends.iter().filter(|a| a.acked.is_none()).count()
        ),
        doubled,
    );
    let mut gone = Vec::new();
    let mut acked = 0usize;
    for a in &log.appends {
        let Some(e) = &a.acked else { continue };
        acked += 1;
        let stored = events_of(&a.session, &a.run).and_then(|ev| ev.get(e.seq as usize));
        if stored.is_some_and(|s| s.to_json() == e.to_json()) {
            continue;
        }
        if lossy {
            lost += 1;
        } else {
            gone.push(format!(
                "{}/{}: acknowledged {:?} (seq {}) not stored there",
                a.session, a.run, a.text, e.seq
            ));
        }
    }
    let mut resumes_gone = Vec::new();
    for a in &log.resumes {
        let Some(e) = &a.acked else { continue };
        let events = events_of(&a.session, &a.run);
        let stored = events.and_then(|ev| ev.get(e.seq as usize));
        let count = events.map_or(0, |ev| {
            ev.iter().filter(|x| x.kind() == "run.resumed").count()
        });
        if count > 1 {
            resumes_gone.push(format!(
                "{}/{}: {count} run.resumed events",
                a.session, a.run
            ));
        }
        if stored.is_some_and(|s| s.to_json() == e.to_json()) {
            continue;
        }
        if lossy {
            lost += 1;
        } else {
            resumes_gone.push(format!(
                "{}/{}: resumed (seq {}) not stored there",
                a.session, a.run, e.seq
            ));
        }
    }
    report.check(
        "resumes_present_once",
        format!(
            "{} claim_resume calls returned Resumed, each stored once at its seq",
            log.resumes.len()
        ),
        resumes_gone,
    );
    report.check(
        "acknowledged_appends_present",
        format!("{acked} acknowledged appends read back at their seq"),
        gone,
    );
    if lost > 0 {
        report.note(format!(
            "{lost} acknowledged writes (claims/appends) missing after the failover: the master \
             acknowledged them before its replica had them (asynchronous replication)"
        ));
    }
}

async fn read_retrying(store: &dyn EventStore, ctx: &RunContext) -> Result<Vec<Event>, String> {
    let mut last = String::new();
    for _ in 0..20 {
        match store.read_run(ctx, 0).await {
            Ok(e) => return Ok(e),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}

/// Runs of one session whose certain holds `[from, until)` overlap (`until: None` = never
/// released). Sorted by start, an overlap always shows between neighbours.
fn overlapping(mut holds: Vec<(&str, Instant, Option<Instant>)>) -> Vec<(String, String)> {
    holds.sort_by_key(|h| h.1);
    holds
        .windows(2)
        .filter(|w| w[0].2.is_none_or(|until| w[1].1 < until))
        .map(|w| (w[0].0.to_string(), w[1].0.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_holds_are_found_and_sequential_ones_are_not() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // a then b after a's release: fine.
        assert!(
            overlapping(vec![
                ("a", at(0), Some(at(10))),
                ("b", at(10), Some(at(20)))
            ])
            .is_empty()
        );
        // b starts before a's release.
        assert_eq!(
            overlapping(vec![("b", at(5), Some(at(20))), ("a", at(0), Some(at(10)))]),
            vec![("a".to_string(), "b".to_string())]
        );
        // a never released: any later hold overlaps it.
        assert_eq!(
            overlapping(vec![("a", at(0), None), ("b", at(50), Some(at(60)))]).len(),
            1
        );
    }
}
