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
//! Batches that carry other callers' calls run in spawned tasks: a caller that stops waiting (its
//! future dropped) cannot cancel them. A call that finds its lane idle leads instead
//! ([`Lanes::join`]): it runs alone, in the caller's own task, and hands the lane over when it
//! is done. A lone call then costs no task spawn and no cross-task wake-ups (one writer appends
//! about 10 % more events per second on Redis; ADR 0398), and cancelling it cancels only itself.

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

    /// Joins `key`'s lane with `req`. When the lane is idle (no flight, nothing waiting) the
    /// caller leads a flight of its own: it gets `req` back to run alone, now, as a batch of one,
    /// and then hands the lane over with [`Lead::hand_over`] (dropping the [`Lead`] instead ends
    /// its flight, as a cancelled caller does). Otherwise `req` waits as [`Lanes::enqueue`] puts
    /// it.
    pub fn join(&self, key: &str, req: R) -> Joined<'_, R, O> {
        {
            let mut lanes = self.lock();
            let idle = lanes
                .get(key)
                .is_none_or(|l| l.flights == 0 && l.waiting.is_empty());
            if idle {
                lanes.insert(
                    key.to_owned(),
                    Lane {
                        waiting: VecDeque::new(),
                        flights: 1,
                    },
                );
                return Joined::Lead(
                    req,
                    Lead {
                        lanes: self,
                        key: key.to_owned(),
                        done: false,
                    },
                );
            }
        }
        let (rx, start) = self.enqueue(key, req);
        Joined::Queued(rx, start)
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

    /// Ends a flight that stopped before [`Lanes::take`] came back empty (a panic, a cancelled
    /// lead): later calls can start flights again. Calls still waiting are another flight's:
    /// calls wait only while [`MAX_FLIGHTS`] fly, and a flight ends only when nothing waits.
    pub fn abandon(&self, key: &str) {
        let mut lanes = self.lock();
        if let Some(lane) = lanes.get_mut(key) {
            lane.flights = lane.flights.saturating_sub(1);
            if lane.flights == 0 && lane.waiting.is_empty() {
                lanes.remove(key);
            }
        }
    }
}

/// How a call joined its lane ([`Lanes::join`]).
pub enum Joined<'a, R, O> {
    /// The lane was idle: run the call alone in this task, then [`Lead::hand_over`].
    Lead(R, Lead<'a, R, O>),
    /// The call waits for its reply; `true`: start a flight for the lane, as after
    /// [`Lanes::enqueue`].
    Queued(oneshot::Receiver<Result<O>>, bool),
}

/// The flight a lone call leads while it runs in its caller's task. Dropped without
/// [`Lead::hand_over`] (the caller stopped waiting), it ends the flight.
pub struct Lead<'a, R, O> {
    lanes: &'a Lanes<R, O>,
    key: String,
    done: bool,
}

impl<R, O> std::fmt::Debug for Joined<'_, R, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Joined::Lead(_, lead) => f.debug_tuple("Lead").field(lead).finish(),
            Joined::Queued(_, start) => f.debug_tuple("Queued").field(start).finish(),
        }
    }
}

impl<R, O> std::fmt::Debug for Lead<'_, R, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lead").field("key", &self.key).finish()
    }
}

impl<R, O> Lead<'_, R, O> {
    /// Ends the lead's own call: the calls that queued meanwhile, as [`Lanes::take`] gives them.
    /// Empty: the flight is over. Otherwise the flight goes on with them, and the caller must run
    /// it in a task of its own ([`fly`]): those calls are other callers'.
    pub fn hand_over(
        mut self,
        max_items: usize,
        max_weight: usize,
        weight: impl Fn(&R) -> usize,
    ) -> Vec<(R, Reply<O>)> {
        self.done = true;
        self.lanes.take(&self.key, max_items, max_weight, weight)
    }
}

impl<R, O> Drop for Lead<'_, R, O> {
    fn drop(&mut self) {
        if !self.done {
            self.lanes.abandon(&self.key);
        }
    }
}

/// One flight of `key`'s lane: batches until nothing waits. Each batch is one call of `run`
/// (one backend call) whose answers go to the batch's callers in order; a failed batch gives each
/// caller a copy of its error. `first`, when it holds any, is the flight's first batch (what
/// [`Lead::hand_over`] gave); a flight that starts on its own passes none.
///
/// `run` is bound as `Fn(..) -> F` rather than `AsyncFn`: an `AsyncFn` bound's future cannot be
/// shown `Send`, and flights run under `tokio::spawn`.
pub async fn fly<R, O, F>(
    lanes: &Lanes<R, O>,
    key: &str,
    first: Vec<(R, Reply<O>)>,
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
    let mut first = Some(first).filter(|f| !f.is_empty());
    loop {
        let batch = match first.take() {
            Some(batch) => batch,
            None => lanes.take(key, max_items, max_weight, &weight),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lead_or_panic<'a>(j: Joined<'a, u32, u32>) -> (u32, Lead<'a, u32, u32>) {
        match j {
            Joined::Lead(req, lead) => (req, lead),
            Joined::Queued(..) => panic!("expected to lead an idle lane"),
        }
    }

    fn queued_or_panic(j: Joined<'_, u32, u32>) -> (oneshot::Receiver<Result<u32>>, bool) {
        match j {
            Joined::Queued(rx, start) => (rx, start),
            Joined::Lead(..) => panic!("expected to queue behind a flight"),
        }
    }

    #[test]
    fn a_call_on_an_idle_lane_leads_and_the_lane_is_gone_after_it() {
        let lanes: Lanes<u32, u32> = Lanes::new();
        let (req, lead) = lead_or_panic(lanes.join("q", 7));
        assert_eq!(req, 7, "the lead gets its own call back to run");
        assert!(lead.hand_over(10, usize::MAX, |_| 0).is_empty());
        assert!(lanes.lock().is_empty(), "an idle lane is forgotten");
        // Idle again: the next lone call leads too.
        let (_, lead) = lead_or_panic(lanes.join("q", 8));
        drop(lead);
        assert!(lanes.lock().is_empty());
    }

    #[test]
    fn calls_that_queue_while_the_lead_runs_are_handed_over_in_order() {
        let lanes: Lanes<u32, u32> = Lanes::new();
        let (_, lead) = lead_or_panic(lanes.join("q", 1));
        // One flight (the lead) of two: the second call starts a flight of its own.
        let (_rx2, start2) = queued_or_panic(lanes.join("q", 2));
        assert!(start2);
        let (_rx3, start3) = queued_or_panic(lanes.join("q", 3));
        assert!(!start3, "two flights already: the third call waits");
        let rest = lead.hand_over(10, usize::MAX, |_| 0);
        let reqs: Vec<u32> = rest.iter().map(|(r, _)| *r).collect();
        assert_eq!(reqs, vec![2, 3]);
    }

    #[test]
    fn a_dropped_lead_leaves_waiting_calls_to_the_other_flight() {
        let lanes: Lanes<u32, u32> = Lanes::new();
        let (_, lead) = lead_or_panic(lanes.join("q", 1));
        let (_rx2, _) = queued_or_panic(lanes.join("q", 2));
        let (_rx3, _) = queued_or_panic(lanes.join("q", 3));
        drop(lead); // the lead's caller stopped waiting
        // The other flight takes what waits and then ends; the lane is idle again.
        let batch: Vec<u32> = lanes
            .take("q", 10, usize::MAX, |_| 0)
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        assert_eq!(batch, vec![2, 3]);
        assert!(lanes.take("q", 10, usize::MAX, |_| 0).is_empty());
        assert!(lanes.lock().is_empty());
        let (req, _lead) = lead_or_panic(lanes.join("q", 4));
        assert_eq!(req, 4);
    }

    #[tokio::test]
    async fn a_flight_from_a_hand_over_answers_every_caller() {
        let lanes: Lanes<u32, u32> = Lanes::new();
        let (_, lead) = lead_or_panic(lanes.join("q", 1));
        let (rx2, _) = queued_or_panic(lanes.join("q", 2));
        let (rx3, _) = queued_or_panic(lanes.join("q", 3));
        let first = lead.hand_over(1, usize::MAX, |_| 0);
        assert_eq!(first.len(), 1, "at most max_items per batch");
        fly(
            &lanes,
            "q",
            first,
            1,
            usize::MAX,
            |_| 0,
            async |reqs: Vec<u32>| Ok(reqs.into_iter().map(|r| r * 10).collect()),
        )
        .await;
        assert_eq!(rx2.await.ok().and_then(|r| r.ok()), Some(20));
        assert_eq!(rx3.await.ok().and_then(|r| r.ok()), Some(30));
        // The flight the second caller started finds nothing left and ends the lane.
        assert!(lanes.take("q", 1, usize::MAX, |_| 0).is_empty());
        assert!(
            lanes.lock().is_empty(),
            "both flights ended with nothing waiting"
        );
    }

    /// A caller as the adapters write one (lead, or queue and start a flight), over a backend
    /// call that takes a while and answers each request with itself.
    async fn call(lanes: std::sync::Arc<Lanes<u32, u32>>, req: u32) -> Result<u32> {
        async fn backend(reqs: Vec<u32>) -> Result<Vec<u32>> {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            Ok(reqs)
        }
        let (rx, start) = match lanes.join("q", req) {
            Joined::Lead(req, lead) => {
                let out = backend(vec![req]).await;
                let rest = lead.hand_over(4, usize::MAX, |_| 0);
                if !rest.is_empty() {
                    let l = lanes.clone();
                    tokio::spawn(
                        async move { fly(&l, "q", rest, 4, usize::MAX, |_| 0, backend).await },
                    );
                }
                return out?.pop().ok_or_else(|| Error::corrupt("q", "no reply"));
            }
            Joined::Queued(rx, start) => (rx, start),
        };
        if start {
            let l = lanes.clone();
            tokio::spawn(
                async move { fly(&l, "q", Vec::new(), 4, usize::MAX, |_| 0, backend).await },
            );
        }
        rx.await.unwrap_or_else(|_| Err(dropped("call", "q")))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_that_give_up_strand_no_one_and_leave_the_lane_idle() {
        let lanes = std::sync::Arc::new(Lanes::<u32, u32>::new());
        for round in 0..20u32 {
            let mut patient = Vec::new();
            let mut impatient = Vec::new();
            for i in 0..40u32 {
                let req = round * 100 + i;
                let task = tokio::spawn(call(lanes.clone(), req));
                // Every third caller stops waiting at once, whether it leads or waits.
                if i % 3 == 0 {
                    impatient.push(task);
                } else {
                    patient.push((req, task));
                }
            }
            for task in &impatient {
                task.abort();
            }
            for (req, task) in patient {
                let got = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
                let answer = got.ok().and_then(|joined| joined.ok()).and_then(|r| r.ok());
                assert_eq!(
                    answer,
                    Some(req),
                    "round {round}: caller {req} got no answer"
                );
            }
            for task in impatient {
                let _ = task.await;
            }
            // Whatever flights are left end once nothing waits.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            assert!(
                lanes.lock().is_empty(),
                "round {round}: the lane is not idle"
            );
            let (req, lead) = lead_or_panic(lanes.join("q", 7));
            assert_eq!(req, 7);
            drop(lead);
        }
    }
}
