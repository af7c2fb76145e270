//! Group commit of the queue's three hottest writes (ADR 0236, 0296): the pushes, the acks and
//! the one-task reserves that arrive while earlier batches are in flight become one `INSERT`, one
//! `DELETE` and one `fleet_reserve_many` per queue, each one statement and one commit, instead of
//! one commit per call.
//!
//! A call waits for its batch's commit, so what it returns is as durable as an unbatched call.
//! Nothing waits to fill a batch: a call that finds no batch in flight goes out at once, alone.
//!
//! A push batch wakes the reservers its tasks can serve once it committed (ADR 0347): those of
//! this backend directly, those of other backends with one `NOTIFY` statement per batch, sent
//! only when another backend holds a waiter lease on one of its queues.

use std::collections::HashMap;
use std::sync::Arc;

use switchyard_core::{Error, Result};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::guarded::GuardedPool;
use crate::{WHAT, Wakes};

/// Most calls in one batch.
const MAX_BATCH: usize = 256;
/// Bodies above this go out alone: a batch shares its fate, and one huge body should not fail
/// or slow the others.
pub(crate) const MAX_BATCHED_BODY: usize = 64 * 1024;

pub(crate) enum Job {
    /// Replies once the task is stored; waiting reservers are woken by the batch.
    Push {
        name: String,
        tier: i16,
        body: Vec<u8>,
        digest: String,
        /// The task's record, for a body with an id (ADR 0380).
        record: Option<Record>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Replies whether the receipt was current (and the task is now gone, or its record ended
    /// `completed` with `result`); [`Error::Cancelled`] when a cancel of its task was requested
    /// (the delivery then ends `cancelled`).
    Ack {
        name: String,
        receipt: String,
        /// The receipt carried the mark of a recorded task's delivery.
        recorded: bool,
        result: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<bool>>,
    },
    /// One attempt to reserve one task under `receipt`; replies the reserved row, if any.
    Reserve {
        name: String,
        visibility_ms: u64,
        receipt: String,
        reply: oneshot::Sender<Result<Option<Reserved>>>,
    },
}

/// What a pushed body with an id records: its id, `max_attempts` and last error.
pub(crate) struct Record {
    pub(crate) id: String,
    pub(crate) max_attempts: Option<i32>,
    pub(crate) last_error: Option<String>,
}

/// A task reserved by a batch: tier, body, attempts, deadline.
pub(crate) type Reserved = (i16, Vec<u8>, i32, f64);

/// A row of `fleet_reserve_many`: receipt, tier, body, attempts, deadline.
pub(crate) type ReserveRow = (String, i16, Vec<u8>, i32, f64);

/// What a push batch needs to wake reservers: this backend's waiting reservers, the channel
/// other backends listen on, and this backend's name in `fleet_waiters` (its own leases need
/// no notification).
pub(crate) struct Wake {
    pub(crate) wakes: Arc<Wakes>,
    pub(crate) channel: String,
    pub(crate) waiter: String,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("channel", &self.channel)
            .field("waiter", &self.waiter)
            .finish_non_exhaustive()
    }
}

impl Wake {
    /// After pushed tasks committed, for each `(queue key, tasks, another backend waits)`: wakes
    /// this backend's reservers they can serve in memory (one for one task, all for more), and
    /// sends one `NOTIFY` statement for the queues another backend waits on (ADR 0235, 0347).
    pub(crate) async fn after_push(&self, pool: &GuardedPool, pushed: &[(String, usize, bool)]) {
        for (key, n, _) in pushed {
            self.wakes.pushed(key, *n);
        }
        let payloads: Vec<String> = pushed
            .iter()
            .filter(|(_, _, others)| *others)
            .map(|(key, n, _)| crate::pushed_payload(key, *n))
            .collect();
        notify(pool, &self.channel, &payloads).await;
    }
}

/// The handle calls send their jobs to; the task behind it runs the batches.
#[derive(Debug)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Job>,
    task: tokio::task::JoinHandle<()>,
    wake: Arc<Wake>,
    /// The lanes of the acks of recorded tasks (marked receipts), a queue always in the same
    /// one: each lane runs one `fleet_ack_tasks` at a time with every ack that arrived
    /// meanwhile. The ends of one queue serialize on its flow row anyway (ADR 0380); waiting
    /// here instead of on the row lock makes the batches larger and the server's work per ack
    /// smaller.
    ack_lanes: Vec<mpsc::UnboundedSender<Job>>,
    lane_tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.task.abort();
        for t in &self.lane_tasks {
            t.abort();
        }
    }
}

impl Batcher {
    /// Starts the task that runs the batches, at most `in_flight` at once (at least one).
    pub(crate) fn spawn(pool: GuardedPool, in_flight: usize, wake: Wake) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let wake = Arc::new(wake);
        let (ack_lanes, lane_tasks) = (0..in_flight.max(1))
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                (tx, tokio::spawn(ack_lane(pool.clone(), wake.clone(), rx)))
            })
            .unzip();
        let task = tokio::spawn(run(pool, in_flight.max(1), wake.clone(), rx));
        Batcher {
            tx,
            task,
            wake,
            ack_lanes,
            lane_tasks,
        }
    }

    /// How pushes wake reservers, for the pushes that do not go through a batch.
    pub(crate) fn wake(&self) -> &Wake {
        &self.wake
    }

    /// Sends `job` and waits for its batch's outcome.
    pub(crate) async fn run<T>(&self, job: Job, rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        let tx = match &job {
            Job::Ack {
                name,
                recorded: true,
                ..
            } => {
                let lane = crate::digest(name).bytes().fold(0usize, |h, b| {
                    h.wrapping_mul(31).wrapping_add(usize::from(b))
                });
                &self.ack_lanes[lane % self.ack_lanes.len()]
            }
            _ => &self.tx,
        };
        tx.send(job).map_err(|_| Error::Closed { what: WHAT })?;
        rx.await.map_err(|_| Error::Closed { what: WHAT })?
    }
}

/// One lane of recorded acks: each round takes every ack waiting (up to [`MAX_BATCH`]) and ends
/// them in one call.
async fn ack_lane(pool: GuardedPool, wake: Arc<Wake>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        ack_batch(&pool, &wake.channel, jobs).await;
    }
}

async fn run(
    pool: GuardedPool,
    in_flight: usize,
    wake: Arc<Wake>,
    mut rx: mpsc::UnboundedReceiver<Job>,
) {
    let permits = Arc::new(Semaphore::new(in_flight));
    while let Some(first) = rx.recv().await {
        // While every batch slot is busy, calls pile up here and leave together.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        let wake = wake.clone();
        tokio::spawn(async move {
            execute(&pool, &wake, jobs).await;
            drop(permit);
        });
    }
}

async fn execute(pool: &GuardedPool, wake: &Wake, jobs: Vec<Job>) {
    let mut pushes = Vec::new();
    let mut acks = Vec::new();
    let mut reserves = Vec::new();
    for job in jobs {
        match job {
            Job::Push { .. } => pushes.push(job),
            Job::Ack { .. } => acks.push(job),
            Job::Reserve { .. } => reserves.push(job),
        }
    }
    tokio::join!(
        push_batch(pool, wake, pushes),
        ack_batch(pool, &wake.channel, acks),
        reserve_batches(pool, reserves)
    );
}

/// The reserves of one batch, one `fleet_reserve_many` per queue and visibility: the k-th call
/// gets the k-th task in serve order (or nothing when the queue ran short), under its own
/// receipt, so each call's answer is what it would have been alone, one after the other.
async fn reserve_batches(pool: &GuardedPool, jobs: Vec<Job>) {
    type Calls = Vec<(String, oneshot::Sender<Result<Option<Reserved>>>)>;
    let mut groups: Vec<((String, u64), Calls)> = Vec::new();
    for job in jobs {
        if let Job::Reserve {
            name,
            visibility_ms,
            receipt,
            reply,
        } = job
        {
            let key = (name, visibility_ms);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, calls)) => calls.push((receipt, reply)),
                None => groups.push((key, vec![(receipt, reply)])),
            }
        }
    }
    for ((name, visibility_ms), calls) in groups {
        let receipts: Vec<&str> = calls.iter().map(|(r, _)| r.as_str()).collect();
        let rows: std::result::Result<Vec<ReserveRow>, sqlx::Error> =
            sqlx::query_as("SELECT * FROM fleet_reserve_many($1, $2, $3)")
                .bind(&name)
                .bind(&receipts)
                .bind(crate::secs(visibility_ms))
                .fetch_all(pool)
                .await;
        match rows {
            Ok(rows) => {
                let mut rows: HashMap<String, Reserved> = rows
                    .into_iter()
                    .map(|(r, tier, body, attempts, due)| (r, (tier, body, attempts, due)))
                    .collect();
                for (receipt, reply) in calls {
                    let _ = reply.send(Ok(rows.remove(&receipt)));
                }
            }
            Err(e) => {
                for (_, reply) in calls {
                    let _ = reply.send(Err(shared("queue_reserve", &name, &e)));
                }
            }
        }
    }
}

async fn push_batch(pool: &GuardedPool, wake: &Wake, jobs: Vec<Job>) {
    if jobs.is_empty() {
        return;
    }
    let (mut names, mut tiers, mut bodies, mut digests, mut replies) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::<oneshot::Sender<Result<()>>>::new(),
    );
    let mut records: Vec<Option<Record>> = Vec::new();
    for job in jobs {
        if let Job::Push {
            name,
            tier,
            body,
            digest,
            record,
            reply,
        } = job
        {
            names.push(name);
            tiers.push(tier);
            bodies.push(body);
            digests.push(digest);
            records.push(record);
            replies.push(reply);
        }
    }
    if records.iter().any(Option::is_some) {
        return push_records(pool, wake, names, tiers, bodies, digests, records, replies).await;
    }
    // In the callers' order: each row draws its place in line as it is inserted. Answers the
    // queues on which another backend has a reserver waiting.
    let others: std::result::Result<Vec<String>, sqlx::Error> = sqlx::query_scalar(
        "WITH pushed AS (INSERT INTO fleet_tasks (name, tier, body) \
           SELECT x.n, x.t, x.b FROM unnest($1::text[], $2::int2[], $3::bytea[]) \
             WITH ORDINALITY AS x(n, t, b, o) ORDER BY x.o) \
         SELECT DISTINCT w.queue_key FROM fleet_waiters w \
         WHERE w.queue_key = ANY($4::text[]) AND w.until > fleet_now() AND w.waiter <> $5",
    )
    .bind(&names)
    .bind(&tiers)
    .bind(&bodies)
    .bind(&digests)
    .bind(&wake.waiter)
    .fetch_all(pool)
    .await;
    let others = match others {
        Ok(others) => others,
        Err(e) => {
            for (reply, name) in replies.into_iter().zip(&names) {
                let _ = reply.send(Err(shared("queue_push", name, &e)));
            }
            return;
        }
    };
    for reply in replies {
        let _ = reply.send(Ok(()));
    }
    // Tasks per queue, in first-pushed order.
    let mut pushed: Vec<(String, usize, bool)> = Vec::new();
    for key in digests {
        match pushed.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, n, _)) => *n += 1,
            None => {
                let waits = others.contains(&key);
                pushed.push((key, 1, waits));
            }
        }
    }
    wake.after_push(pool, &pushed).await;
}

/// A push batch with at least one body with an id: one `INSERT` that also writes the records;
/// when an id is known, the finished records of the batch's ids are removed (their ids are free)
/// and the batch runs again, skipping (`ON CONFLICT DO NOTHING`) each body whose id a live or
/// dead task holds, or that an earlier body of the batch took; those calls answer
/// [`Error::AlreadyExists`] and the others are stored, so one taken id does not fail its
/// neighbours. Batches without ids keep the plain
/// statement above (ADR 0380: a body without an id costs what it did).
#[allow(clippy::too_many_arguments)]
async fn push_records(
    pool: &GuardedPool,
    wake: &Wake,
    names: Vec<String>,
    tiers: Vec<i16>,
    bodies: Vec<Vec<u8>>,
    digests: Vec<String>,
    records: Vec<Option<Record>>,
    replies: Vec<oneshot::Sender<Result<()>>>,
) {
    let ids: Vec<Option<&str>> = records
        .iter()
        .map(|r| r.as_ref().map(|r| r.id.as_str()))
        .collect();
    let maxes: Vec<Option<i32>> = records
        .iter()
        .map(|r| r.as_ref().and_then(|r| r.max_attempts))
        .collect();
    let errors: Vec<Option<&str>> = records
        .iter()
        .map(|r| r.as_ref().and_then(|r| r.last_error.as_deref()))
        .collect();
    // Most batches take no known id: first the plain statement with the record's columns,
    // which a taken id fails as a whole; then the one that skips taken ids and says which.
    let first: std::result::Result<Vec<String>, sqlx::Error> = sqlx::query_scalar(
        "WITH pushed AS (INSERT INTO fleet_tasks \
           (name, tier, body, task_id, max_attempts, last_error, submitted_at) \
           SELECT x.n, x.t, x.b, x.i, x.m, x.e, fleet_now() \
           FROM unnest($1::text[], $2::int2[], $3::bytea[], $4::text[], $5::int4[], \
             $6::text[]) WITH ORDINALITY AS x(n, t, b, i, m, e, o) ORDER BY x.o) \
         SELECT DISTINCT w.queue_key FROM fleet_waiters w \
         WHERE w.queue_key = ANY($7::text[]) AND w.until > fleet_now() AND w.waiter <> $8",
    )
    .bind(&names)
    .bind(&tiers)
    .bind(&bodies)
    .bind(&ids)
    .bind(&maxes)
    .bind(&errors)
    .bind(&digests)
    .bind(&wake.waiter)
    .fetch_all(pool)
    .await;
    let rows = match first {
        Ok(others) => Ok(names
            .iter()
            .zip(&ids)
            .filter_map(|(n, i)| i.map(|i| ("p".to_string(), n.clone(), Some(i.to_string()))))
            .chain(others.into_iter().map(|k| ("w".to_string(), k, None)))
            .collect()),
        Err(e) if crate::id_taken(&e) => {
            // Finished tasks give their ids up first (guarantee `task.unique_id`); a failure
            // there leaves those ids taken for this batch, as before.
            let queues: Vec<&str> = names.iter().map(String::as_str).collect();
            if let Err(e) = crate::free_task_ids(pool, "queue_push", &queues, &ids).await {
                tracing::debug!(error = %e, "could not free the ids of finished tasks");
            }
            retry_records(
                pool, wake, &names, &tiers, &bodies, &ids, &maxes, &errors, &digests,
            )
            .await
        }
        Err(e) => Err(e),
    };
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            for (reply, name) in replies.into_iter().zip(&names) {
                let _ = reply.send(Err(shared("queue_push", name, &e)));
            }
            return;
        }
    };
    answer_records(pool, wake, names, digests, records, replies, rows).await;
}

/// Rows `('p', queue, id)` for each recorded body stored, `('w', key, NULL)` for each queue
/// another backend waits on.
type PushRows = Vec<(String, String, Option<String>)>;

/// The push batch again, skipping (`ON CONFLICT DO NOTHING`) each body whose id is taken.
#[allow(clippy::too_many_arguments)]
async fn retry_records(
    pool: &GuardedPool,
    wake: &Wake,
    names: &[String],
    tiers: &[i16],
    bodies: &[Vec<u8>],
    ids: &[Option<&str>],
    maxes: &[Option<i32>],
    errors: &[Option<&str>],
    digests: &[String],
) -> std::result::Result<PushRows, sqlx::Error> {
    sqlx::query_as(
        "WITH pushed AS (INSERT INTO fleet_tasks \
               (name, tier, body, task_id, max_attempts, last_error, submitted_at) \
               SELECT x.n, x.t, x.b, x.i, x.m, x.e, fleet_now() \
               FROM unnest($1::text[], $2::int2[], $3::bytea[], $4::text[], $5::int4[], \
                 $6::text[]) WITH ORDINALITY AS x(n, t, b, i, m, e, o) ORDER BY x.o \
               ON CONFLICT (name, task_id) WHERE task_id IS NOT NULL DO NOTHING \
               RETURNING name, task_id) \
             SELECT 'p', p.name, p.task_id FROM pushed p WHERE p.task_id IS NOT NULL \
             UNION ALL \
             SELECT DISTINCT 'w', w.queue_key, NULL::text FROM fleet_waiters w \
             WHERE w.queue_key = ANY($7::text[]) AND w.until > fleet_now() AND w.waiter <> $8",
    )
    .bind(names)
    .bind(tiers)
    .bind(bodies)
    .bind(ids)
    .bind(maxes)
    .bind(errors)
    .bind(digests)
    .bind(&wake.waiter)
    .fetch_all(pool)
    .await
}

/// Answers the calls of a push batch with records from what it stored, and wakes reservers.
async fn answer_records(
    pool: &GuardedPool,
    wake: &Wake,
    names: Vec<String>,
    digests: Vec<String>,
    records: Vec<Option<Record>>,
    replies: Vec<oneshot::Sender<Result<()>>>,
    rows: PushRows,
) {
    let mut stored: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let mut others: Vec<String> = Vec::new();
    for (kind, a, b) in rows {
        match (kind.as_str(), b) {
            ("p", Some(id)) => {
                stored.insert((a, id));
            }
            _ => others.push(a),
        }
    }
    // Tasks stored per queue, in first-pushed order.
    let mut pushed: Vec<(String, usize, bool)> = Vec::new();
    for ((reply, (name, key)), record) in replies
        .into_iter()
        .zip(names.into_iter().zip(digests))
        .zip(&records)
    {
        if let Some(r) = record {
            // The first body with this id in the batch is the one stored.
            if !stored.remove(&(name, r.id.clone())) {
                let _ = reply.send(Err(crate::already_exists(&r.id)));
                continue;
            }
        }
        let _ = reply.send(Ok(()));
        match pushed.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, n, _)) => *n += 1,
            None => {
                let waits = others.contains(&key);
                pushed.push((key, 1, waits));
            }
        }
    }
    wake.after_push(pool, &pushed).await;
}

/// Sends `payloads` on `channel` in one transaction of its own, after the writes they announce
/// committed: a transaction that only notifies writes no WAL, so the server's notify lock is held
/// for a moment instead of across a WAL flush (ADR 0235). The writes happened whatever this does:
/// a failure only leaves the other backends' reservers to their fallback re-check.
async fn notify(pool: &GuardedPool, channel: &str, payloads: &[String]) {
    if payloads.is_empty() {
        return;
    }
    if let Err(e) = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind(channel)
        .bind(payloads)
        .execute(pool)
        .await
    {
        tracing::debug!(error = %e, "could not wake the waiting reservers of other backends");
    }
}

async fn ack_batch(pool: &GuardedPool, channel: &str, jobs: Vec<Job>) {
    if jobs.is_empty() {
        return;
    }
    let (mut names, mut receipts, mut results, mut replies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut marks = Vec::new();
    for job in jobs {
        if let Job::Ack {
            name,
            receipt,
            recorded,
            result,
            reply,
        } = job
        {
            names.push(name);
            receipts.push(receipt);
            marks.push(recorded);
            results.push(result);
            replies.push(reply);
        }
    }
    // First the plain statement, for the tasks without an id (deleted at their end, as
    // before); a delivery of a recorded task (a marked receipt, or one the plain statement did
    // not find) is left to `fleet_ack_tasks` below, so a batch of tasks without ids costs what
    // it did, and one of recorded tasks one statement.
    let plain: Vec<usize> = (0..receipts.len()).filter(|&i| !marks[i]).collect();
    let done: std::result::Result<Vec<String>, sqlx::Error> = if plain.is_empty() {
        Ok(Vec::new())
    } else {
        sqlx::query_scalar(
            "DELETE FROM fleet_tasks t USING unnest($1::text[], $2::text[]) AS a(n, r) \
             WHERE t.receipt = a.r AND t.state = 'reserved' AND t.name = a.n \
               AND t.task_id IS NULL RETURNING t.receipt",
        )
        .bind(plain.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>())
        .bind(
            plain
                .iter()
                .map(|&i| receipts[i].as_str())
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await
    };
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            for (reply, name) in replies.into_iter().zip(&names) {
                let _ = reply.send(Err(shared("queue_ack", name, &e)));
            }
            return;
        }
    };
    // A receipt acked twice in one batch is acked once: the first call gets `true`.
    let mut done: HashMap<String, usize> = done.into_iter().fold(HashMap::new(), |mut m, r| {
        *m.entry(r).or_default() += 1;
        m
    });
    let mut answers: Vec<Option<Result<bool>>> = receipts
        .iter()
        .zip(&marks)
        .map(|(receipt, marked)| match done.get_mut(receipt) {
            _ if *marked => None,
            Some(n) if *n > 0 => {
                *n -= 1;
                Some(Ok(true))
            }
            Some(_) => Some(Ok(false)),
            None => None,
        })
        .collect();
    let left: Vec<usize> = (0..answers.len())
        .filter(|&i| answers[i].is_none())
        .collect();
    if !left.is_empty() {
        let ended = ack_tasks(
            pool,
            channel,
            left.iter().map(|&i| names[i].as_str()).collect(),
            left.iter().map(|&i| receipts[i].as_str()).collect(),
            left.iter().map(|&i| results[i].as_deref()).collect(),
        )
        .await;
        match ended {
            Ok(mut ended) => {
                for &i in &left {
                    answers[i] = Some(match ended.remove(&receipts[i]) {
                        Some((state, _)) if state == "completed" => Ok(true),
                        Some((_, id)) => Err(crate::cancelled(id.unwrap_or_default())),
                        None => Ok(false),
                    });
                }
            }
            Err(e) => {
                for &i in &left {
                    answers[i] = Some(Err(shared("queue_ack", &names[i], &e)));
                }
            }
        }
    }
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer.unwrap_or(Ok(false)));
    }
}

/// Ends the current deliveries of recorded tasks among `receipts` (of queues `names`), each
/// `completed` with its result or `cancelled` when a cancel was requested, in one function call
/// (`fleet_ack_tasks`, which also acks a task without a record it finds); receipt → (end state,
/// task id) of each one it ended.
pub(crate) async fn ack_tasks(
    pool: &GuardedPool,
    channel: &str,
    names: Vec<&str>,
    receipts: Vec<&str>,
    results: Vec<Option<&[u8]>>,
) -> std::result::Result<HashMap<String, (String, Option<String>)>, sqlx::Error> {
    let rows: Vec<(String, String, Option<String>)> =
        sqlx::query_as("SELECT * FROM fleet_ack_tasks($1, $2, $3, $4)")
            .bind(&names)
            .bind(&receipts)
            .bind(&results)
            .bind(channel)
            .fetch_all(pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(receipt, state, id)| (receipt, (state, id)))
        .collect())
}

/// The error of a failed batch, for each of its calls (sqlx errors are not `Clone`): a closed
/// pool is [`Error::Closed`]; anything else is [`Error::Unavailable`], the outcome unknown, as
/// for an unbatched call whose connection failed.
fn shared(op: &'static str, name: &str, e: &sqlx::Error) -> Error {
    if let Some(refused) = crate::guarded::refusal(e) {
        return Error::unavailable(op, name.to_string(), refused.to_string());
    }
    match e {
        sqlx::Error::PoolClosed => Error::Closed { what: WHAT },
        e => Error::unavailable(op, name.to_string(), e.to_string()),
    }
}
