//! Group commit for the fleet's one-statement writes (ADR 0150).
//!
//! Every `Write` is one SQL statement with its arguments. One task takes every pending write
//! from a channel and sends them to the writer connection as one multi-statement string,
//! `BEGIN IMMEDIATE; SAVEPOINT w; <write 1>; RELEASE w; SAVEPOINT w; <write 2>; …; COMMIT`, so
//! a batch costs one hand-off to sqlx's connection thread and one commit instead of one of each
//! per write. Each write is its own savepoint: a failing one is rolled back alone and the batch
//! goes on. Replies leave only after COMMIT.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, Either, Row, SqliteConnection};
use switchyard_core::{Error, Result};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{WHAT, db, pop_sql};

mod cached;

/// The writer connection, shared by the batch task and the multi-statement operations.
pub(super) type Writer = Arc<Mutex<Option<SqliteConnection>>>;

/// Most writes in one transaction: bounds the write lock's hold and the SQL string.
const MAX_BATCH: usize = 256;

/// One bound value of a [`Write`].
#[derive(Clone)]
pub(super) enum Arg {
    Text(String),
    Blob(Vec<u8>),
    Real(f64),
    Int(i64),
    /// SQL NULL (an absent result, id or limit).
    Null,
}

impl Arg {
    /// Binds this value as the next parameter of `q` (a statement outside the batch).
    pub(super) fn bind_to<'q>(
        self,
        q: sqlx::query::Query<'q, sqlx::Sqlite, SqliteArguments<'q>>,
    ) -> sqlx::query::Query<'q, sqlx::Sqlite, SqliteArguments<'q>> {
        match self {
            Arg::Text(v) => q.bind(v),
            Arg::Blob(v) => q.bind(v),
            Arg::Real(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Null => q.bind(Option::<Vec<u8>>::None),
        }
    }
}

type Sender = oneshot::Sender<Result<Vec<SqliteRow>>>;

/// What callers send: a statement of their own, or one of the queue's hot writes, which the
/// task merges with the batch's others of the same kind into one set-based statement (ADR
/// 0291).
enum Msg {
    Write(Write),
    /// Appends `bodies`, in order, to `tier` of queue `name` (attempts 0); no rows.
    Push {
        name: String,
        tier: &'static str,
        bodies: Vec<Vec<u8>>,
        reply: Sender,
    },
    /// Submits rows of `switchyard_task_submit` (eight values each, see `queue::submit_args`):
    /// bodies with ids and their records (ADR 0380); no rows. Merged with the batch's other
    /// submits into one multi-row insert; a taken id fails that insert, which is then retried
    /// caller by caller, so only the caller whose id is taken fails.
    Submit {
        op: &'static str,
        name: String,
        rows: Vec<Arg>,
        reply: Sender,
    },
    /// Reserves up to `max` tasks of `name` for `vis` seconds: the pop's rows.
    Reserve {
        name: String,
        vis: f64,
        max: usize,
        reply: Sender,
    },
    /// Acks `receipts` of `name`: one `task_id` row per receipt acked, and for a recorded
    /// delivery (its receipt says so, see [`is_recorded`]) one `(receipt, state, task_id)` row
    /// of the record it ended, `completed` (storing `result`) or, when a cancel reached it,
    /// `cancelled` (ADR 0380).
    Ack {
        name: String,
        receipts: Vec<String>,
        result: Option<Vec<u8>>,
        reply: Sender,
    },
}

/// Who gets a statement's rows.
enum Reply {
    /// One caller, every row.
    One(Sender),
    /// Pushers: no rows.
    Pushes(Vec<Sender>),
    /// Submitters of a merged submit: no rows. Each keeps its own rows, to be written alone if
    /// the merged insert fails.
    Submits(Vec<Submitter>),
    /// Reservers in order, each taking up to its most of the rows in serve order.
    Reserves(Vec<(usize, Sender)>),
    /// Ackers in order, each the rows of its receipts not taken by an earlier one.
    Acks(Vec<(Vec<String>, Sender)>),
}

impl Reply {
    fn send(self, op: &'static str, key: &str, res: Result<Vec<SqliteRow>>) {
        match (self, res) {
            (Reply::One(tx), res) => {
                let _ = tx.send(res);
            }
            (Reply::Pushes(txs), Ok(_)) => txs.into_iter().for_each(|tx| {
                let _ = tx.send(Ok(Vec::new()));
            }),
            (Reply::Submits(subs), Ok(_)) => subs.into_iter().for_each(|s| {
                let _ = s.reply.send(Ok(Vec::new()));
            }),
            (Reply::Reserves(takers), Ok(mut rows)) => {
                rows.sort_by_key(serve_order);
                let mut rows = rows.into_iter();
                for (max, tx) in takers {
                    let _ = tx.send(Ok(rows.by_ref().take(max).collect()));
                }
            }
            (Reply::Acks(ackers), Ok(rows)) => {
                // A recorded delivery has two rows (its record's end, then the delete).
                let mut acked: HashMap<String, Vec<SqliteRow>> = HashMap::with_capacity(rows.len());
                for row in rows {
                    if let Ok(receipt) = row.try_get::<String, _>(0) {
                        acked.entry(receipt).or_default().push(row);
                    }
                }
                for (receipts, tx) in ackers {
                    let mine = receipts
                        .iter()
                        .filter_map(|r| acked.remove(r))
                        .flatten()
                        .collect();
                    let _ = tx.send(Ok(mine));
                }
            }
            (reply, Err(e)) => {
                let txs: Vec<Sender> = match reply {
                    Reply::One(tx) => vec![tx],
                    Reply::Pushes(txs) => txs,
                    Reply::Submits(subs) => subs.into_iter().map(|s| s.reply).collect(),
                    Reply::Reserves(t) => t.into_iter().map(|t| t.1).collect(),
                    Reply::Acks(a) => a.into_iter().map(|a| a.1).collect(),
                };
                // The first caller gets the error itself, the others a copy that keeps what
                // they can do: retry (transient) or stop (closed).
                let closed = matches!(e, Error::Closed { .. });
                let cause = e.to_string();
                let mut first = Some(e);
                for tx in txs {
                    let e = first.take().unwrap_or_else(|| match closed {
                        true => Error::Closed { what: WHAT },
                        false => Error::unavailable(op, key.to_string(), cause.clone()),
                    });
                    let _ = tx.send(Err(e));
                }
            }
        }
    }
}

/// One caller of a merged submit.
struct Submitter {
    op: &'static str,
    name: String,
    rows: Vec<Arg>,
    reply: Sender,
}

/// The values of one row of `switchyard_task_submit`.
const SUBMIT_COLUMNS: usize = 8;

/// The statement and arguments that submit `rows` (eight values each, see
/// `queue::submit_args`): into `switchyard_task_push` when none is delayed (the hot path: its
/// trigger only appends to a tier), else into `switchyard_task_submit`; parameters from 1.
fn submit_statement(rows: Vec<Arg>) -> (String, Vec<Arg>) {
    let now = rows
        .chunks(SUBMIT_COLUMNS)
        .all(|r| matches!(r[SUBMIT_COLUMNS - 2..], [Arg::Null, Arg::Null]));
    let (mut sql, columns, args) = if now {
        let args: Vec<Arg> = rows
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % SUBMIT_COLUMNS < SUBMIT_COLUMNS - 2)
            .map(|(_, a)| a)
            .collect();
        (
            String::from(
                "INSERT INTO switchyard_task_push \
                 (name, tier, body, task_id, max_attempts, last_error) VALUES ",
            ),
            SUBMIT_COLUMNS - 2,
            args,
        )
    } else {
        (
            String::from(
                "INSERT INTO switchyard_task_submit \
                 (name, tier, body, task_id, max_attempts, last_error, at, delay) VALUES ",
            ),
            SUBMIT_COLUMNS,
            rows,
        )
    };
    for r in 0..args.len() / columns {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..columns {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{}", r * columns + c + 1));
        }
        sql.push(')');
    }
    (sql, args)
}

impl Write {
    /// A merged submit of several callers, as one write per caller (in order), to retry them
    /// apart after the merged one failed; any other write stays whole.
    fn split(self) -> Split {
        match self.reply {
            Reply::Submits(subs) if subs.len() > 1 => Split::Apart(
                subs.into_iter()
                    .map(|s| {
                        let (sql, args) = submit_statement(s.rows);
                        Write {
                            op: s.op,
                            key: s.name,
                            sql: sql.into(),
                            stmts: 1,
                            cached: false,
                            args,
                            reply: Reply::One(s.reply),
                        }
                    })
                    .collect(),
            ),
            reply => Split::Whole(Write { reply, ..self }),
        }
    }
}

/// What [`Write::split`] made of a write.
enum Split {
    Apart(Vec<Write>),
    Whole(Write),
}

/// Serve order of a pop's `RETURNING task_id, tier, body, attempts, deadline, src_id` row:
/// tier, then age.
fn serve_order(row: &SqliteRow) -> (u8, i64) {
    let tier = match row.try_get::<String, _>(1).as_deref() {
        Ok("high") => 0,
        Ok("low") => 2,
        _ => 1,
    };
    (tier, row.try_get::<i64, _>(5).unwrap_or(i64::MAX))
}

/// One statement of a batch, numbering its parameters `?1`, `?2`, … in `args` order, and who
/// gets its rows.
pub(super) struct Write {
    op: &'static str,
    key: String,
    /// One statement, or `stmts` of them separated by `;`, run in one savepoint (all or none).
    sql: Cow<'static, str>,
    stmts: usize,
    /// A constant text (its rows in JSON parameters, see [`cached`]): a string of such writes
    /// only is kept prepared.
    cached: bool,
    args: Vec<Arg>,
    reply: Reply,
}

impl Write {
    fn fail(self, e: Error) {
        self.reply.send(self.op, &self.key, Err(e));
    }

    /// Fails a write that had succeeded in a transaction that did not commit.
    fn fail_with_batch(self, cause: &str) {
        let e = Error::unavailable(
            self.op,
            self.key.clone(),
            format!("the batch transaction did not commit: {cause}"),
        );
        self.fail(e);
    }
}

/// Handle on the batch task; dropping every clone ends the task.
#[derive(Clone)]
pub(super) struct Batcher {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Batcher {
    /// Starts the batch task on a thread of its own, with its own small runtime: it then
    /// outlives whichever runtime opened the backend (tests open one per case) and ends when
    /// the last `Batcher` is dropped.
    pub(super) fn spawn(writer: Writer) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("fleet-sqlite-batch".into())
            .spawn(move || rt.block_on(run(writer, rx)))?;
        Ok(Batcher { tx })
    }

    /// Runs `sql` (one statement) as its own atomic unit in the next batch; its rows once the
    /// batch has committed.
    pub(super) async fn write(
        &self,
        op: &'static str,
        key: &str,
        sql: impl Into<Cow<'static, str>>,
        args: Vec<Arg>,
    ) -> Result<Vec<SqliteRow>> {
        self.write_many(op, key, 1, sql, args).await
    }

    /// Runs `sql`, `stmts` statements separated by `;` (parameters numbered across all of
    /// them), as one atomic unit in the next batch: all of them or, if one fails, none; the rows
    /// of all of them, in order, once the batch has committed.
    pub(super) async fn write_many(
        &self,
        op: &'static str,
        key: &str,
        stmts: usize,
        sql: impl Into<Cow<'static, str>>,
        args: Vec<Arg>,
    ) -> Result<Vec<SqliteRow>> {
        let (reply, rx) = oneshot::channel();
        let w = Write {
            op,
            key: key.to_string(),
            sql: sql.into(),
            stmts,
            cached: false,
            args,
            reply: Reply::One(reply),
        };
        self.send(Msg::Write(w), rx).await
    }

    /// Appends `bodies` in order to `tier` of `name` (attempts 0), merged with the batch's other
    /// pushes into one multi-row `INSERT`.
    pub(super) async fn push(
        &self,
        name: &str,
        tier: &'static str,
        bodies: Vec<Vec<u8>>,
    ) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        let name = name.to_string();
        self.send(
            Msg::Push {
                name,
                tier,
                bodies,
                reply,
            },
            rx,
        )
        .await
        .map(drop)
    }

    /// Submits `rows` of `switchyard_task_submit` (eight values each) in one atomic unit,
    /// merged with the batch's other submits (see `Msg::Submit`).
    pub(super) async fn submit(&self, op: &'static str, name: &str, rows: Vec<Arg>) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        let name = name.to_string();
        self.send(
            Msg::Submit {
                op,
                name,
                rows,
                reply,
            },
            rx,
        )
        .await
        .map(drop)
    }

    /// Reserves up to `max` tasks of `name` for `vis` seconds, merged with the batch's other
    /// reserves of the queue (same visibility) into one pop; the pop's rows (see `pop_sql`).
    pub(super) async fn reserve(&self, name: &str, vis: f64, max: usize) -> Result<Vec<SqliteRow>> {
        let (reply, rx) = oneshot::channel();
        let name = name.to_string();
        self.send(
            Msg::Reserve {
                name,
                vis,
                max,
                reply,
            },
            rx,
        )
        .await
    }

    /// Acks `receipts` of `name`, merged with the batch's other acks of the queue into one
    /// `DELETE` (preceded, when a receipt is recorded, by the update that ends the records,
    /// storing `result`); a `task_id` row per receipt acked, and a `(receipt, state, task_id)`
    /// row per record ended.
    pub(super) async fn ack(
        &self,
        name: &str,
        receipts: Vec<String>,
        result: Option<Vec<u8>>,
    ) -> Result<Vec<SqliteRow>> {
        let (reply, rx) = oneshot::channel();
        let name = name.to_string();
        self.send(
            Msg::Ack {
                name,
                receipts,
                result,
                reply,
            },
            rx,
        )
        .await
    }

    async fn send(
        &self,
        msg: Msg,
        rx: oneshot::Receiver<Result<Vec<SqliteRow>>>,
    ) -> Result<Vec<SqliteRow>> {
        self.tx
            .send(msg)
            .map_err(|_| Error::Closed { what: WHAT })?;
        // A dropped reply means the task is gone (its runtime shut down).
        rx.await.map_err(|_| Error::Closed { what: WHAT })?
    }
}

/// Most rows of one merged push, and receipts of one merged ack: bounds the statement's
/// parameters (SQLite allows 32,766) and text. A caller's own rows are never split.
const MAX_MERGED: usize = 2000;

/// Turns a batch of messages into its statements: every push in multi-row `INSERT`s, each
/// queue's reserves of one visibility in one pop, each queue's acks in one `DELETE`, and the
/// other writes as they are. The batch's messages are concurrent (each caller waits for its
/// reply before sending again), so any order of them is one they could have run in; pushes go
/// first so reserves of the same batch can take them.
fn plan(msgs: Vec<Msg>) -> VecDeque<Write> {
    let mut pushes: Vec<(String, &'static str, Vec<Vec<u8>>, Sender)> = Vec::new();
    // Reserves by queue and visibility (its bits), acks by queue, in order of first arrival.
    type Takers = Vec<(usize, Sender)>;
    type Ackers = Vec<(Vec<String>, Option<Vec<u8>>, Sender)>;
    let mut reserves: Vec<((String, u64), Takers)> = Vec::new();
    let mut acks: Vec<(String, Ackers)> = Vec::new();
    let mut others = Vec::new();
    let mut submits: Vec<Submitter> = Vec::new();
    for m in msgs {
        match m {
            Msg::Write(w) => others.push(w),
            Msg::Submit {
                op,
                name,
                rows,
                reply,
            } => submits.push(Submitter {
                op,
                name,
                rows,
                reply,
            }),
            Msg::Push {
                name,
                tier,
                bodies,
                reply,
            } => pushes.push((name, tier, bodies, reply)),
            Msg::Reserve {
                name,
                vis,
                max,
                reply,
            } => {
                let key = (name, vis.to_bits());
                match reserves.iter_mut().find(|r| r.0 == key) {
                    Some(r) => r.1.push((max, reply)),
                    None => reserves.push((key, vec![(max, reply)])),
                }
            }
            Msg::Ack {
                name,
                receipts,
                result,
                reply,
            } => match acks.iter_mut().find(|a| a.0 == name) {
                Some(a) => a.1.push((receipts, result, reply)),
                None => acks.push((name, vec![(receipts, result, reply)])),
            },
        }
    }
    let mut out = VecDeque::new();
    // Pushes, in arrival order, so each caller's rows keep their order and ids rise.
    let mut pending = pushes.into_iter().peekable();
    while pending.peek().is_some() {
        let mut sql = String::from("INSERT INTO queues (name, tier, body, attempts) VALUES ");
        let mut args = Vec::new();
        let mut txs = Vec::new();
        let mut key = String::new();
        let mut rows = 0usize;
        while let Some(p) = pending.next_if(|p| rows == 0 || rows + p.2.len() <= MAX_MERGED) {
            let (name, tier, bodies, tx) = p;
            for body in bodies {
                if rows > 0 {
                    sql.push_str(", ");
                }
                let n = args.len();
                sql.push_str(&format!("(?{}, ?{}, ?{}, 0)", n + 1, n + 2, n + 3));
                args.push(Arg::Text(name.clone()));
                args.push(Arg::Text(tier.to_string()));
                args.push(Arg::Blob(body));
                rows += 1;
            }
            if key.is_empty() {
                key = name;
            }
            txs.push(tx);
        }
        if rows == 0 {
            // Empty pushes only: nothing to write.
            Reply::Pushes(txs).send("queue_push", &key, Ok(Vec::new()));
            continue;
        }
        out.push_back(Write {
            op: "queue_push",
            key,
            sql: sql.into(),
            stmts: 1,
            cached: false,
            args,
            reply: Reply::Pushes(txs),
        });
    }
    // Submits, in arrival order, as few multi-row inserts as the bound allows.
    let mut pending = submits.into_iter().peekable();
    while pending.peek().is_some() {
        let mut group: Vec<Submitter> = Vec::new();
        let mut values = 0usize;
        while let Some(s) =
            pending.next_if(|s| group.is_empty() || values + s.rows.len() <= MAX_MERGED * 4)
        {
            values += s.rows.len();
            group.push(s);
        }
        // Every merged submit is a cached write (ADR 0382); alone, a caller keeps its reply.
        let (op, key) = match group.first() {
            Some(s) => (s.op, s.name.clone()),
            None => break,
        };
        let rows: Vec<Arg> = if group.len() == 1 {
            group
                .iter_mut()
                .flat_map(|s| std::mem::take(&mut s.rows))
                .collect()
        } else {
            group.iter().flat_map(|s| s.rows.iter().cloned()).collect()
        };
        let reply = if group.len() == 1 {
            match group.pop() {
                Some(s) => Reply::One(s.reply),
                None => break,
            }
        } else {
            Reply::Submits(group)
        };
        let (sql, args, cached) = match cached::submit(&rows) {
            Some((sql, json)) => (Cow::Borrowed(sql), vec![json], true),
            None => {
                let (sql, args) = submit_statement(rows);
                (Cow::Owned(sql), args, false)
            }
        };
        let w = Write {
            op,
            key,
            sql,
            stmts: 1,
            cached,
            args,
            reply,
        };
        out.push_back(w);
    }
    out.extend(others);
    for ((name, vis), takers) in reserves {
        let max: usize = takers.iter().map(|t| t.0).sum();
        out.push_back(Write {
            op: "queue_reserve",
            key: name.clone(),
            sql: pop_sql(true).into(),
            stmts: 1,
            cached: true,
            args: vec![
                Arg::Text(name),
                Arg::Real(f64::from_bits(vis)),
                Arg::Int(i64::try_from(max).unwrap_or(i64::MAX)),
            ],
            reply: Reply::Reserves(takers),
        });
    }
    for (name, ackers) in acks {
        let mut pending = ackers.into_iter().peekable();
        while pending.peek().is_some() {
            let mut delete =
                String::from("DELETE FROM queue_processing WHERE name = ?1 AND task_id IN (");
            let mut args = vec![Arg::Text(name.clone())];
            // The receipts as JSON and, at the same index, the result a recorded one stores.
            let (mut receipts_json, mut results_json) = (Vec::new(), Vec::new());
            let mut recorded = false;
            let mut group = Vec::new();
            while let Some((receipts, result, tx)) = pending.next_if(|a| {
                receipts_json.is_empty() || receipts_json.len() + a.0.len() <= MAX_MERGED
            }) {
                // A caller's result is written once, as hex, for its recorded receipts.
                let result = result.map(|b| Value::String(hex::encode(&b)));
                for r in &receipts {
                    if !receipts_json.is_empty() {
                        delete.push_str(", ");
                    }
                    delete.push_str(&format!("?{}", args.len() + 1));
                    args.push(Arg::Text(r.clone()));
                    receipts_json.push(Value::String(r.clone()));
                    let mine = is_recorded(r);
                    recorded |= mine;
                    results_json.push(match (mine, &result) {
                        (true, Some(v)) => v.clone(),
                        _ => Value::Null,
                    });
                }
                group.push((receipts, tx));
            }
            if receipts_json.is_empty() {
                Reply::Acks(group).send("queue_ack", &name, Ok(Vec::new()));
                continue;
            }
            if recorded {
                // End the records, ack, and trim the queue's ended records (ADR 0380), from
                // the statement cache (ADR 0382).
                let reply = Reply::Acks(group);
                out.push_back(cached::ack(&name, receipts_json, results_json, reply));
                continue;
            }
            delete.push_str(") RETURNING task_id");
            out.push_back(Write {
                op: "queue_ack",
                key: name.clone(),
                sql: delete.into(),
                stmts: 1,
                cached: false,
                args,
                reply: Reply::Acks(group),
            });
        }
    }
    out
}

/// Whether a receipt names the delivery of a recorded task: the reserve gives those a receipt
/// starting with `t` (ADR 0380; random hex never does).
pub(super) fn is_recorded(receipt: &str) -> bool {
    receipt.starts_with('t')
}

async fn run(writer: Writer, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut guard = writer.lock().await;
        // Whatever arrived while waiting for the connection joins this batch.
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let mut writes = plan(std::mem::take(&mut batch));
        match guard.as_mut() {
            None => writes
                .drain(..)
                .for_each(|w| w.fail(Error::Closed { what: WHAT })),
            // A lone write runs on its own, unless it has several statements or is a merged
            // submit (which `run_batch` retries caller by caller if it fails).
            Some(conn)
                if writes.len() == 1
                    && writes[0].stmts == 1
                    && !matches!(writes[0].reply, Reply::Submits(_)) =>
            {
                if let Some(w) = writes.pop_front() {
                    run_one(conn, w).await;
                }
            }
            Some(_) if writes.is_empty() => {}
            Some(conn) => run_batch(conn, writes).await,
        }
    }
}

/// Adds `from` to `args`; `None` (a parameter past the write's arguments) is an error.
fn bind_all(
    args: &mut SqliteArguments<'static>,
    from: impl IntoIterator<Item = Option<Arg>>,
) -> std::result::Result<(), String> {
    for a in from {
        let r = match a.ok_or("a parameter has no argument")? {
            Arg::Text(v) => args.add(v),
            Arg::Blob(v) => args.add(v),
            Arg::Real(v) => args.add(v),
            Arg::Int(v) => args.add(v),
            Arg::Null => args.add(Option::<Vec<u8>>::None),
        };
        r.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A lone write runs as one autocommit statement, from the statement cache: one statement is
/// atomic and takes the write lock (waiting up to the busy timeout) like `BEGIN IMMEDIATE`.
async fn run_one(conn: &mut SqliteConnection, mut w: Write) {
    let mut args = SqliteArguments::default();
    if let Err(e) = bind_all(&mut args, std::mem::take(&mut w.args).into_iter().map(Some)) {
        let e = Error::invalid("arguments", e);
        return w.fail(e);
    }
    let res = sqlx::query_with(&w.sql, args).fetch_all(&mut *conn).await;
    let res = res.map_err(|e| db(w.op, &w.key, e));
    w.reply.send(w.op, &w.key, res);
}

/// What the connection thread returned for one multi-statement string.
enum Step {
    Row(SqliteRow),
    /// A statement finished.
    End,
}

/// Runs the multi-statement string; the steps before the first error, and that error.
async fn execute(
    conn: &mut SqliteConnection,
    sql: &str,
    args: SqliteArguments<'static>,
    persistent: bool,
) -> (Vec<Step>, Option<sqlx::Error>) {
    let mut steps = Vec::new();
    // Multi-statement strings are SQLite-only in sqlx and deprecated on `Query`; the executor's
    // `fetch_many` is the way to see each statement's end.
    let q = sqlx::query_with(sql, args).persistent(persistent);
    let mut stream = sqlx::Executor::fetch_many(conn, q);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Either::Left(_)) => steps.push(Step::End),
            Ok(Either::Right(row)) => steps.push(Step::Row(row)),
            Err(e) => return (steps, Some(e)),
        }
    }
    (steps, None)
}

/// Ends an open transaction whatever state it is in; an error means there was none.
async fn rollback_quietly(conn: &mut SqliteConnection) {
    let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
}

/// Appends `sql` with each `?N` turned into a bare `?`, and returns which argument (0-based)
/// each `?` takes, in order. Bare parameters are what sqlx numbers across the statements of one
/// string (it binds `?N` per statement, and stops at the first unnamed slot past its
/// arguments, so `?11` alone in a statement would be left NULL). Our statements hold no `?`
/// inside literals.
fn positional(sql: &str, out: &mut String) -> Vec<usize> {
    let mut order = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '?' {
            continue;
        }
        let mut n = 0usize;
        let mut digits = false;
        while let Some(v) = chars.peek().and_then(|d| d.to_digit(10)) {
            n = n * 10 + v as usize;
            digits = true;
            chars.next();
        }
        if digits && n > 0 {
            order.push(n - 1);
        }
    }
    order
}

/// Runs `rest` in one transaction of savepoints, recovering from a failing write, and replies.
async fn run_batch(conn: &mut SqliteConnection, mut rest: VecDeque<Write>) {
    // Writes that succeeded inside the open transaction, with their rows; replied at COMMIT.
    let mut done: Vec<(Write, Vec<SqliteRow>)> = Vec::new();
    let mut in_tx = false;
    while !rest.is_empty() || in_tx {
        let begin = !in_tx;
        let mut sql = String::with_capacity(64 + rest.len() * 160);
        let mut args = SqliteArguments::default();
        if begin {
            sql.push_str("BEGIN IMMEDIATE;\n");
        }
        let mut bad = false;
        // What each statement of the string is, in order.
        let mut kinds = Vec::with_capacity(2 + rest.len() * 3);
        if begin {
            kinds.push(Kind::Begin);
        }
        for w in rest.iter() {
            sql.push_str("SAVEPOINT w;\n");
            let order = positional(&w.sql, &mut sql);
            sql.push_str(";\nRELEASE w;\n");
            let own = order.iter().map(|&i| w.args.get(i).cloned());
            bad |= bind_all(&mut args, own).is_err();
            kinds.push(Kind::Savepoint);
            kinds.extend(std::iter::repeat_n(Kind::Body, w.stmts.max(1)));
            kinds.push(Kind::Release);
        }
        sql.push_str("COMMIT");
        kinds.push(Kind::Commit);
        if bad {
            // Cannot happen with our value types; fail everything rather than misbind.
            for w in rest.drain(..) {
                w.fail(Error::invalid("arguments", "a batch argument did not bind"));
            }
            if in_tx {
                rollback_quietly(conn).await;
                for (w, _) in done.drain(..) {
                    w.fail_with_batch("a batch argument did not bind");
                }
            }
            return;
        }
        // A string of cached writes only is the same text whenever the batch holds the same
        // kinds of writes in the same order: sqlx's statement cache keeps it prepared (ADR 0382).
        let persistent = rest.iter().all(|w| w.cached);
        let (steps, failure) = execute(conn, &sql, args, persistent).await;
        let mut stmt = 0usize;
        let mut committed = false;
        let mut rows = Vec::new();
        let mut body_rows = Vec::new();
        for step in steps {
            match step {
                Step::Row(r) => rows.push(r),
                Step::End => {
                    match kinds.get(stmt) {
                        Some(Kind::Begin) => in_tx = true,
                        Some(Kind::Commit) => {
                            in_tx = false;
                            committed = true;
                            for (w, rows) in done.drain(..) {
                                w.reply.send(w.op, &w.key, Ok(rows));
                            }
                        }
                        // A write's rows are those of all its statements, in order.
                        Some(Kind::Body) => body_rows.append(&mut rows),
                        Some(Kind::Release) => {
                            if let Some(w) = rest.pop_front() {
                                done.push((w, std::mem::take(&mut body_rows)));
                            }
                        }
                        Some(Kind::Savepoint) | None => {}
                    }
                    rows.clear();
                    stmt += 1;
                }
            }
        }
        let Some(e) = failure else {
            if !committed {
                // The string stopped without an error or a COMMIT: never expected; give up
                // on the batch rather than guess which statements ran.
                rollback_quietly(conn).await;
                for (w, _) in done.drain(..) {
                    w.fail_with_batch("the batch stopped early");
                }
                for w in rest.drain(..) {
                    w.fail_with_batch("the batch stopped early");
                }
                return;
            }
            continue;
        };
        let kind = kinds.get(stmt).copied();
        if kind == Some(Kind::Begin) {
            // BEGIN IMMEDIATE failed (busy past the timeout, I/O): nothing ran.
            let cause = e.to_string();
            let mut all = rest.drain(..);
            if let Some(w) = all.next() {
                let err = db(w.op, &w.key, e);
                w.fail(err);
            }
            for w in all {
                let err = Error::unavailable(w.op, w.key.clone(), cause.clone());
                w.fail(err);
            }
            return;
        }
        let cause = e.to_string();
        if kind == Some(Kind::Commit) {
            // COMMIT failed: nothing of the transaction is kept.
            rollback_quietly(conn).await;
            in_tx = false;
            for (w, _) in done.drain(..) {
                w.fail_with_batch(&cause);
            }
            continue;
        }
        let Some(w) = rest.pop_front() else {
            rollback_quietly(conn).await;
            in_tx = false;
            continue;
        };
        let err = db(w.op, &w.key, e);
        // The write's own failure: undo its savepoint (all its statements) and go on with the
        // rest. If that fails, SQLite already rolled back the whole transaction (I/O, full
        // disk), so the writes before it are lost: they fail too, and the rest start a new
        // transaction.
        let undone = kind == Some(Kind::Body)
            && sqlx::query("ROLLBACK TO w")
                .execute(&mut *conn)
                .await
                .is_ok()
            && sqlx::query("RELEASE w").execute(&mut *conn).await.is_ok();
        // A merged submit refused for a taken id is retried caller by caller, in this
        // transaction: only the caller whose id is taken fails.
        let w = match (undone, &err) {
            (true, Error::AlreadyExists { .. }) => match w.split() {
                Split::Apart(apart) => {
                    for one in apart.into_iter().rev() {
                        rest.push_front(one);
                    }
                    continue;
                }
                Split::Whole(w) => w,
            },
            _ => w,
        };
        w.fail(err);
        if !undone {
            rollback_quietly(conn).await;
            in_tx = false;
            for (w, _) in done.drain(..) {
                w.fail_with_batch(&cause);
            }
        }
    }
}

/// What one statement of a batch's string is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Begin,
    Savepoint,
    /// One of a write's own statements.
    Body,
    Release,
    Commit,
}

#[cfg(test)]
mod tests;
