//! Control of a task (ADR 0380): records by id, cancel, results, retention and the end-event
//! log. The record lives in the queue's own keys (`{base}:tasks` and its neighbours, see
//! [`QueueKeys`]), so every script that moves a task writes its record in the same step; this
//! file holds the steps of the `Tasks` area itself.

use switchyard_core::fleet::{
    CancelOutcome, Keep, Retention, TaskEvent, TaskEvents, TaskInfo, TaskState,
};

use super::*;

/// The retention fields of `{base}:retention`, in the order of [`retention_values`].
const RETENTION_FIELDS: [&str; 6] = ["ok_n", "ok_ms", "bad_n", "bad_ms", "ev_n", "ev_ms"];

/// `r` as the values of [`RETENTION_FIELDS`].
fn retention_values(r: &Retention) -> [u64; 6] {
    [
        r.completed.count,
        r.completed.age_ms(),
        r.failed.count,
        r.failed.age_ms(),
        r.events.count,
        r.events.age_ms(),
    ]
}

/// A state from a script's reply.
fn state_of(v: RValue, key: &str) -> Result<TaskState> {
    let s = to_string(v).unwrap_or_default();
    TaskState::parse(&s).ok_or_else(|| Error::corrupt(key, format!("unknown task state {s:?}")))
}

/// An optional number from a script's reply (`''` or nil: none).
fn opt_f64(v: &RValue) -> Option<f64> {
    to_f64(v)
}

/// One event of the log from an XRANGE entry `[id, [field, value, …]]`.
fn event_of(entry: RValue, key: &str) -> Result<TaskEvent> {
    event_and_prev(entry, key).map(|(event, _)| event)
}

/// One event of the log and the id of the event before it, which every entry names (`p`), from
/// an XRANGE or XREAD entry `[id, [field, value, …]]`.
fn event_and_prev(entry: RValue, key: &str) -> Result<(TaskEvent, Option<String>)> {
    let bad = || Error::corrupt(key, "task_events: unexpected entry");
    let mut parts = array(entry).into_iter();
    let cursor = parts.next().and_then(to_string).ok_or_else(bad)?;
    let fields = flatten_pairs(parts.next().ok_or_else(bad)?);
    let mut event = TaskEvent::new(cursor, String::new(), TaskState::Completed);
    let mut prev = None;
    let mut it = fields.into_iter();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        match to_string(f).as_deref() {
            Some("id") => event.task_id = to_string(v).unwrap_or_default(),
            Some("s") => event.state = state_of(v, key)?,
            Some("a") => event.attempt = u32::try_from(to_i64(&v).unwrap_or(0)).unwrap_or(0),
            Some("t") => event.at = to_f64(&v).unwrap_or(0.0),
            Some("e") => event.error = to_string(v),
            Some("z") => event.result_size = u64::try_from(to_i64(&v).unwrap_or(0)).unwrap_or(0),
            Some("r") => event.result = Some(to_bytes(v).unwrap_or_default()),
            Some("p") => prev = to_string(v),
            _ => {}
        }
    }
    Ok((event, prev))
}

/// The events an `XREAD` of one stream answered after `after`, when they are exactly the ones
/// `task_events` would read: each names the one before it, the first names `after` (so no trim
/// removed any between). `None` otherwise (nothing read, or a chain broken by a trim): the front
/// then reads the log with the script, which tells a gap exactly.
fn woken_events(reply: RValue, after: &str, key: &str) -> Result<Option<TaskEvents>> {
    // RESP2: [[stream, entries]]; RESP3: {stream: entries}.
    let entries = match reply {
        RValue::Null => return Ok(None),
        RValue::Map(m) => m.inner().into_iter().next().map(|(_, v)| v),
        other => array(other)
            .into_iter()
            .next()
            .and_then(|stream| array(stream).into_iter().nth(1)),
    };
    let Some(entries) = entries else {
        return Ok(None);
    };
    let mut expect = after.to_owned();
    let mut events = Vec::new();
    for entry in array(entries) {
        let (event, prev) = event_and_prev(entry, key)?;
        if prev.as_deref() != Some(expect.as_str()) {
            return Ok(None);
        }
        expect.clone_from(&event.cursor);
        events.push(event);
    }
    if events.is_empty() {
        return Ok(None);
    }
    Ok(Some(TaskEvents::new(events, false, expect)))
}

#[async_trait]
impl TaskOps for RedisFleetBackend {
    async fn task_get(&self, name: &str, id: &str) -> Result<Option<TaskInfo>> {
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "task_get",
                &qk.tasks,
                &self.inner.scripts.task_get,
                qk.all(),
                vec![text(id)],
            )
            .await?;
        let parts = array(reply);
        if parts.is_empty() {
            return Ok(None);
        }
        if parts.len() != 14 {
            return Err(Error::corrupt(&qk.tasks, "task_get: unexpected reply"));
        }
        let mut it = parts.into_iter();
        let mut next = || it.next().unwrap_or(RValue::Null);
        let state = state_of(next(), &qk.tasks)?;
        let tier = to_string(next()).unwrap_or_default();
        let attempt = next();
        let max = next();
        let submitted = next();
        let mut info = TaskInfo::new(id, state, to_f64(&submitted).unwrap_or(0.0));
        info.priority = Priority::from_code(&tier).unwrap_or(Priority::Normal);
        info.attempt = u32::try_from(to_i64(&attempt).unwrap_or(0)).unwrap_or(0);
        info.max_attempts = to_i64(&max).and_then(|m| u32::try_from(m).ok());
        info.started_at = opt_f64(&next());
        info.finished_at = opt_f64(&next());
        info.cancel_requested = to_i64(&next()) == Some(1);
        info.visible_until = opt_f64(&next());
        info.progress = to_bytes(next());
        info.last_error = to_string(next());
        info.result = to_bytes(next());
        info.foreign = to_i64(&next()) == Some(1);
        info.events_cursor = to_string(next()).unwrap_or_default();
        Ok(Some(info))
    }

    async fn task_cancel(&self, name: &str, ids: &[String]) -> Result<Vec<CancelOutcome>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let qk = self.inner.keys.queue(name);
        let mut args = Vec::with_capacity(1 + ids.len());
        args.push(self.op_ttl());
        args.extend(ids.iter().map(|id| text(id.as_str())));
        let reply = self
            .eval(
                "task_cancel",
                &qk.tasks,
                &self.inner.scripts.task_cancel,
                qk.with_op(&self.op_token()),
                args,
            )
            .await?;
        let flags = to_bytes(reply).unwrap_or_default();
        if flags.len() != ids.len() {
            return Err(Error::corrupt(&qk.tasks, "task_cancel: unexpected reply"));
        }
        flags
            .into_iter()
            .map(|f| {
                Ok(match f {
                    b'c' => CancelOutcome::Cancelled,
                    b'r' => CancelOutcome::CancelRequested,
                    b'u' => CancelOutcome::Unknown,
                    b'C' => CancelOutcome::Finished(TaskState::Completed),
                    b'F' => CancelOutcome::Finished(TaskState::Failed),
                    b'D' => CancelOutcome::Finished(TaskState::Dead),
                    b'X' => CancelOutcome::Finished(TaskState::Cancelled),
                    _ => return Err(Error::corrupt(&qk.tasks, "task_cancel: unknown outcome")),
                })
            })
            .collect()
    }

    async fn queue_purge_step(&self, name: &str, max: usize) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "queue_purge",
                &qk.normal,
                &self.inner.scripts.purge,
                qk.with_op(&self.op_token()),
                vec![self.op_ttl(), int(max)],
            )
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn task_events(&self, name: &str, after: Option<&str>, max: usize) -> Result<TaskEvents> {
        let qk = self.inner.keys.queue(name);
        let reply = self
            .eval(
                "task_events",
                &qk.events,
                &self.inner.scripts.task_events,
                qk.all(),
                vec![text(after.unwrap_or("")), int(max)],
            )
            .await?;
        let mut parts = array(reply).into_iter();
        let (Some(cursor), Some(gap)) = (parts.next(), parts.next()) else {
            return Err(Error::corrupt(&qk.events, "task_events: unexpected reply"));
        };
        let events = parts
            .map(|e| event_of(e, &qk.events))
            .collect::<Result<Vec<_>>>()?;
        Ok(TaskEvents::new(
            events,
            to_i64(&gap) == Some(1),
            to_string(cursor).unwrap_or_default(),
        ))
    }

    /// `XREAD BLOCK` on a blocking connection: the wait ends as soon as any process appends an
    /// end after `after`, and what it read is the answer when it follows `after` exactly, so a
    /// waiter learns an end one round trip after its step.
    async fn task_events_wait(
        &self,
        name: &str,
        after: &str,
        max: usize,
        nap: Duration,
    ) -> Result<Option<TaskEvents>> {
        let is_id = after
            .split_once('-')
            .is_some_and(|(ms, seq)| ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok());
        if nap < Duration::from_millis(10) || !is_id {
            tokio::time::sleep(nap).await;
            return Ok(None);
        }
        let key = self.inner.keys.queue(name).events;
        // All blocking connections busy: the front reads again after this nap.
        let Ok(client) = tokio::time::timeout(nap, self.inner.blocking.acquire()).await else {
            return Ok(None);
        };
        let options = Options {
            timeout: Some(nap + Duration::from_secs(5)),
            ..Default::default()
        };
        let block_ms = u64::try_from(nap.as_millis()).unwrap_or(u64::MAX).max(1);
        let count = u64::try_from(max.max(1)).unwrap_or(u64::MAX);
        let xread = async {
            match client
                .with_options(&options)
                .xread::<RValue, _, _>(Some(count), Some(block_ms), key.clone(), after.to_owned())
                .await
            {
                Ok(reply) => woken_events(reply, after, &key),
                // fred reports a nil reply (nothing appended in time) as a timeout.
                Err(e) if *e.kind() == ErrorKind::Timeout => Ok(None),
                Err(e) => Err(classify("task_events", &key, e)),
            }
        };
        self.inner.circuit.guard("task_events", &key, xread).await
    }

    async fn queue_retention(&self, name: &str) -> Result<Retention> {
        let k = self.inner.keys.queue(name).retention;
        let values: Vec<RValue> = self
            .command(
                "queue_retention",
                &k,
                self.client().hmget(&k, RETENTION_FIELDS.to_vec()),
            )
            .await?;
        let mut r = Retention::default();
        let defaults = retention_values(&r);
        let v: Vec<u64> = (0..6)
            .map(|i| {
                values
                    .get(i)
                    .and_then(to_i64)
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(defaults[i])
            })
            .collect();
        r.completed = Keep::new(v[0], Duration::from_millis(v[1]));
        r.failed = Keep::new(v[2], Duration::from_millis(v[3]));
        r.events = Keep::new(v[4], Duration::from_millis(v[5]));
        Ok(r)
    }

    async fn queue_set_retention(&self, name: &str, retention: Retention) -> Result<()> {
        let k = self.inner.keys.queue(name).retention;
        let pairs: Vec<(&str, i64)> = RETENTION_FIELDS
            .iter()
            .zip(retention_values(&retention))
            .map(|(f, v)| (*f, i64::try_from(v).unwrap_or(i64::MAX)))
            .collect();
        // One HSET of every field: a re-send writes the same again.
        self.command(
            "queue_set_retention",
            &k,
            self.client().hset::<RValue, _, _>(&k, pairs),
        )
        .await?;
        Ok(())
    }

    async fn task_maintain(&self, name: &str, max: usize) -> Result<u64> {
        let qk = self.inner.keys.queue(name);
        let n = self
            .eval_i64(
                "queue_maintain",
                &qk.tasks,
                &self.inner.scripts.task_maintain,
                qk.all(),
                // A cluster deployment never shares its queues with the seed (ADR 0380).
                vec![int(max), text(if self.cluster_layout() { "" } else { "1" })],
            )
            .await?;
        Ok(n.max(0) as u64)
    }

    fn max_result_bytes(&self) -> usize {
        self.inner.max_result_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, task: &str, prev: &str) -> RValue {
        let fields = [
            "id",
            task,
            "s",
            "completed",
            "a",
            "1",
            "t",
            "1.5",
            "p",
            prev,
        ]
        .into_iter()
        .map(RValue::from)
        .collect::<Vec<_>>();
        RValue::Array(vec![RValue::from(id), RValue::Array(fields)])
    }

    fn xread(entries: Vec<RValue>) -> RValue {
        RValue::Array(vec![RValue::Array(vec![
            RValue::from("q:events"),
            RValue::Array(entries),
        ])])
    }

    #[test]
    fn a_wake_answers_only_an_unbroken_chain_from_the_cursor() {
        let read = woken_events(
            xread(vec![entry("5-0", "a", "4-0"), entry("6-0", "b", "5-0")]),
            "4-0",
            "k",
        )
        .expect("parses")
        .expect("follows the cursor");
        let ids: Vec<_> = read.events.iter().map(|e| e.task_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(read.cursor, "6-0");
        assert!(!read.gap);
        // A trim removed the events between the cursor and the first one read: the front must
        // read again with the script, which reports the gap.
        let broken = woken_events(xread(vec![entry("9-0", "c", "8-0")]), "4-0", "k");
        assert!(broken.expect("parses").is_none());
        let middle = woken_events(
            xread(vec![entry("5-0", "a", "4-0"), entry("9-0", "c", "8-0")]),
            "4-0",
            "k",
        );
        assert!(middle.expect("parses").is_none());
        assert!(
            woken_events(RValue::Null, "4-0", "k")
                .expect("nil")
                .is_none()
        );
    }
}
