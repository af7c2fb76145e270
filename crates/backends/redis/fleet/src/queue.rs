//! The job queue of [`RedisFleetBackend`]: [`JobQueue`] (guarantees `queue.priority_fifo`,
//! `queue.reserve_atomic`, `queue.receipts`, `queue.attempts`, `queue.nack`, `queue.fail_atomic`,
//! `queue.sweep`, `queue.bad_bodies`, `queue.submit_once`, `queue.stats`, `queue.delayed` and
//! `queue.promote_due`), on the seed's keys.

use switchyard_core::fleet::{RateLimit, RunAt, Submit, delay_ms};
use switchyard_core::lane::{self, Joined, Reply};

use super::*;

#[async_trait]
impl QueueOps for RedisFleetBackend {
    async fn queue_push(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
    ) -> Result<()> {
        let req = PushReq {
            code: priority.code(),
            body: Bytes::copy_from_slice(body),
            task: head.id.is_some().then(|| head_args(head)),
        };
        let pushed = if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            self.push_script(&qk, &[req], false, &self.op_token())
                .await?
                .pop()
                .unwrap_or(Ok(()))
        } else {
            match self.inner.pushes.join(name, req) {
                // An idle lane: the push goes out alone from this task (ADR 0398).
                Joined::Lead(req, lead) => {
                    let qk = self.inner.keys.queue(name);
                    let out = self
                        .push_script(&qk, std::slice::from_ref(&req), false, &self.op_token())
                        .await;
                    let rest = lead.hand_over(BATCH_ITEMS, BATCH_BYTES, push_weight);
                    if !rest.is_empty() {
                        let me = self.clone();
                        let name = name.to_owned();
                        tokio::spawn(async move { me.fly_pushes(name, rest).await });
                    }
                    out?.pop().unwrap_or(Ok(()))
                }
                Joined::Queued(rx, start) => {
                    if start {
                        let me = self.clone();
                        let name = name.to_owned();
                        tokio::spawn(async move { me.fly_pushes(name, Vec::new()).await });
                    }
                    rx.await
                        .unwrap_or_else(|_| Err(dropped("queue_push", name)))?
                }
            }
        };
        pushed.map_err(|id| Error::AlreadyExists { what: "task", id })
    }

    async fn queue_submit(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        submit: &Submit<'_>,
    ) -> Result<SubmitOutcome> {
        // The server's clock decides when the task is due: the delay or instant goes to the
        // script as it was given (an instant the server finds past enqueues at once).
        // `delay_ms` against this machine's clock only checks it, with every adapter's bounds.
        let local_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let checked = delay_ms(submit.run_at, local_now)?;
        let when = match (submit.run_at, checked) {
            (RunAt::After(_), Some(ms)) => format!("d{ms}"),
            (RunAt::At(at), _) => format!("a{at}"),
            _ => String::new(),
        };
        match &submit.idem {
            None if when.is_empty() => self
                .queue_push(name, body, head, submit.priority)
                .await
                .map(|()| SubmitOutcome::Enqueued),
            idem => {
                self.submit_script(name, body, head, submit.priority, &when, idem.as_ref())
                    .await
            }
        }
    }

    async fn queue_size(&self, name: &str) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let c = self.client();
        let lengths = async {
            tokio::try_join!(
                c.llen::<i64, _>(&qk.high),
                c.llen::<i64, _>(&qk.normal),
                c.llen::<i64, _>(&qk.low)
            )
        };
        let (h, n, l): (i64, i64, i64) = self.command("queue_size", &qk.normal, lengths).await?;
        Ok((h + n + l).max(0) as u64)
    }

    async fn queue_stats(&self, name: &str) -> Result<QueueStats> {
        let qk = self.inner.keys.queue(name);
        // One script over the queue's keys (one slot on the cluster layout): a snapshot.
        let reply = self
            .eval(
                "queue_stats",
                &qk.normal,
                &self.inner.scripts.stats,
                qk.all(),
                Vec::new(),
            )
            .await?;
        let counts: Vec<u64> = array(reply.clone())
            .iter()
            .map(|v| to_i64(v).and_then(|n| u64::try_from(n).ok()))
            .collect::<Option<_>>()
            .filter(|c: &Vec<u64>| c.len() == 16)
            .ok_or_else(|| {
                Error::corrupt(
                    &qk.normal,
                    format!("queue_stats: unexpected reply {reply:?}"),
                )
            })?;
        let mut stats = QueueStats::default();
        stats.high = counts[0];
        stats.normal = counts[1];
        stats.low = counts[2];
        stats.in_flight = counts[3];
        stats.overdue = counts[4];
        stats.scheduled = counts[5];
        stats.due = counts[6];
        stats.dead = counts[7];
        stats.paused = counts[8] == 1;
        // A limit the reserve script would not use (it checks the same) is no limit.
        stats.rate_limit = u32::try_from(counts[9])
            .ok()
            .and_then(|max| RateLimit::new(max, Duration::from_millis(counts[10])).ok());
        if stats.rate_limit.is_some() {
            stats.throttled_ms = counts[11];
        }
        stats.completed = counts[12];
        stats.failed = counts[13];
        stats.dead_lettered = counts[14];
        stats.cancelled = counts[15];
        Ok(stats)
    }

    async fn queue_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let qk = self.inner.keys.queue(name);
        let mut out = Vec::new();
        for key in [&qk.high, &qk.normal, &qk.low] {
            let left = n.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let chunk: Vec<RValue> = self
                .command(
                    "queue_peek",
                    key,
                    self.client().lrange(key, 0, left as i64 - 1),
                )
                .await?;
            out.extend(chunk.into_iter().filter_map(to_bytes));
        }
        Ok(out)
    }

    async fn queue_try_reserve(
        &self,
        name: &str,
        max: usize,
        visibility_ms: u64,
        _again: bool,
    ) -> Result<Attempt> {
        // Fresh receipts per attempt (fixed on a probe); a re-send of the attempt's script is
        // answered with the deliveries it made (ADR 0140).
        let receipt = |i: Option<usize>| match (&self.fixed_op, i) {
            (Some(op), None) => format!("{op}:r"),
            (Some(op), Some(i)) => format!("{op}:r{i}"),
            (None, _) => random_token(),
        };
        let retry_in = |ms: Option<u64>| ms.map(|ms| Duration::from_millis(ms.max(1)));
        if max == 1 {
            // One task: batched with the concurrent reserves of the queue (ADR 0141).
            return Ok(
                match self.try_reserve(name, receipt(None), visibility_ms).await? {
                    Ok(d) => Attempt::got(vec![d]),
                    Err(next_due) => Attempt::nothing(retry_in(next_due)),
                },
            );
        }
        // A batch: one call of the reserve script with `max` requests (ADR 0287).
        let qk = self.inner.keys.queue(name);
        let reqs: Vec<ReserveReq> = (0..max)
            .map(|i| ReserveReq {
                receipt: receipt(Some(i)),
                visibility_ms,
            })
            .collect();
        let mut attempt = Attempt::default();
        for outcome in self.reserve_script(&qk, &reqs, &self.op_token()).await? {
            match outcome {
                Ok(d) => attempt.got.push(d),
                Err(ms) => attempt.retry_in = retry_in(ms),
            }
        }
        Ok(attempt)
    }

    /// No in-process signal: a waiting reserve blocks on the queue's wake list, which every
    /// push, requeue and resume of any process feeds.
    fn queue_wake(&self, _name: &str) -> Option<Arc<Notify>> {
        None
    }

    async fn queue_wait(&self, name: &str, nap: Duration) -> Result<()> {
        self.wait_for_push(&self.inner.keys.queue(name), nap).await
    }

    /// A blocked `BLPOP` is bounded and re-issued, so a lost wake-up costs at most this long.
    fn queue_poll(&self) -> (Duration, Duration) {
        (MAX_BLOCK, MAX_BLOCK)
    }

    async fn queue_ack(
        &self,
        name: &str,
        receipt: &Receipt,
        result: Option<&[u8]>,
    ) -> Result<bool> {
        // The result travels with its own ack, in the same (possibly shared) script call.
        let req = AckReq {
            receipt: receipt.as_str().to_owned(),
            result: result.map(Bytes::copy_from_slice),
        };
        let acked = if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            self.ack_script(&qk, &[req], &self.op_token())
                .await?
                .pop()
                .unwrap_or(Acked::NotCurrent)
        } else {
            match self.inner.acks.join(name, req) {
                // An idle lane: the ack goes out alone from this task (ADR 0398).
                Joined::Lead(req, lead) => {
                    let qk = self.inner.keys.queue(name);
                    let out = self
                        .ack_script(&qk, std::slice::from_ref(&req), &self.op_token())
                        .await;
                    let rest = lead.hand_over(BATCH_ITEMS, usize::MAX, |_| 0);
                    if !rest.is_empty() {
                        let me = self.clone();
                        let name = name.to_owned();
                        tokio::spawn(async move { me.fly_acks(name, rest).await });
                    }
                    out?.pop().unwrap_or(Acked::NotCurrent)
                }
                Joined::Queued(rx, start) => {
                    if start {
                        let me = self.clone();
                        let name = name.to_owned();
                        tokio::spawn(async move { me.fly_acks(name, Vec::new()).await });
                    }
                    rx.await
                        .unwrap_or_else(|_| Err(dropped("queue_ack", name)))?
                }
            }
        };
        match acked {
            Acked::Done => Ok(true),
            Acked::NotCurrent => Ok(false),
            Acked::Cancelled(id) => Err(cancelled(id)),
        }
    }

    async fn queue_nack(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
        delay: Duration,
    ) -> Result<bool> {
        self.nack_script("queue_nack", name, receipt, bin(body), Some(head), delay)
            .await
    }

    async fn queue_extend(
        &self,
        name: &str,
        receipt: &Receipt,
        visibility_ms: u64,
    ) -> Result<bool> {
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "queue_extend",
                &qk.processing,
                &self.inner.scripts.extend,
                qk.all(),
                vec![text(receipt.as_str()), ms_arg(visibility_ms)],
            )
            .await?;
        flag_or_cancel(&qk.processing, "queue_extend", reply)
    }

    async fn queue_fail(
        &self,
        name: &str,
        receipt: &Receipt,
        body: &[u8],
        head: &TaskHead,
    ) -> Result<bool> {
        let qk = self.inner.keys.queue(name);
        let [_, max, error] = head_args(head);
        let reply = self
            .eval(
                "queue_fail",
                &qk.processing,
                &self.inner.scripts.fail,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), text(receipt.as_str()), bin(body), max, error],
            )
            .await?;
        flag_or_cancel(&qk.processing, "queue_fail", reply)
    }

    async fn queue_sweep_expired(&self, name: &str) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let mut total = 0u64;
        loop {
            let reply = self
                .eval(
                    "queue_sweep_expired",
                    &qk.processing,
                    &self.inner.scripts.sweep,
                    qk.all(),
                    vec![int(SWEEP_BATCH)],
                )
                .await?;
            let parts = array(reply);
            let moved = parts.first().and_then(to_i64).unwrap_or(0);
            let examined = parts.get(1).and_then(to_i64).unwrap_or(0);
            total += moved.max(0) as u64;
            if examined < SWEEP_BATCH {
                return Ok(total);
            }
        }
    }

    async fn queue_promote_due(&self, name: &str) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let mut total = 0u64;
        // Each run is one atomic step on the queue's slot and moves a bounded number, so a large
        // backlog never holds the server for long; a task moved by one run is gone from the sets
        // the next run reads (guarantee `queue.promote_due`).
        loop {
            let reply = self
                .eval(
                    "queue_promote_due",
                    &qk.normal,
                    &self.inner.scripts.promote,
                    qk.all(),
                    vec![int(PROMOTE_BATCH)],
                )
                .await?;
            let parts = array(reply);
            let moved = parts.first().and_then(to_i64).unwrap_or(0);
            let more = parts.get(1).and_then(to_i64).unwrap_or(0);
            total += moved.max(0) as u64;
            if more != 1 {
                return Ok(total);
            }
        }
    }

    async fn queue_dead(&self, name: &str, body: &[u8], head: &TaskHead) -> Result<()> {
        let qk = self.inner.keys.queue(name);
        let [id, max, error] = head_args(head);
        // A script rather than RPUSH, for its op record: a re-sent RPUSH would append twice.
        self.eval(
            "queue_dead",
            &qk.dead,
            &self.inner.scripts.dead,
            qk.with_op(&self.op_token()),
            vec![self.op_ttl(), bin(body), id, max, error],
        )
        .await?;
        Ok(())
    }
}

/// The queue's batched script calls and blocking wait (ADR 0141), used by the methods above.
impl RedisFleetBackend {
    /// One call of the nack script (ADR 0140 op token included): with `head`, `body` is the
    /// caller's copy (nack, mode `b`); without, it is ignored (release, mode `d`: the delivered
    /// body is requeued).
    pub(crate) async fn nack_script(
        &self,
        op: &'static str,
        name: &str,
        receipt: &Receipt,
        body: RValue,
        head: Option<&TaskHead>,
        delay: Duration,
    ) -> Result<bool> {
        let qk = self.inner.keys.queue(name);
        let mut args = vec![
            self.op_ttl(),
            text(receipt.as_str()),
            body,
            ms_arg(ttl_ms(Some(delay)).unwrap_or(0)),
            text(if head.is_some() { "b" } else { "d" }),
        ];
        if let Some(head) = head {
            let [_, max, error] = head_args(head);
            args.extend([max, error]);
        }
        let reply = self
            .eval(
                op,
                &qk.processing,
                &self.inner.scripts.nack,
                qk.with_op(&self.op_token()),
                args,
            )
            .await?;
        flag_or_cancel(&qk.processing, op, reply)
    }

    /// One submit script call: now (`when` empty) or later, with or without an idempotency key.
    async fn submit_script(
        &self,
        name: &str,
        body: &[u8],
        head: &TaskHead,
        priority: Priority,
        when: &str,
        idem: Option<&IdempotencyKey<'_>>,
    ) -> Result<SubmitOutcome> {
        let qk = self.inner.keys.queue(name);
        let op = self.op_token();
        let mut keys = qk.with_op(&op);
        let mut args = vec![
            self.op_ttl(),
            Self::tier_code(priority),
            bin(body),
            text(when),
            text(op.as_str()),
        ];
        args.extend(head_args(head));
        let taken = |parts: &[RValue]| {
            (parts.first().and_then(to_i64) == Some(2)).then(|| Error::AlreadyExists {
                what: "task",
                id: head.id.clone().unwrap_or_default(),
            })
        };
        let Some(idem) = idem else {
            let reply = self
                .eval(
                    "queue_submit",
                    &qk.normal,
                    &self.inner.scripts.submit,
                    keys,
                    args,
                )
                .await?;
            if let Some(e) = taken(&array(reply)) {
                return Err(e);
            }
            return Ok(SubmitOutcome::Enqueued);
        };
        let kv_key = self.inner.keys.kv(idem.ns, idem.key);
        if self.cluster_layout() {
            // The KV entry lives in another slot than the queue: a duplicate already recorded
            // there is answered first, and the record that decides lives in the queue's slot.
            let stored: RValue = self
                .command("queue_submit", &kv_key, self.client().get(&kv_key))
                .await?;
            if let Some(value) = to_bytes(stored) {
                return Ok(SubmitOutcome::Duplicate(value));
            }
            keys.push(self.inner.keys.queue_idem(name, idem.ns, idem.key));
        } else {
            keys.push(kv_key.clone());
        }
        args.push(bin(idem.value));
        args.push(ms_arg(ttl_ms(idem.ttl).unwrap_or(0)));
        let reply = self
            .eval(
                "queue_submit",
                &qk.normal,
                &self.inner.scripts.submit,
                keys,
                args,
            )
            .await?;
        let mut parts = array(reply);
        if let Some(e) = taken(&parts) {
            return Err(e);
        }
        let (outcome, value, ttl) = match parts.first().and_then(to_i64) {
            Some(1) => (
                SubmitOutcome::Enqueued,
                idem.value.to_vec(),
                ttl_ms(idem.ttl).map(|ms| ms as i64),
            ),
            Some(0) if parts.len() >= 2 => {
                let pttl = parts.get(2).and_then(to_i64).filter(|ms| *ms > 0);
                let value = to_bytes(parts.swap_remove(1)).unwrap_or_default();
                (SubmitOutcome::Duplicate(value.clone()), value, pttl)
            }
            _ => return Err(Error::corrupt(&qk.normal, "submit: unexpected reply")),
        };
        if self.cluster_layout() {
            // Mirror the record into the KV entry (ns, key) readers expect. The submit is done,
            // so a failure here is not the caller's: the next duplicate submit writes it again.
            let expire = ttl.map(Expiration::PX);
            let mirror = self.client().set::<RValue, _, _>(
                &kv_key,
                bin(&value),
                expire,
                Some(SetOptions::NX),
                false,
            );
            if let Err(e) = self.command("queue_submit", &kv_key, mirror).await {
                tracing::warn!(key = %kv_key, error = %e, "queue_submit: idempotency KV entry not written");
            }
        }
        Ok(outcome)
    }

    /// One reserve script call for `reqs` (receipts filled in order) under op token `op`: one
    /// outcome per request.
    pub(crate) async fn reserve_script(
        &self,
        qk: &QueueKeys,
        reqs: &[ReserveReq],
        op: &str,
    ) -> Result<Vec<Reserve>> {
        let mut args = Vec::with_capacity(1 + 2 * reqs.len());
        args.push(self.op_ttl());
        for r in reqs {
            args.push(text(r.receipt.as_str()));
            args.push(ms_arg(r.visibility_ms));
        }
        let reply = self
            .eval(
                "queue_reserve",
                &qk.normal,
                &self.inner.scripts.reserve,
                qk.with_op(op),
                args,
            )
            .await?;
        let bad = || Error::corrupt(&qk.normal, "reserve: unexpected reply shape");
        let parts = array(reply);
        let reserved = parts.first().and_then(to_i64).ok_or_else(bad)?;
        let reserved = usize::try_from(reserved).map_err(|_| bad())?;
        if reserved > reqs.len() || parts.len() != 2 + 4 * reserved {
            return Err(bad());
        }
        let next_due = parts
            .get(1)
            .and_then(to_i64)
            .and_then(|ms| u64::try_from(ms).ok());
        let mut out = Vec::with_capacity(reqs.len());
        let mut items = parts.into_iter().skip(2);
        for req in reqs {
            let mut field = || items.next().unwrap_or(RValue::Null);
            if out.len() >= reserved {
                out.push(Err(next_due));
                continue;
            }
            let (body, tier, attempt, deadline) = (field(), field(), field(), field());
            let tier = to_string(tier).unwrap_or_default();
            // Tier '': the reservation was swept before this re-send arrived (the task is
            // back in its tier): nothing was reserved for this call.
            let Some(priority) = Priority::from_code(&tier) else {
                out.push(Err(next_due));
                continue;
            };
            let body = to_bytes(body).unwrap_or_default();
            out.push(Ok(Delivery {
                receipt: Receipt::new(req.receipt.as_str()),
                task_id: task_id(&body),
                body,
                attempt: u32::try_from(to_i64(&attempt).unwrap_or(1)).unwrap_or(u32::MAX),
                priority,
                visible_until: to_f64(&deadline).unwrap_or(0.0),
            }));
        }
        Ok(out)
    }

    /// One non-blocking reserve attempt, batched with concurrent ones on the same queue.
    pub(crate) async fn try_reserve(
        &self,
        name: &str,
        receipt: String,
        visibility_ms: u64,
    ) -> Result<Reserve> {
        let req = ReserveReq {
            receipt,
            visibility_ms,
        };
        if self.fixed_op.is_some() {
            let qk = self.inner.keys.queue(name);
            let op = self.op_token();
            let mut out = self
                .reserve_script(&qk, std::slice::from_ref(&req), &op)
                .await?;
            return out
                .pop()
                .ok_or_else(|| Error::corrupt(&qk.normal, "reserve: no outcome"));
        }
        let (rx, start) = match self.inner.reserves.join(name, req) {
            // An idle lane: the reserve goes out alone from this task (ADR 0398).
            Joined::Lead(req, lead) => {
                let qk = self.inner.keys.queue(name);
                let out = self
                    .reserve_script(&qk, std::slice::from_ref(&req), &self.op_token())
                    .await;
                let rest = lead.hand_over(BATCH_ITEMS, usize::MAX, |_| 0);
                if !rest.is_empty() {
                    let me = self.clone();
                    let name = name.to_owned();
                    tokio::spawn(async move { me.fly_reserves(name, rest).await });
                }
                return out?
                    .pop()
                    .ok_or_else(|| Error::corrupt(&qk.normal, "reserve: no outcome"));
            }
            Joined::Queued(rx, start) => (rx, start),
        };
        if start {
            let me = self.clone();
            let name = name.to_owned();
            tokio::spawn(async move { me.fly_reserves(name, Vec::new()).await });
        }
        rx.await
            .unwrap_or_else(|_| Err(dropped("queue_reserve", name)))
    }

    pub(crate) async fn fly_reserves(self, name: String, first: Vec<(ReserveReq, Reply<Reserve>)>) {
        let qk = self.inner.keys.queue(&name);
        let run =
            async |reqs: Vec<ReserveReq>| self.reserve_script(&qk, &reqs, &self.op_token()).await;
        lane::fly(
            &self.inner.reserves,
            &name,
            first,
            BATCH_ITEMS,
            usize::MAX,
            |_| 0,
            run,
        )
        .await;
    }

    /// One push script call for `reqs` under op token `op`: each request its own call, or (with
    /// `all`) one call pushing all or none. Per request, `Err(id)` when its task id is taken.
    pub(crate) async fn push_script(
        &self,
        qk: &QueueKeys,
        reqs: &[PushReq],
        all: bool,
        op: &str,
    ) -> Result<Vec<Pushed>> {
        // Bodies without ids keep the plain form, which decodes nothing (ADR 0380).
        let recorded = reqs.iter().any(|r| r.task.is_some());
        let mut args = Vec::with_capacity(3 + 5 * reqs.len());
        args.push(self.op_ttl());
        if recorded {
            args.push(RValue::from_static_str("#"));
            args.push(RValue::from_static_str(if all { "a" } else { "e" }));
        }
        for r in reqs {
            args.push(RValue::from_static_str(r.code));
            args.push(RValue::Bytes(r.body.clone()));
            if recorded {
                match &r.task {
                    Some(task) => args.extend(task.iter().cloned()),
                    None => args.extend([text(""), text(""), text("")]),
                }
            }
        }
        let reply = self
            .eval(
                "queue_push",
                &qk.normal,
                &self.inner.scripts.push,
                qk.with_op(op),
                args,
            )
            .await?;
        if !recorded {
            return Ok(reqs.iter().map(|_| Ok(())).collect());
        }
        let flags = to_bytes(reply).unwrap_or_default();
        if flags.len() != reqs.len() {
            return Err(Error::corrupt(&qk.normal, "push: unexpected reply"));
        }
        Ok(reqs
            .iter()
            .zip(flags)
            .map(|(r, f)| match (f, &r.task) {
                (b'x', Some([id, ..])) => Err(to_string(id.clone()).unwrap_or_default()),
                (b'-', _) => Err(String::new()),
                _ => Ok(()),
            })
            .collect())
    }

    pub(crate) async fn fly_pushes(self, name: String, first: Vec<(PushReq, Reply<Pushed>)>) {
        let qk = self.inner.keys.queue(&name);
        let run =
            async |reqs: Vec<PushReq>| self.push_script(&qk, &reqs, false, &self.op_token()).await;
        lane::fly(
            &self.inner.pushes,
            &name,
            first,
            BATCH_ITEMS,
            BATCH_BYTES,
            push_weight,
            run,
        )
        .await;
    }

    /// One ack script call for `reqs` under op token `op`: the outcome of each.
    pub(crate) async fn ack_script(
        &self,
        qk: &QueueKeys,
        reqs: &[AckReq],
        op: &str,
    ) -> Result<Vec<Acked>> {
        // Results pair with their receipts; acks without one keep today's form.
        let paired = reqs.iter().any(|r| r.result.is_some());
        let mut args = Vec::with_capacity(2 + 2 * reqs.len());
        args.push(self.op_ttl());
        if paired {
            args.push(RValue::from_static_str("#"));
        }
        for r in reqs {
            args.push(text(r.receipt.as_str()));
            if paired {
                args.push(match &r.result {
                    Some(result) => {
                        let mut v = Vec::with_capacity(result.len() + 1);
                        v.push(b'r');
                        v.extend_from_slice(result);
                        RValue::Bytes(v.into())
                    }
                    None => RValue::from_static_str(""),
                });
            }
        }
        let reply = self
            .eval(
                "queue_ack",
                &qk.processing,
                &self.inner.scripts.ack,
                qk.with_op(op),
                args,
            )
            .await?;
        let bad = || Error::corrupt(&qk.processing, "ack: unexpected reply");
        let reply = to_bytes(reply).unwrap_or_default();
        // With a cancelled delivery, the flags and the cancelled ids come as a JSON array.
        let (flags, ids) = if reply.first() == Some(&b'[') {
            let mut all: Vec<String> = serde_json::from_slice(&reply).map_err(|_| bad())?;
            if all.is_empty() {
                return Err(bad());
            }
            let flags = all.remove(0).into_bytes();
            (flags, all)
        } else {
            (reply, Vec::new())
        };
        if flags.len() != reqs.len() {
            return Err(bad());
        }
        let mut ids = ids.into_iter();
        flags
            .into_iter()
            .map(|f| match f {
                b'1' => Ok(Acked::Done),
                b'c' => ids.next().map(Acked::Cancelled).ok_or_else(bad),
                _ => Ok(Acked::NotCurrent),
            })
            .collect()
    }

    pub(crate) async fn fly_acks(self, name: String, first: Vec<(AckReq, Reply<Acked>)>) {
        let qk = self.inner.keys.queue(&name);
        let run = async |reqs: Vec<AckReq>| self.ack_script(&qk, &reqs, &self.op_token()).await;
        let lanes = &self.inner.acks;
        lane::fly(lanes, &name, first, BATCH_ITEMS, usize::MAX, |_| 0, run).await;
    }

    /// Waits up to `wait` for a wake-up token on a dedicated connection.
    pub(crate) async fn wait_for_push(&self, qk: &QueueKeys, wait: Duration) -> Result<()> {
        if wait < Duration::from_millis(10) {
            tokio::time::sleep(wait).await;
            return Ok(());
        }
        // All blocking connections busy: fall back to a short sleep, then try again.
        let Ok(client) = tokio::time::timeout(wait, self.inner.blocking.acquire()).await else {
            return Ok(());
        };
        let options = Options {
            timeout: Some(wait + Duration::from_secs(5)),
            ..Default::default()
        };
        let blpop = async {
            client
                .with_options(&options)
                .blpop::<RValue, _>(qk.wake.clone(), wait.as_secs_f64())
                .await
                .map(|_| ())
                .or_else(|e| match e.kind() {
                    // fred reports BLPOP's nil reply (nothing pushed in time) as a timeout.
                    ErrorKind::Timeout => Ok(()),
                    _ => Err(classify("queue_reserve", &qk.wake, e)),
                })
        };
        // Inside the circuit: a reserve blocked when Redis goes away ends with `Unavailable`
        // once a reconnect is refused, instead of waiting out its timeout in fred's queue.
        self.inner
            .circuit
            .guard("queue_reserve", &qk.wake, blpop)
            .await
    }

    pub(crate) fn tier_code(p: Priority) -> RValue {
        text(p.code())
    }
}

/// A push's weight in a batch: its body's bytes (a batch carries at most `BATCH_BYTES` past its
/// first push).
fn push_weight(r: &PushReq) -> usize {
    r.body.len()
}
