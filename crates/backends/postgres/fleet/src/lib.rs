#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use guarded::GuardedPool;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sqlx::postgres::PgConnection;
use switchyard_core::fleet::adapter::{
    Attempt, CatalogOps, CounterOps, DeadLetterOps, EventOps, KvOps, LockOps, PoolOps,
    QueueBatchOps, QueueFlowOps, QueueOps, ScheduleOps, StreamOps, TaskOps, WorkerOps,
};
use switchyard_core::fleet::{
    CancelOutcome, ConfigWrite, DEFAULT_MAX_RESULT_BYTES, Delivery, EventStream, IdempotencyKey,
    InFlight, LocalTopics, LockGrant, PoolClaim, PoolItem, Priority, QueueStats, RateLimit,
    Receipt, RunAt, Submit, SubmitOutcome, Tags, TaskHead, WorkerRecord, WorkerState, check_finite,
    delay_ms, random_token, task_id_of, ttl_ms,
};
use switchyard_core::pycompat::{Dumps, float_repr};
use switchyard_core::{Error, Result};
use switchyard_postgres_support::{self as support, Notifications, PostgresUrl, Signal};
use tokio::sync::Notify;

// One room per area of the port (ADR 0161); shared plumbing stays here.
mod batch;
mod batches;
mod catalog;
mod counters;
mod dead_letters;
mod events;
mod flow;
mod guarded;
mod kv;
mod locks;
mod pools;
mod queue;
mod schedules;
mod streams;
mod tasks;
mod workers;

const WHAT: &str = "PostgresFleetBackend";

/// The table recording which of the fleet's migrations a schema has (ADR 0221).
const MIGRATIONS_TABLE: &str = "fleet_migrations";

switchyard_postgres_support::embed_migrations!(
    /// The migration files, embedded (ADR 0346), with a test that the list names every file.
    const MIGRATIONS = "migrations",
    "20800001_fleet_tables.sql",
    "20800002_fleet_queue_functions.sql",
    "20800003_fleet_queue_flow.sql",
    "20800004_fleet_queue_promote.sql",
    "20800005_fleet_tasks.sql",
    "20800006_fleet_task_id_reuse.sql",
    "20800007_fleet_reserve_without_flush.sql"
);

/// SQLSTATE `numeric_value_out_of_range`: a counter would overflow `bigint`.
const OUT_OF_RANGE: &str = "22003";

/// The largest body [`Events::event_publish`](switchyard_core::fleet::Events::event_publish) carries: a notification's payload holds at most
/// 7,999 bytes, and the body travels in base64 after the topic's key (ADR 0233).
pub const MAX_EVENT_BODY: usize = 5_973;

/// Sets a KV entry only if absent or expired; `rows_affected` says whether it set. Parameters
/// ns, key, value, ttl in seconds (NULL: never expires).
const KV_SET_NX: &str = "INSERT INTO fleet_kv (ns, key, value, expires_at) \
     VALUES ($1, $2, $3, fleet_now() + $4) ON CONFLICT (ns, key) DO UPDATE \
     SET value = excluded.value, expires_at = excluded.expires_at \
     WHERE fleet_kv.expires_at IS NOT NULL AND fleet_kv.expires_at <= fleet_now()";

/// The pool settings of [`PostgresFleetOptions::pool`], and the schema name they carry.
pub use switchyard_postgres_support::{PoolOptions, Schema};

/// Options of [`PostgresFleetBackend::open_with`].
#[derive(Debug, Clone)]
pub struct PostgresFleetOptions {
    /// Pool size, timeouts and the schema of the fleet's tables (default `switchyard`). A
    /// waiting `queue_reserve` holds no connection; size the pool for the calls in flight.
    /// The default does not ping a pooled connection before each call (ADR 0235): every fleet
    /// call is one statement, and the ping would double its round trips; a call that meets a
    /// dead connection fails with [`Error::Unavailable`] (retry it) and the pool drops it.
    pub pool: PoolOptions,
    /// Longest sleep of a blocking `queue_reserve` between two looks at the table when no
    /// notification comes (a safety net: pushes wake reservers at once). Default 1 s.
    pub fallback: Duration,
    /// Group-commit batches of pushes, acks and one-task reserves in flight at once (ADR 0236,
    /// 0347); calls that arrive while all are busy leave together in the next one. Fewer
    /// batches carry more calls per commit; more use more of a server with many cores. Each
    /// batch holds up to three connections of the pool while it runs. Default 4 (at least 1).
    pub batches_in_flight: usize,
    /// The largest result an ack of a task with an id stores, in bytes (ADR 0380); a larger one
    /// is refused with [`Error::InvalidInput`]. Default
    /// [`DEFAULT_MAX_RESULT_BYTES`] (1 MiB).
    pub max_result_bytes: usize,
}

impl PostgresFleetOptions {
    /// The defaults, in the schema `url` names with `?schema=NAME` (else `switchyard`).
    /// [`Error::Config`] for a URL that is not `postgres://` or a schema name that is refused.
    pub fn for_url(url: &str) -> Result<Self> {
        let mut options = PostgresFleetOptions::default();
        if let Some(schema) = PostgresUrl::parse(url, "url")?.schema() {
            options.pool = options.pool.schema(Schema::new(schema)?);
        }
        Ok(options)
    }
}

impl Default for PostgresFleetOptions {
    fn default() -> Self {
        PostgresFleetOptions {
            pool: PoolOptions::default().check_on_acquire(false),
            fallback: Duration::from_secs(1),
            batches_in_flight: 4,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

/// [`FleetBackend`](switchyard_core::fleet::FleetBackend) on PostgreSQL. Clones share the pool
/// and the listening connection.
#[derive(Clone)]
pub struct PostgresFleetBackend {
    inner: Arc<Inner>,
}

struct Inner {
    /// Every call runs on it: getting a connection is inside the circuit, so calls fail at once
    /// while the server is known to be down instead of waiting the acquire timeout (ADR 0355).
    pool: GuardedPool,
    url: PostgresUrl,
    schema: Schema,
    /// The one channel of this schema's fleet: queue wake-ups and events (ADR 0232, 0233).
    channel: String,
    /// This backend's name in `fleet_waiters` (ADR 0235).
    waiter: String,
    wakes: Arc<Wakes>,
    /// The readers of each queue's end events waiting in this process, by events key (ADR
    /// 0380); woken by the `t:` notifications of the ending statements.
    event_wakes: Arc<Wakes>,
    topics: Arc<Topics>,
    fallback: Duration,
    max_result_bytes: usize,
    /// Group commit of pushes, acks and one-task reserves (ADR 0236, 0296).
    batch: batch::Batcher,
    /// Routes the listening connection's notifications to `wakes` and `topics`.
    dispatcher: tokio::task::JoinHandle<()>,
    _notifications: Notifications,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

impl fmt::Debug for PostgresFleetBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(WHAT)
            .field("url", &self.inner.url)
            .field("schema", &self.inner.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresFleetBackend {
    /// Opens a `postgres://` or `postgresql://` URL with default options, in the schema the URL
    /// names with `?schema=NAME` (else `switchyard`), and migrates the schema.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, PostgresFleetOptions::for_url(url)?).await
    }

    /// Opens the pool, applies the fleet's pending migrations to the schema (creating it if
    /// missing; other adapters' tables are never touched) and starts listening for the fleet's
    /// notifications before returning.
    pub async fn open_with(url: &str, options: PostgresFleetOptions) -> Result<Self> {
        let url = PostgresUrl::parse(url, "url")?;
        let schema = options.pool.schema_name().clone();
        let pool = support::connect(&url, &options.pool, WHAT).await?;
        support::migrate(
            &pool,
            &schema,
            MIGRATIONS_TABLE,
            &support::embedded_migrator(MIGRATIONS).await?,
            WHAT,
        )
        .await?;
        let pool = GuardedPool::new(pool.clone(), support::Circuit::new(&url, &pool, WHAT));
        let channel = channel_of(&schema);
        let notifications = Notifications::listen(pool.raw(), &[&channel], WHAT).await?;
        let wakes = Arc::new(Wakes::default());
        let event_wakes = Arc::new(Wakes::default());
        let topics = Arc::new(Topics::default());
        let waiter = random_token();
        let batch = batch::Batcher::spawn(
            pool.clone(),
            options.batches_in_flight,
            batch::Wake {
                wakes: wakes.clone(),
                channel: channel.clone(),
                waiter: waiter.clone(),
            },
        );
        let dispatcher = tokio::spawn(dispatch(
            notifications.subscribe(),
            wakes.clone(),
            event_wakes.clone(),
            topics.clone(),
        ));
        Ok(PostgresFleetBackend {
            inner: Arc::new(Inner {
                pool,
                url,
                schema,
                channel,
                waiter,
                batch,
                wakes,
                event_wakes,
                topics,
                fallback: options.fallback.max(Duration::from_millis(10)),
                max_result_bytes: options.max_result_bytes,
                dispatcher,
                _notifications: notifications,
            }),
        })
    }

    /// The schema of the fleet's tables.
    pub fn schema(&self) -> &Schema {
        &self.inner.schema
    }

    /// The channel this backend's queue wake-ups and events travel on (`LISTEN` on it to watch
    /// them; one per schema).
    pub fn notify_channel(&self) -> &str {
        &self.inner.channel
    }

    /// Closes the pool after in-flight calls; later calls fail with [`Error::Closed`].
    pub async fn close(&self) {
        self.inner.pool.raw().close().await;
    }

    fn pool(&self) -> &GuardedPool {
        &self.inner.pool
    }

    fn channel(&self) -> &str {
        &self.inner.channel
    }
}

/// Maps a sqlx error as every Postgres adapter does (ADR 0220).
fn db(op: &'static str, key: impl fmt::Display, e: sqlx::Error) -> Error {
    // The circuit's refusal reaches here as an I/O error; it is reported in its own words.
    if let Some(refused) = guarded::refusal(&e) {
        return Error::unavailable(op, key.to_string(), refused.to_string());
    }
    support::error(WHAT, op, key, e)
}

/// The channel of a schema's fleet: a fixed prefix and a digest of the schema, so fleets in two
/// schemas of one database never hear each other and the name stays far under 63 bytes.
fn channel_of(schema: &Schema) -> String {
    format!("switchyard_fleet_{}", &digest(schema.as_str())[..24])
}

/// Hex SHA-256 of `s`, cut to 32 digits: the key of a queue or topic in notification payloads,
/// whatever the length of its name (a payload holds at most 7,999 bytes).
fn digest(s: &str) -> String {
    hex::encode(&Sha256::digest(s.as_bytes())[..16])
}

/// The payload that wakes one reserver of queue `name` (one task became ready).
fn wake_payload(name: &str) -> String {
    format!("q:{}", digest(name))
}

/// The payload that wakes every reserver of queue `name` (several tasks became ready).
fn wake_all_payload(name: &str) -> String {
    format!("a:{}", digest(name))
}

/// The payload announcing `count` pushed tasks on the queue with key `key`: one task wakes one
/// reserver, several wake them all.
fn pushed_payload(key: &str, count: usize) -> String {
    match count {
        1 => format!("q:{key}"),
        _ => format!("a:{key}"),
    }
}

/// The key under which readers of queue `name`'s end events lease their wake-ups, and the tail
/// of the `t:` notification an end sends (the migrations' `fleet_events_key`): never a queue's
/// own key, which is the bare digest.
fn events_key(name: &str) -> String {
    format!("ev{}", digest(name))
}

/// Whether `e` is the refusal of a second record with a task id its queue already knows (the
/// unique index `fleet_tasks_task_id`, ADR 0380).
fn id_taken(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d)
        if d.code().as_deref() == Some("23505") && d.constraint() == Some("fleet_tasks_task_id"))
}

/// Removes the finished records (`completed`, `failed`, `cancelled`) of `ids` in queues
/// `names` (pairwise), after a write the unique index refused: a finished task's id is free
/// (guarantee `task.unique_id`, ADR 0390). How many it removed; the caller writes again when
/// any. Between the two steps another submit may take the id: the second write then answers
/// `AlreadyExists`, as it should.
async fn free_task_ids(
    pool: &GuardedPool,
    op: &'static str,
    names: &[&str],
    ids: &[Option<&str>],
) -> Result<u64> {
    let freed: i64 = sqlx::query_scalar("SELECT fleet_free_task_ids($1::text[], $2::text[])")
        .bind(names)
        .bind(ids)
        .fetch_one(pool)
        .await
        .map_err(|e| db(op, names.first().copied().unwrap_or_default(), e))?;
    Ok(u64::try_from(freed).unwrap_or(0))
}

/// The answer to a submit or push of a body whose id a record holds.
fn already_exists(id: &str) -> Error {
    Error::AlreadyExists {
        what: "task",
        id: id.to_string(),
    }
}

/// The answer to a call on a delivery whose task was cancelled (ADR 0380, section 4).
fn cancelled(id: impl Into<String>) -> Error {
    Error::Cancelled {
        what: "task",
        id: id.into(),
    }
}

/// A head's `max_attempts` as the `integer` column stores it.
fn max_of(head: &TaskHead) -> Option<i32> {
    head.max_attempts.and_then(|m| i32::try_from(m).ok())
}

/// What ends the receipt of a delivery whose body has an id (a recorded task, ADR 0380): the
/// stored receipt is the 32 hex digits of [`random_token`] alone, and an ack of a marked
/// receipt goes straight to the function that ends records, sparing the plain ack's statement.
/// The mark is a hint: either statement falls back to the other for what it did not find.
const RECORDED_MARK: char = 't';

/// The receipt as stored, without the mark of a recorded delivery.
fn raw(receipt: &Receipt) -> &str {
    let r = receipt.as_str();
    r.strip_suffix(RECORDED_MARK).unwrap_or(r)
}

/// Whether the receipt carries the mark of a delivery of a recorded task.
fn marked(receipt: &Receipt) -> bool {
    receipt.as_str().ends_with(RECORDED_MARK)
}

/// The key subscriptions of `topic` are filed under.
fn topic_key(topic: &str) -> String {
    digest(topic)
}

/// The payload that carries `body` to the subscribers of `topic`: `e:<key>:<base64 body>`.
fn event_payload(topic: &str, body: &[u8]) -> Result<String> {
    if body.len() > MAX_EVENT_BODY {
        return Err(Error::invalid(
            "body",
            format!(
                "is {} bytes; PostgreSQL notifications carry at most {MAX_EVENT_BODY}: keep the \
                 payload in kv and publish its key",
                body.len()
            ),
        ));
    }
    Ok(format!("e:{}:{}", topic_key(topic), B64.encode(body)))
}

/// Routes notifications: queue wake-ups to the waiting reservers of that queue, events to the
/// topic's subscribers, subscription fences to their subscribers; after missed notifications
/// every reserver looks again and every pending subscription starts.
async fn dispatch(
    mut sub: support::Subscription,
    wakes: Arc<Wakes>,
    event_wakes: Arc<Wakes>,
    topics: Arc<Topics>,
) {
    while let Some(signal) = sub.recv().await {
        match signal {
            Signal::Notify { payload, .. } => {
                if let Some(key) = payload.strip_prefix("q:") {
                    wakes.wake_one(key);
                } else if let Some(key) = payload.strip_prefix("a:") {
                    wakes.wake(key);
                } else if let Some(key) = payload.strip_prefix("t:") {
                    event_wakes.wake(key);
                } else if let Some((key, body)) =
                    payload.strip_prefix("e:").and_then(|p| p.split_once(':'))
                {
                    match B64.decode(body) {
                        Ok(body) => topics.live.publish(key, body),
                        Err(e) => tracing::warn!(error = %e, "dropping an undecodable event"),
                    }
                } else if let Some(token) = payload.strip_prefix("f:") {
                    topics.start(Some(token));
                }
            }
            Signal::Missed => {
                wakes.wake_all();
                event_wakes.wake_all();
                topics.start(None);
            }
        }
    }
}

/// The event subscriptions of this process, by topic key, and those waiting for their fence.
///
/// A subscription starts when the listener reaches its fence, a notification the subscriber
/// sent after it asked: PostgreSQL delivers notifications in commit order, so everything
/// published before the fence was handed out before it (not to this subscriber), and everything
/// published after `event_subscribe` returned comes after it (ADR 0233).
#[derive(Default)]
struct Topics {
    live: LocalTopics,
    fences: Mutex<HashMap<String, (String, tokio::sync::oneshot::Sender<EventStream>)>>,
}

impl Topics {
    /// Registers a subscription of `key` that starts at the fence `token`.
    fn pending(&self, token: &str, key: String) -> tokio::sync::oneshot::Receiver<EventStream> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        fences.insert(token.to_string(), (key, tx));
        rx
    }

    /// Starts the subscription of fence `token`, or every pending one (`None`: the fences may
    /// have been lost with the connection).
    fn start(&self, token: Option<&str>) {
        let started: Vec<_> = {
            let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
            match token {
                Some(t) => fences.remove(t).into_iter().collect(),
                None => fences.drain().map(|(_, v)| v).collect(),
            }
        };
        for (key, tx) in started {
            let _ = tx.send(self.live.subscribe(&key));
        }
    }

    fn forget(&self, token: &str) {
        let mut fences = self.fences.lock().unwrap_or_else(|p| p.into_inner());
        fences.remove(token);
    }
}

/// The reservers of this process waiting on each queue, by wake payload, and until when this
/// backend's lease in `fleet_waiters` asks pushers to notify it (ADR 0235).
#[derive(Default)]
struct Wakes {
    waiting: Mutex<HashMap<String, Weak<Notify>>>,
    leases: Mutex<HashMap<String, std::time::Instant>>,
}

impl Wakes {
    /// The wake-up of the queue with `key`, shared by its waiting reservers.
    fn waiter(&self, key: &str) -> Arc<Notify> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = waiting.get(key).and_then(Weak::upgrade) {
            return n;
        }
        // Forget queues nobody waits on any more before adding one.
        waiting.retain(|_, n| n.strong_count() > 0);
        let n = Arc::new(Notify::new());
        waiting.insert(key.to_string(), Arc::downgrade(&n));
        n
    }

    fn wake(&self, key: &str) {
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = waiting.get(key).and_then(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Wakes one reserver of the queue: one task is ready, and waking them all would send every
    /// one of them to the table for it. A woken reserver always looks (a reserve dropped after
    /// its wake-up passes it on: tokio forwards an unconsumed `notify_one`).
    fn wake_one(&self, key: &str) {
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = waiting.get(key).and_then(Weak::upgrade) {
            n.notify_one();
        }
    }

    fn wake_all(&self) {
        // The server may have restarted and lost the (unlogged) leases: register them again.
        self.leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        for n in waiting.values().filter_map(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Wakes the reservers of this process that `count` tasks just pushed to the queue `key`
    /// can serve, without a round trip to the server (ADR 0347): one for one task, all for more.
    fn pushed(&self, key: &str, count: usize) {
        match count {
            0 => {}
            1 => self.wake_one(key),
            _ => self.wake(key),
        }
    }

    /// Whether this backend's lease on the queue `key` is known to hold for a while yet.
    fn leased(&self, key: &str) -> bool {
        let leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        leases
            .get(key)
            .is_some_and(|until| *until > std::time::Instant::now())
    }

    /// Notes that the lease on `key` was renewed; it is renewed again after `renew_after`.
    fn lease_renewed(&self, key: &str, renew_after: Duration) {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        leases.retain(|_, until| *until > std::time::Instant::now());
        leases.insert(key.to_string(), std::time::Instant::now() + renew_after);
    }
}

/// The stored code of a tier: its serve order.
fn tier_code(p: Priority) -> i16 {
    match p {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

fn tier_of(code: i16) -> Priority {
    match code {
        0 => Priority::High,
        2 => Priority::Low,
        _ => Priority::Normal,
    }
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn ttl_secs(ttl: Option<Duration>) -> Option<f64> {
    ttl_ms(ttl).map(secs)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count or generation read from a `bigint` column (never negative in practice).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `json.dumps(v)`, as the seed's Python peers write the document (ADR 0177).
fn json_text<T: serde::Serialize + ?Sized>(field: &'static str, v: &T) -> Result<String> {
    Dumps::DEFAULT.dumps(v).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => Error::invalid(field, reason),
        e => e,
    })
}

fn parse_json(location: impl fmt::Display, text: &str) -> Result<Value> {
    if text.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text).map_err(|e| Error::corrupt(location.to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_fit_a_notification() {
        let long = "q".repeat(100_000);
        assert_eq!(wake_payload(&long).len(), 34);
        assert_eq!(wake_all_payload(&long)[2..], wake_payload(&long)[2..]);
        let body = vec![0xffu8; MAX_EVENT_BODY];
        let payload = event_payload(&long, &body).expect("fits");
        assert!(payload.len() <= 7_999, "{}", payload.len());
        let err = event_payload("t", &vec![0u8; MAX_EVENT_BODY + 1]).expect_err("too big");
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    }

    #[test]
    fn channels_differ_by_schema_and_stay_short() {
        let a = channel_of(&Schema::new("a").expect("schema"));
        let b = channel_of(&Schema::new("b").expect("schema"));
        assert_ne!(a, b);
        let long = channel_of(&Schema::new("s".repeat(63)).expect("schema"));
        assert!(long.len() < 64, "{long}");
    }
}
