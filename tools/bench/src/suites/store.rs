//! Event store cases, the same for every adapter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::{ClientLike, KeysInterface};
use switchyard_kit::core::event::{
    Block, InvocableKind, MessageText, Payload, RunCompleted, RunStarted, Usage,
};
use switchyard_kit::core::store::{Claimed, MAX_LINE, Multitask};
use switchyard_kit::core::{EventStore, MemoryEventStore, RunContext};
use switchyard_kit::store_redis::{RedisEventStore, RedisStoreOptions};
use switchyard_kit::store_sqlite::SqliteEventStore;
use switchyard_store_postgres::{PostgresEventStore, PostgresLayout, PostgresOptions};

use super::{at_least, case};
use crate::commandstats::CommandStats;
use crate::floor::{PG_TX, PG_TX64, RTT, SET64, SQLITE_TX};
use crate::measure::{Sample, closed_loop, err, fixed_work, pct};
use crate::report::Case;
use crate::{Ctx, floor};

const HOUR: Duration = Duration::from_secs(3600);
const ORIGIN: &str = "bench";
pub(crate) const APPEND_1: &str = "append, 1 writer, 1 event per call";
pub(crate) const APPEND_64: &str = "append, 64 writers on 64 runs";
pub(crate) const APPEND_500: &str = "append, 500 concurrent appenders to 1 run";
pub(crate) const CLAIM_64: &str = "claim_start, 64 contenders on 1 session";
pub(crate) const CLAIM_FRESH: &str = "claim_start, fresh session";
pub(crate) const CLAIM_CLOSED: &str = "claim_start, session with 500 closed runs";
pub(crate) const HAND_OFF: &str = "enqueue hand-off (previous run ends → next run started)";

fn started() -> RunStarted {
    RunStarted {
        invocable: "helper".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 10,
            output_tokens: 20,
            usd: None,
        },
    })
}

/// A typical streamed chunk.
fn delta(i: u64) -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: format!("a chunk of streamed text, number {i}"),
    })
}

pub(crate) async fn redis(ctx: &Ctx) -> Vec<Case> {
    let options = RedisStoreOptions::default().prefix(format!("{}:store", ctx.prefix));
    match RedisEventStore::connect_with(ctx.redis(), options).await {
        Ok(store) => {
            let store: Arc<dyn EventStore> = Arc::new(store);
            cases(ctx, "redis", store).await
        }
        Err(e) => vec![failed("redis", e)],
    }
}

pub(crate) async fn sqlite(ctx: &Ctx) -> Vec<Case> {
    match SqliteEventStore::open(ctx.sqlite_dir.join("store.db")).await {
        Ok(store) => {
            let store: Arc<dyn EventStore> = Arc::new(store);
            cases(ctx, "sqlite", store).await
        }
        Err(e) => vec![failed("sqlite", e)],
    }
}

/// The in-process store: the hand-off case only, the line's own cost without I/O, for the
/// other adapters' rows to be read against.
pub(crate) async fn memory(ctx: &Ctx) -> Vec<Case> {
    let store: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
    cases_of(ctx, "memory", store, Some(&[HAND_OFF]), "").await
}

/// The adapter name of the Postgres store on the switchyard layout (ADR 0378), measured in the
/// same run as the default, agentdeck's layout (ADR 0377), which must keep ≥ 0.8× its rates.
const PG_SWITCHYARD: &str = "postgres (switchyard layout)";

pub(crate) async fn postgres(ctx: &Ctx) -> Vec<Case> {
    // Case by case, the two layouts in the order switchyard, agentdeck, agentdeck, switchyard,
    // and each layout's two measurements merged: the server's flush times drift over minutes on
    // a shared machine, and in this order a drift that is steady over the four falls on both
    // layouts alike, where one measurement each, always in the same order, charged it to the
    // second. Each layout's store is opened for its measurement and closed after it, so one pool
    // of 64 connections is open at a time (a server given by `--postgres` may allow only 100).
    let groups: [&[&str]; 6] = [
        &[APPEND_1],
        &[APPEND_64],
        &[APPEND_500],
        &[CLAIM_64],
        &[CLAIM_FRESH, CLAIM_CLOSED],
        &[HAND_OFF],
    ];
    let switchyard = (
        PG_SWITCHYARD,
        PostgresLayout::Switchyard,
        "store_switchyard",
    );
    let agentdeck = ("postgres", PostgresLayout::Agentdeck, "store");
    let mut firsts = Vec::new();
    let mut seconds = Vec::new();
    let mut unopened = Vec::new();
    for group in groups {
        for (i, (adapter, layout, schema)) in [switchyard, agentdeck, agentdeck, switchyard]
            .into_iter()
            .enumerate()
        {
            if unopened.contains(&adapter) {
                continue;
            }
            // Pool as large as the widest case's concurrency that shares connections (64
            // writers).
            let options = PostgresOptions::default()
                .schema(ctx.pg_schema(schema))
                .layout(layout)
                .max_connections(64);
            match PostgresEventStore::open_with(ctx.postgres(), options).await {
                Ok(store) => {
                    let store = Arc::new(store);
                    // The second measurement's sessions are new ones: the cases count on
                    // empty sessions (one winner per claim, a run read back whole).
                    let pass = if i < 2 { "" } else { "-again" };
                    let cases = cases_of(ctx, adapter, store.clone(), Some(group), pass).await;
                    if i < 2 { &mut firsts } else { &mut seconds }.extend(cases);
                    store.close().await;
                }
                Err(e) => {
                    unopened.push(adapter);
                    firsts.push(failed(adapter, e));
                }
            }
        }
    }
    let mut out: Vec<Case> = firsts
        .into_iter()
        .map(|first| {
            let second = seconds
                .iter()
                .find(|c| c.adapter == first.adapter && c.name == first.name);
            match second {
                Some(second) => merged(first, second),
                None => first,
            }
        })
        .collect();
    // The layouts side by side: each case of agentdeck's layout against the same case of the
    // switchyard layout, both measured twice around each other on the same server.
    let mut compared = Vec::new();
    for name in [APPEND_1, APPEND_64, APPEND_500, CLAIM_64, CLAIM_FRESH] {
        let find = |adapter: &str| out.iter().find(|c| c.adapter == adapter && c.name == name);
        if let (Some(ours), Some(old)) = (find("postgres"), find(PG_SWITCHYARD)) {
            let mut c = ours
                .clone()
                .against(&format!("{name} (switchyard layout)"), Some(old.rate));
            c.name = format!("{name}: agentdeck layout vs switchyard layout");
            let met = at_least(c.ratio, 0.8) && c.errors == 0;
            compared.push(c.target("≥ 0.8× switchyard layout", met));
        }
    }
    out.extend(compared);
    out
}

/// One case measured twice, as one: operations, errors and seconds added, the rate weighted by
/// each measurement's seconds, the median latency and the ratio to a floor the two's means, the
/// 99th percentile the larger of the two; a target is met only if both met it.
fn merged(first: Case, second: &Case) -> Case {
    let secs = first.secs + second.secs;
    let rate = if secs > 0.0 {
        (first.rate * first.secs + second.rate * second.secs) / secs
    } else {
        first.rate
    };
    let note = if second.note.is_empty() || second.note == first.note {
        format!("{} (measured twice, merged)", first.note)
    } else {
        format!("{}; {} (measured twice)", first.note, second.note)
    };
    Case {
        ops: first.ops + second.ops,
        errors: first.errors + second.errors,
        secs,
        rate,
        p50_ms: first.p50_ms.zip(second.p50_ms).map(|(a, b)| (a + b) / 2.0),
        p99_ms: first.p99_ms.zip(second.p99_ms).map(|(a, b)| a.max(b)),
        ratio: first.ratio.zip(second.ratio).map(|(a, b)| (a + b) / 2.0),
        met: first.met.zip(second.met).map(|(a, b)| a && b).or(first.met),
        note,
        ..first
    }
}

pub(crate) fn failed(adapter: &str, e: impl std::fmt::Display) -> Case {
    let s = Sample {
        errors: 1,
        first_error: Some(format!("cannot open: {e}")),
        ..Sample::default()
    };
    case("store", adapter, "open", "", &s, 1.0)
}

async fn cases(ctx: &Ctx, adapter: &'static str, store: Arc<dyn EventStore>) -> Vec<Case> {
    cases_of(ctx, adapter, store, None, "").await
}

/// The cases of `group` (every case when `None`) that the run's `--only` wants.
async fn cases_of(
    ctx: &Ctx,
    adapter: &'static str,
    store: Arc<dyn EventStore>,
    group: Option<&[&str]>,
    pass: &'static str,
) -> Vec<Case> {
    let wants = |name: &str| ctx.wants(name) && group.is_none_or(|g| g.contains(&name));
    let redis = adapter == "redis";
    let postgres = adapter.starts_with("postgres");
    let mut out = Vec::new();

    if wants(APPEND_1) {
        // Redis: the append script's server time, from INFO commandstats read before and
        // after this case.
        let before = if redis {
            CommandStats::now(ctx.redis()).await
        } else {
            None
        };
        let st = store.clone();
        let s = closed_loop(1, ctx.case_time, move |_, i| {
            let st = st.clone();
            async move {
                let rc = RunContext::new("one-writer").with_session(format!("append-1{pass}"));
                st.append(&rc, vec![delta(i)], ORIGIN)
                    .await
                    .map(drop)
                    .map_err(err)
            }
        })
        .await;
        let c = case("store", adapter, APPEND_1, "events/s", &s, 1.0);
        out.push(if redis {
            let c = c.against(RTT, ctx.floors.redis_rtt);
            let met = at_least(c.ratio, 0.7) && c.errors == 0;
            let after = CommandStats::now(ctx.redis()).await;
            let note = match (&before, &after) {
                (Some(before), Some(after)) => {
                    let stats = after.since(before);
                    let verdict = match stats.0.get("evalsha").map(|s| s.usec_per_call()) {
                        Some(us) if us <= 8.0 => "met",
                        Some(_) => "not met",
                        None => "not measured",
                    };
                    format!(
                        "{} (issue 18: ≤ 8 µs per append, {verdict})",
                        stats.script_note("evalsha")
                    )
                }
                _ => "INFO commandstats could not be read".to_string(),
            };
            c.target("≥ 0.7× RTT floor", met).note(note)
        } else if postgres {
            let c = c.against(PG_TX, ctx.floors.postgres_tx);
            let met = at_least(c.ratio, 0.5) && c.errors == 0;
            c.target("≥ 0.5× 1-row INSERT floor", met)
        } else {
            let c = c.against(SQLITE_TX, ctx.floors.sqlite_tx);
            let met = c.rate >= 5_000.0 && c.errors == 0;
            c.target("≥ 5,000 events/s", met)
        });
    }

    if wants(APPEND_64) {
        let st = store.clone();
        let s = closed_loop(64, ctx.case_time, move |w, i| {
            let st = st.clone();
            async move {
                let rc =
                    RunContext::new(format!("writer-{w}")).with_session(format!("append-64{pass}"));
                st.append(&rc, vec![delta(i)], ORIGIN)
                    .await
                    .map(drop)
                    .map_err(err)
            }
        })
        .await;
        let c = case("store", adapter, APPEND_64, "events/s", &s, 1.0);
        out.push(if redis {
            let c = c.against(SET64, ctx.floors.redis_set64);
            let met = at_least(c.ratio, 0.6) && c.errors == 0;
            c.target("≥ 0.6× 64-connection SET floor", met)
        } else if postgres {
            c.against(PG_TX64, ctx.floors.postgres_tx64)
        } else {
            c.against(SQLITE_TX, ctx.floors.sqlite_tx)
        });
    }

    if wants(APPEND_500) {
        let per = ctx.pick(4, 20);
        let st = store.clone();
        let s = fixed_work(500, per, move |_, i| {
            let st = st.clone();
            async move {
                let rc = RunContext::new("hot").with_session(format!("append-500{pass}"));
                st.append(&rc, vec![delta(i)], ORIGIN)
                    .await
                    .map(drop)
                    .map_err(err)
            }
        })
        .await;
        // Every append must have landed once, with seqs 0..n and no gap.
        let rc = RunContext::new("hot").with_session(format!("append-500{pass}"));
        let seqs = match store.read_run(&rc, 0).await {
            Ok(events) => {
                let ok = events.iter().enumerate().all(|(i, e)| e.seq == i as u64)
                    && events.len() as u64 == s.ops - s.errors;
                format!("{} events read back, seqs contiguous: {}", events.len(), ok)
            }
            Err(e) => format!("read back failed: {e}"),
        };
        let c = case("store", adapter, APPEND_500, "events/s", &s, 1.0);
        let c = if redis {
            c.against(SET64, ctx.floors.redis_set64)
        } else if postgres {
            c.against(PG_TX64, ctx.floors.postgres_tx64)
        } else {
            c.against(SQLITE_TX, ctx.floors.sqlite_tx)
        };
        let met = c.errors == 0;
        out.push(c.target("0 errors", met).note(seqs));
    }

    if wants(CLAIM_64) {
        let rounds = ctx.pick(5, 20);
        // One unmeasured round first, so the case measures claims on a warm pool: a store opened
        // for this case opens its connections during the first round, and on PostgreSQL each
        // new connection compiles the claim's function and plans its statements on its first
        // call. That once-per-connection cost is not a claim's, and it fell on 64 of a quick
        // run's 320 claims.
        let warm: Vec<_> = (0..64)
            .map(|i| {
                let st = store.clone();
                tokio::spawn(async move {
                    let rc = RunContext::new(format!("r{i}"))
                        .with_session(format!("contended-warm-up{pass}"));
                    st.claim_start(&rc, started(), ORIGIN, HOUR).await.map(drop)
                })
            })
            .collect();
        for t in warm {
            let _ = t.await;
        }
        let mut total = Sample::default();
        let mut winners = Vec::with_capacity(rounds);
        let start = Instant::now();
        for round in 0..rounds {
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let st = store.clone();
                    tokio::spawn(async move {
                        let session = format!("contended-{round}{pass}");
                        let rc = RunContext::new(format!("r{i}")).with_session(session.clone());
                        let t = Instant::now();
                        let r = st.claim_start(&rc, started(), ORIGIN, HOUR).await;
                        (r.map(|(claim, _)| claim.won()), t.elapsed())
                    })
                })
                .collect();
            let mut won = 0;
            for t in tasks {
                total.ops += 1;
                match t.await {
                    Ok((Ok(w), d)) => {
                        won += usize::from(w);
                        total.lat.push(d);
                    }
                    Ok((Err(e), d)) => {
                        total.errors += 1;
                        total.first_error.get_or_insert(e.to_string());
                        total.lat.push(d);
                    }
                    Err(e) => {
                        total.errors += 1;
                        total.first_error.get_or_insert(e.to_string());
                    }
                }
            }
            winners.push(won);
        }
        total.elapsed = start.elapsed();
        total.lat.sort_unstable();
        let c = case("store", adapter, CLAIM_64, "claims/s", &total, 1.0);
        let one_each = winners.iter().all(|w| *w == 1);
        let met = one_each && c.p99_ms.is_some_and(|p| p < 100.0) && c.errors == 0;
        let note = if one_each {
            format!("exactly 1 winner in each of {rounds} rounds")
        } else {
            format!("winners per round: {winners:?}")
        };
        out.push(c.target("1 winner, p99 < 100 ms", met).note(note));
    }

    if wants(CLAIM_FRESH) || wants(CLAIM_CLOSED) {
        out.extend(claim_history(ctx, adapter, &store, pass).await);
    }

    if wants(HAND_OFF) {
        out.push(hand_off(ctx, adapter, &store, pass).await);
    }
    out
}

/// Runs waiting behind the holder in each round of the hand-off case.
const LINE: usize = 32;

/// The enqueue hand-off (ADR 0394): a holder open on a session and [`LINE`] runs enqueued behind it
/// (untimed), then each run in turn ends the way the gateway's run service ends one, an
/// `append_if_open` of `run.completed` followed by a `hand_off`, timed from just before the
/// ending append until the hand-off answers the next run's stored `run.started`. Rounds on
/// fresh sessions repeat until the case time has passed.
async fn hand_off(ctx: &Ctx, adapter: &str, store: &Arc<dyn EventStore>, pass: &str) -> Case {
    let mut s = Sample::default();
    let mut measured = Duration::ZERO;
    let mut rounds = 0usize;
    let mut in_order = true;
    let mut left_waiting = 0usize;
    let until = Instant::now() + ctx.case_time;
    // At least one round, so a short case time still gives a row.
    while rounds == 0 || Instant::now() < until {
        let session = format!("hand-off-{rounds}{pass}");
        match hand_off_round(store, &session, &mut s, &mut measured).await {
            Ok(round) => {
                in_order &= round.in_order;
                left_waiting += round.left_waiting;
            }
            Err(e) => {
                s.errors += 1;
                s.first_error.get_or_insert(e);
                // A round that cannot be set up would fail the same way again.
                break;
            }
        }
        rounds += 1;
    }
    // The rate counts the timed steps only: the enqueue claims that fill each line are setup.
    s.elapsed = measured;
    s.lat.sort_unstable();
    let c = case("store", adapter, HAND_OFF, "hand-offs/s", &s, 1.0);
    let note = format!(
        "{rounds} rounds of a holder and {LINE} enqueued runs; timed from the ending \
         append_if_open to the next run.started returned by hand_off; rate over timed steps only"
    );
    let note = if in_order && left_waiting == 0 {
        format!("{note}; every run started once, in line order")
    } else {
        format!(
            "{note}; out of order: {}, left waiting: {left_waiting}",
            !in_order
        )
    };
    let met = c.p50_ms.is_some_and(|p| p <= 5.0) && c.errors == 0 && in_order;
    c.target("p50 ≤ 5 ms", met).note(note)
}

/// What one round of the hand-off case saw besides its timings.
struct Round {
    /// Each hand-off started the run next in line, and nothing else.
    in_order: bool,
    /// Runs still in the line after the last one ended.
    left_waiting: usize,
}

/// One round on `session`: the holder, [`LINE`] enqueued runs, then [`LINE`] timed hand-offs
/// into `s` (their time added to `measured`), and the last run ended untimed. Setup failures
/// are the error; a timed step that fails is counted in `s` and ends the round.
async fn hand_off_round(
    store: &Arc<dyn EventStore>,
    session: &str,
    s: &mut Sample,
    measured: &mut Duration,
) -> Result<Round, String> {
    let holder = RunContext::new("holder").with_session(session);
    let (claim, _) = store
        .claim_start(&holder, started(), ORIGIN, HOUR)
        .await
        .map_err(err)?;
    if !claim.won() {
        return Err(format!("the holder's claim on {session} lost"));
    }
    let mut order = Vec::with_capacity(LINE);
    for n in 0..LINE {
        let rc = RunContext::new(format!("queued-{n:02}")).with_session(session);
        match store
            .claim(&rc, started(), ORIGIN, HOUR, Multitask::Enqueue)
            .await
            .map_err(err)?
        {
            Claimed::Queued { .. } => order.push(rc),
            other => return Err(format!("an enqueue claim behind a fresh holder: {other:?}")),
        }
    }
    let mut in_order = true;
    let mut current = holder;
    for next in order {
        s.ops += 1;
        let t = Instant::now();
        let step = async {
            complete(store, &current).await?;
            store.hand_off(&current).await.map_err(err)
        }
        .await;
        let took = t.elapsed();
        *measured += took;
        s.lat.push(took);
        match step {
            Ok(Some(h)) if h.event.run_id == next.run_id() => {}
            Ok(other) => {
                in_order = false;
                s.errors += 1;
                s.first_error.get_or_insert(format!(
                    "after {} ended, the hand-off started {:?}, not {}",
                    current.run_id(),
                    other.map(|h| h.event.run_id),
                    next.run_id()
                ));
                break;
            }
            Err(e) => {
                s.errors += 1;
                s.first_error.get_or_insert(e);
                break;
            }
        }
        current = next;
    }
    // The last run ends too, so the round leaves nothing open; untimed.
    complete(store, &current).await?;
    let left_waiting = store
        .line_read(&current, MAX_LINE)
        .await
        .map_err(err)?
        .len();
    Ok(Round {
        in_order,
        left_waiting,
    })
}

/// Ends the open run `rc` with `run.completed`; an error when it was not open.
async fn complete(store: &Arc<dyn EventStore>, rc: &RunContext) -> Result<(), String> {
    let ended = store
        .append_if_open(rc, vec![completed()], ORIGIN)
        .await
        .map_err(err)?;
    match ended.not_open() {
        Some(status) => Err(format!("{} was {status:?}, not open", rc.run_id())),
        None => Ok(()),
    }
}

/// One winning claim, timed, then the claimed run is closed (untimed) so the next claim on the
/// session takes the same path.
async fn timed_claim(
    store: &Arc<dyn EventStore>,
    session: &str,
    run: &str,
) -> Result<Duration, String> {
    let rc = RunContext::new(run).with_session(session);
    let t = Instant::now();
    let (claim, _) = store
        .claim_start(&rc, started(), ORIGIN, HOUR)
        .await
        .map_err(err)?;
    let took = t.elapsed();
    if !claim.won() {
        return Err(format!("claim on {session} lost to {:?}", claim.held_by));
    }
    store
        .append(&rc, vec![completed()], ORIGIN)
        .await
        .map_err(err)?;
    Ok(took)
}

async fn claim_history(
    ctx: &Ctx,
    adapter: &str,
    store: &Arc<dyn EventStore>,
    pass: &str,
) -> Vec<Case> {
    let history = format!("history{pass}");
    let mut setup_errors = 0;
    for r in 0..500 {
        if timed_claim(store, &history, &format!("closed-{r:03}"))
            .await
            .is_err()
        {
            setup_errors += 1;
        }
    }
    let samples = ctx.pick(100, 300);
    let (mut fresh, mut closed) = (Sample::default(), Sample::default());
    // Redis: a SET round trip on a plain connection between the claims, so the fresh claim's
    // p50 has a round-trip p50 of the same moments to be compared with.
    let rtt_client = if adapter == "redis" {
        floor::client(ctx.redis()).await.ok()
    } else {
        None
    };
    const RTT_BURST: usize = 4;
    let mut rtt = Vec::with_capacity(samples * RTT_BURST);
    let rtt_key = format!("{}:store:claim-rtt", ctx.prefix);
    let start = Instant::now();
    // Alternate, so drift (machine load, file growth) hits both alike.
    for i in 0..samples {
        for (sample, session, run) in [
            (&mut fresh, format!("fresh-{i}{pass}"), "first".to_string()),
            (&mut closed, history.clone(), format!("timed-{i}")),
        ] {
            sample.ops += 1;
            match timed_claim(store, &session, &run).await {
                Ok(d) => sample.lat.push(d),
                Err(e) => {
                    sample.errors += 1;
                    sample.first_error.get_or_insert(e);
                }
            }
        }
        // A few back to back, as the claim's own round trips are.
        if let Some(c) = &rtt_client {
            for _ in 0..RTT_BURST {
                let t = Instant::now();
                if c.set::<(), _, _>(&rtt_key, "x".repeat(64), None, None, false)
                    .await
                    .is_ok()
                {
                    rtt.push(t.elapsed());
                }
            }
        }
    }
    let elapsed = start.elapsed();
    if let Some(c) = rtt_client {
        let _: Result<i64, _> = c.del(&rtt_key).await;
        let _ = c.quit().await;
    }
    // Each sample's rate counts only its own half of the alternating loop.
    fresh.elapsed = elapsed / 2;
    closed.elapsed = elapsed / 2;
    fresh.lat.sort_unstable();
    closed.lat.sort_unstable();
    rtt.sort_unstable();
    let f = case("store", adapter, CLAIM_FRESH, "claims/s", &fresh, 1.0)
        .note("timed claim only; each run is then closed, untimed");
    let f = match (f.p50_ms, pct(&rtt, 50.0)) {
        (Some(p50), Some(rtt_p50)) if !rtt_p50.is_zero() => {
            let rtt_ms = rtt_p50.as_secs_f64() * 1e3;
            let mut f = f.note(format!(
                "ratio = p50 / p50 of {} SET round trips interleaved with the claims, {RTT_BURST} at a \
                 time ({rtt_ms:.3} ms)",
                rtt.len()
            ));
            f.floor = Some("SET round trip p50, interleaved".into());
            f.ratio = Some(p50 / rtt_ms);
            let met = p50 <= 4.0 * rtt_ms && f.errors == 0;
            f.target("p50 ≤ 4× SET round trip p50", met)
        }
        _ => f,
    };
    let mut c = case("store", adapter, CLAIM_CLOSED, "claims/s", &closed, 1.0);
    c.floor = Some("p50 of fresh session".into());
    c.ratio = match (c.p50_ms, f.p50_ms) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let met = c.ratio.is_some_and(|r| r <= 2.0) && c.errors == 0 && setup_errors == 0;
    let c = c
        .target("p50 ≤ 2× fresh", met)
        .note("ratio = p50 latency / fresh p50");
    let c = if setup_errors > 0 {
        c.note(format!("{setup_errors} setup claims failed"))
    } else {
        c
    };
    vec![f, c]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(rate: f64, secs: f64, p50: f64, p99: f64, ratio: f64, met: bool) -> Case {
        let s = Sample {
            ops: (rate * secs) as u64,
            ..Sample::default()
        };
        let mut c = case("store", "postgres", APPEND_1, "events/s", &s, 1.0);
        c.rate = rate;
        c.secs = secs;
        c.p50_ms = Some(p50);
        c.p99_ms = Some(p99);
        c.ratio = Some(ratio);
        c.met = Some(met);
        c
    }

    #[test]
    fn two_measurements_merge_into_one_weighted_by_their_seconds() {
        let first = measured(100.0, 1.0, 2.0, 9.0, 0.5, true);
        let second = measured(400.0, 3.0, 4.0, 7.0, 0.7, false);
        let m = merged(first, &second);
        assert_eq!(m.ops, 1_300);
        assert_eq!(m.secs, 4.0);
        // (100 × 1 + 400 × 3) / 4
        assert_eq!(m.rate, 325.0);
        assert_eq!(m.p50_ms, Some(3.0));
        assert_eq!(m.p99_ms, Some(9.0));
        assert!(
            m.ratio.is_some_and(|r| (r - 0.6).abs() < 1e-12),
            "{:?}",
            m.ratio
        );
        // Met only when both measurements met it.
        assert_eq!(m.met, Some(false));
        assert!(m.note.ends_with("(measured twice, merged)"), "{}", m.note);
    }
}
