//! Natural batching of concurrent calls into one backend call, for adapters: the Redis fleet's
//! queue calls (ADR 0141), the Redis and PostgreSQL event stores' appends (ADRs 0385, 0386).
//!
//! Calls of one kind (a queue's push, reserve or ack; the appends of one namespace or one log)
//! wait in a lane, named by a key (the queue, the namespace's slot, the log). A lane has at most
//! [`MAX_FLIGHTS`] backend calls in flight; each takes whatever waits when it starts, so a lone
//! call goes out at once (batch of one) and under load one backend call serves many. Each call
//! still gets its own reply, and every call of a batch is applied in one atomic step (a script, a
//! transaction), so what a caller observes is what it would observe with a step per call:
//! batching only merges calls that were concurrent, whose relative order no caller can know.
//!
//! Batches run in spawned tasks: a caller that stops waiting (its future dropped) cannot cancel a
//! batch that carries other callers' calls.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{Error, Result};
use tokio::sync::oneshot;

/// Backend calls in flight per lane: one being answered while the next one fills.
pub const MAX_FLIGHTS: usize = 2;

/// Where a call's reply goes.
pub type Reply<O> = oneshot::Sender<Result<O>>;

/// The lanes of one call kind, by key (a queue, a namespace).
pub struct Lanes<R, O> {
    lanes: Mutex<HashMap<String, Lane<R, O>>>,
}

struct Lane<R, O> {
    waiting: VecDeque<(R, Reply<O>)>,
    flights: usize,
}

impl<R, O> std::fmt::Debug for Lanes<R, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("lanes", &self.lock().len())
            .finish()
    }
}

impl<R, O> Default for Lanes<R, O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R, O> Lanes<R, O> {
    /// No lanes yet: a lane exists while calls wait in it or fly.
    pub fn new() -> Self {
        Lanes {
            lanes: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Lane<R, O>>> {
        // A panic while holding the lock leaves the map consistent (every change is one step).
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `req` on `key`'s lane. `true`: the caller must start a flight for the lane (run
    /// [`Lanes::take`] until it comes back empty).
    pub fn enqueue(&self, key: &str, req: R) -> (oneshot::Receiver<Result<O>>, bool) {
        let (tx, rx) = oneshot::channel();
        let mut lanes = self.lock();
        let lane = match lanes.get_mut(key) {
            Some(lane) => lane,
            None => lanes.entry(key.to_owned()).or_insert_with(|| Lane {
                waiting: VecDeque::new(),
                flights: 0,
            }),
        };
        lane.waiting.push_back((req, tx));
        let start = lane.flights < MAX_FLIGHTS;
        if start {
            lane.flights += 1;
        }
        (rx, start)
    }

    /// The next batch of a flight: waiting calls in arrival order, at least one, at most
    /// `max_items`, and past the first no more than `max_weight` in total. Empty when nothing
    /// waits: the flight is over (and the lane forgotten when it was the last one).
    pub fn take(
        &self,
        key: &str,
        max_items: usize,
        max_weight: usize,
        weight: impl Fn(&R) -> usize,
    ) -> Vec<(R, Reply<O>)> {
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(key) else {
            return Vec::new();
        };
        if lane.waiting.is_empty() {
            lane.flights = lane.flights.saturating_sub(1);
            if lane.flights == 0 {
                lanes.remove(key);
            }
            return Vec::new();
        }
        let mut batch = Vec::new();
        let mut total = 0;
        while let Some((req, _)) = lane.waiting.front() {
            let w = weight(req);
            if !batch.is_empty() && (batch.len() >= max_items || total + w > max_weight) {
                break;
            }
            total += w;
            if let Some(item) = lane.waiting.pop_front() {
                batch.push(item);
            }
        }
        batch
    }

    /// Ends a flight that stopped before [`Lanes::take`] came back empty (a panic): later calls
    /// can start flights again.
    pub fn abandon(&self, key: &str) {
        let mut lanes = self.lock();
        if let Some(lane) = lanes.get_mut(key) {
            lane.flights = lane.flights.saturating_sub(1);
        }
    }
}

/// One flight of `key`'s lane: batches until nothing waits. Each batch is one call of `run`
/// (one backend call) whose answers go to the batch's callers in order; a failed batch gives each
/// caller a copy of its error.
///
/// `run` is bound as `Fn(..) -> F` rather than `AsyncFn`: an `AsyncFn` bound's future cannot be
/// shown `Send`, and flights run under `tokio::spawn`.
pub async fn fly<R, O, F>(
    lanes: &Lanes<R, O>,
    key: &str,
    max_items: usize,
    max_weight: usize,
    weight: impl Fn(&R) -> usize,
    run: impl Fn(Vec<R>) -> F,
) where
    F: Future<Output = Result<Vec<O>>>,
{
    let mut guard = FlightGuard {
        lanes,
        key,
        done: false,
    };
    loop {
        let batch = lanes.take(key, max_items, max_weight, &weight);
        if batch.is_empty() {
            break;
        }
        let (reqs, replies): (Vec<R>, Vec<Reply<O>>) = batch.into_iter().unzip();
        match run(reqs).await {
            Ok(outcomes) => {
                for (tx, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = tx.send(Ok(outcome));
                }
            }
            Err(e) => {
                for tx in replies {
                    let _ = tx.send(Err(dup(&e)));
                }
            }
        }
    }
    guard.done = true;
}

/// Runs [`Lanes::abandon`] unless the flight ended normally.
struct FlightGuard<'a, R, O> {
    lanes: &'a Lanes<R, O>,
    key: &'a str,
    done: bool,
}

impl<R, O> Drop for FlightGuard<'_, R, O> {
    fn drop(&mut self) {
        if !self.done {
            self.lanes.abandon(self.key);
        }
    }
}

/// A copy of `e` for each caller of a failed batch (errors are not `Clone`; the source becomes
/// text).
fn dup(e: &Error) -> Error {
    match e {
        Error::Unavailable { op, key, source } => {
            Error::unavailable(op, key.clone(), source.to_string())
        }
        Error::Rejected { op, key, message } => Error::Rejected {
            op,
            key: key.clone(),
            message: message.clone(),
        },
        Error::Corrupt { location, reason } => Error::corrupt(location.clone(), reason),
        other => Error::unavailable("batch", "", other.to_string()),
    }
}

/// What a caller sees when its batch's task ended without answering (runtime shutdown).
pub fn dropped(op: &'static str, key: &str) -> Error {
    Error::unavailable(
        op,
        key,
        "the batch carrying this call was dropped; outcome unknown",
    )
}
