//! Every Redis key of the fleet backend, built in one place.
//!
//! The seed's layout (fleet-framework 0.1.0) behind an optional prefix (empty by default), with
//! every name segment escaped like Python's `quote(s, safe="")` (the seed joined raw names), so a name holding
//! `:` can never reach another name's keys. Keys marked "extra" hold state the seed does not
//! have; the seed never reads them.
//!
//! The [`KeyLayout::Cluster`] layout (ADR 0096) is the same keys with the owner's name segment
//! replaced by a hash tag — `{q:<name>}` for a queue, `{p:…}` pool, `{l:…}` lock, `{s:…}` stream,
//! `{w:<automation type>}` for a type's workers and their registry set — so every script and
//! `MGET` touches one slot. The tag always holds its marker (never empty), and the name inside it
//! is escaped with `quote`, which escapes `{` and `}`: a hostile name cannot close the tag early
//! or open another. Single-key data (KV, counters, the catalog) keeps the seed's keys.

use switchyard_redis_support::keys::{hash_tag, quote, unquote};

/// Which key layout a backend uses: the Redis adapters' one layout (ADR 0172).
/// [`KeyLayout::Seed`] is the seed's keys, shared with Python fleet-framework services;
/// [`KeyLayout::Cluster`] tags each owner for Redis Cluster.
pub use switchyard_redis_support::KeyLayout;

/// Key builder for one prefix and layout.
#[derive(Debug, Clone)]
pub struct FleetKeys {
    prefix: String,
    layout: KeyLayout,
}

/// The keys of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    /// `fleet:queue:{name}:high` LIST
    pub high: String,
    /// `fleet:queue:{name}` LIST
    pub normal: String,
    /// `fleet:queue:{name}:low` LIST
    pub low: String,
    /// `fleet:queue:{name}:processing` ZSET receipt → deadline
    pub processing: String,
    /// `fleet:queue:{name}:processing:body` HASH receipt → body
    pub processing_body: String,
    /// extra: `fleet:queue:{name}:processing:meta` HASH receipt → `tier|attempt|identity`; the
    /// identity is empty when no attempt count was stored (derived from the body when needed)
    pub processing_meta: String,
    /// `fleet:queue:{name}:scheduled` ZSET body → ready_at, the seed's form: delayed tasks of the
    /// normal tier whose body is not scheduled already (ADR 0061)
    pub scheduled: String,
    /// extra: `fleet:queue:{name}:scheduled:body` HASH `{tier}:{token}` → body, the bodies of the
    /// members of `scheduled_own`
    pub scheduled_body: String,
    /// extra: `fleet:queue:{name}:scheduled:own` ZSET `{tier}:{token}` → ready_at: the delayed
    /// tasks the seed's form cannot hold (another tier, or a body already scheduled)
    pub scheduled_own: String,
    /// extra: `fleet:queue:{name}:attempts` HASH task identity → deliveries
    pub attempts: String,
    /// `fleet:queue:{name}:dead` LIST
    pub dead: String,
    /// extra: `fleet:queue:{name}:wake` LIST of wake-up tokens for blocked reservers
    pub wake: String,
    /// extra: `fleet:queue:{name}:progress` HASH receipt → the delivery's last progress document
    pub progress: String,
    /// extra: `fleet:queue:{name}:paused` STRING `1` while reservations are paused
    pub paused: String,
    /// extra: `fleet:queue:{name}:rate` HASH `max`, `per_ms`, `tokens`, `at` (server seconds of
    /// `tokens`): the queue's token bucket
    pub rate: String,
    /// extra: `fleet:queue:{name}:tasks` HASH task id → its record
    /// `state|tier|attempt|max|submitted|started|finished|flags|loc` (ADR 0380; `flags`: `c`
    /// cancel requested, `e` an error stored, `d` the delivery has progress, `g` a progress
    /// kept; `loc` is our receipt while running, the `scheduled:own` member or `s` (the seed's
    /// form) while scheduled)
    pub tasks: String,
    /// extra: `fleet:queue:{name}:task:body` HASH task id → body while scheduled, waiting or
    /// running (what a cancel removes from its tier or set)
    pub task_body: String,
    /// extra: `fleet:queue:{name}:task:result` HASH task id → the result its ack stored
    pub task_result: String,
    /// extra: `fleet:queue:{name}:task:error` HASH task id → its last error
    pub task_error: String,
    /// extra: `fleet:queue:{name}:task:progress` HASH task id → the last progress of its latest
    /// delivery, kept after the delivery
    pub task_progress: String,
    /// extra: `fleet:queue:{name}:done:ok` ZSET task id → finished_at of completed records
    pub done_ok: String,
    /// extra: `fleet:queue:{name}:done:bad` ZSET task id → finished_at of failed and cancelled
    /// records
    pub done_bad: String,
    /// extra: `fleet:queue:{name}:done:dead` ZSET task id → finished_at of dead records
    pub done_dead: String,
    /// extra: `fleet:queue:{name}:task:live` STRING the `HSCAN` cursor of the seed reconcile's
    /// walk over live records (ADR 0380, section 7; written by `queue_maintain` on the seed
    /// layout only)
    pub task_live: String,
    /// extra: `fleet:queue:{name}:events` STREAM the end-event log
    pub events: String,
    /// extra: `fleet:queue:{name}:ends` HASH `completed`, `failed`, `dead`, `cancelled` → count
    pub ends: String,
    /// extra: `fleet:queue:{name}:retention` HASH `ok_n`, `ok_ms`, `bad_n`, `bad_ms`, `ev_n`,
    /// `ev_ms` (unset: the defaults)
    pub retention: String,
}

impl QueueKeys {
    /// The op record of the call with `token` (see [`FleetKeys::queue_op`]).
    pub fn op(&self, token: &str) -> String {
        format!("{}:op:{token}", self.normal)
    }

    /// [`QueueKeys::all`] and the op record of the call with `token`: the KEYS of every queue
    /// script that changes state.
    pub fn with_op(&self, token: &str) -> Vec<String> {
        let mut keys = self.all();
        keys.push(self.op(token));
        keys
    }

    /// The KEYS array every queue script takes.
    pub fn all(&self) -> Vec<String> {
        vec![
            self.high.clone(),
            self.normal.clone(),
            self.low.clone(),
            self.processing.clone(),
            self.processing_body.clone(),
            self.processing_meta.clone(),
            self.scheduled.clone(),
            self.scheduled_body.clone(),
            self.attempts.clone(),
            self.dead.clone(),
            self.wake.clone(),
            self.scheduled_own.clone(),
            self.progress.clone(),
            self.paused.clone(),
            self.rate.clone(),
            self.tasks.clone(),
            self.task_body.clone(),
            self.task_result.clone(),
            self.task_error.clone(),
            self.task_progress.clone(),
            self.done_ok.clone(),
            self.done_bad.clone(),
            self.done_dead.clone(),
            self.task_live.clone(),
            self.events.clone(),
            self.ends.clone(),
            self.retention.clone(),
        ]
    }
}

impl FleetKeys {
    /// Seed-layout keys under `prefix` (empty for the seed's exact layout).
    pub fn new(prefix: impl Into<String>) -> Self {
        FleetKeys {
            prefix: prefix.into(),
            layout: KeyLayout::Seed,
        }
    }

    /// Keys under `prefix` in `layout`. A cluster layout refuses a prefix holding `{` or `}`: the
    /// prefix comes first in every key, so its braces would decide the slot instead of the owner's
    /// tag (and `{}` would disable it).
    pub fn with_layout(
        prefix: impl Into<String>,
        layout: KeyLayout,
    ) -> switchyard_core::Result<Self> {
        let prefix = prefix.into();
        let layout = KeyLayout::resolve(Some(layout), false, &prefix, &crate::LAYOUT_RULES)?;
        Ok(FleetKeys { prefix, layout })
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The layout.
    pub fn layout(&self) -> KeyLayout {
        self.layout
    }

    /// The owner segment: `quote(name)` on the seed layout, `{<marker>:quote(name)}` on the cluster
    /// layout.
    fn owner(&self, marker: &str, name: &str) -> String {
        match self.layout {
            KeyLayout::Seed => quote(name),
            KeyLayout::Cluster => hash_tag(marker, name),
        }
    }

    /// `fleet:kv:{ns}:{key}` STRING
    pub fn kv(&self, ns: &str, key: &str) -> String {
        format!("{}fleet:kv:{}:{}", self.prefix, quote(ns), quote(key))
    }

    /// `fleet:pool:{name}` HASH id → `{"p": b64, "t": tags, "x": expires_at|null}`
    pub fn pool(&self, name: &str) -> String {
        format!("{}fleet:pool:{}", self.prefix, self.owner("p", name))
    }

    /// extra: `fleet:pool:{name}:expiry` ZSET id → expires_at (-1 for never)
    pub fn pool_expiry(&self, name: &str) -> String {
        format!("{}:expiry", self.pool(name))
    }

    /// `fleet:pool:{name}:claim:` — the claim key of item `id` is this plus `quote(id)`.
    pub fn pool_claim_prefix(&self, name: &str) -> String {
        format!("{}:claim:", self.pool(name))
    }

    /// `fleet:pool:{name}:claim:{id}` STRING claim token with PX
    pub fn pool_claim(&self, name: &str, id: &str) -> String {
        format!("{}{}", self.pool_claim_prefix(name), quote(id))
    }

    /// `fleet:lock:{name}` STRING token with PX
    pub fn lock(&self, name: &str) -> String {
        format!("{}fleet:lock:{}", self.prefix, self.owner("l", name))
    }

    /// extra: `fleet:lock:{name}:fence` STRING fencing counter
    pub fn lock_fence(&self, name: &str) -> String {
        format!("{}:fence", self.lock(name))
    }

    /// `fleet:counter:{name}` STRING integer
    pub fn counter(&self, name: &str) -> String {
        format!("{}fleet:counter:{}", self.prefix, quote(name))
    }

    /// The keys of queue `name`.
    pub fn queue(&self, name: &str) -> QueueKeys {
        let base = format!("{}fleet:queue:{}", self.prefix, self.owner("q", name));
        QueueKeys {
            high: format!("{base}:high"),
            low: format!("{base}:low"),
            processing: format!("{base}:processing"),
            processing_body: format!("{base}:processing:body"),
            processing_meta: format!("{base}:processing:meta"),
            scheduled: format!("{base}:scheduled"),
            scheduled_body: format!("{base}:scheduled:body"),
            scheduled_own: format!("{base}:scheduled:own"),
            progress: format!("{base}:progress"),
            paused: format!("{base}:paused"),
            rate: format!("{base}:rate"),
            attempts: format!("{base}:attempts"),
            dead: format!("{base}:dead"),
            wake: format!("{base}:wake"),
            tasks: format!("{base}:tasks"),
            task_body: format!("{base}:task:body"),
            task_result: format!("{base}:task:result"),
            task_error: format!("{base}:task:error"),
            task_progress: format!("{base}:task:progress"),
            done_ok: format!("{base}:done:ok"),
            done_bad: format!("{base}:done:bad"),
            done_dead: format!("{base}:done:dead"),
            task_live: format!("{base}:task:live"),
            events: format!("{base}:events"),
            ends: format!("{base}:ends"),
            retention: format!("{base}:retention"),
            normal: base,
        }
    }

    /// What every key of every queue starts with: `fleet:queue:` behind the prefix.
    pub fn queue_stem(&self) -> String {
        format!("{}fleet:queue:", self.prefix)
    }

    /// The queue a key found under [`FleetKeys::queue_stem`] holds tasks of: `Some(name)` for a
    /// tier list, the processing set, the scheduled set or the dead-letter list; `None` for
    /// bookkeeping keys (op records, attempts, wake-ups, bodies beside their sets) and for keys
    /// of another layout or prefix.
    pub fn queue_of_key(&self, key: &str) -> Option<String> {
        let rest = key.strip_prefix(&self.queue_stem())?;
        let (owner, suffix) = match self.layout {
            // `quote` escapes `:`, so the owner segment ends at the first one.
            KeyLayout::Seed => rest.split_once(':').unwrap_or((rest, "")),
            // `{q:<quote(name)>}`: `quote` escapes `}` too.
            KeyLayout::Cluster => {
                let inner = rest.strip_prefix("{q:")?;
                let close = inner.find('}')?;
                let suffix = &inner[close + 1..];
                (&inner[..close], suffix.strip_prefix(':').unwrap_or(suffix))
            }
        };
        if !matches!(
            suffix,
            "" | "high" | "low" | "processing" | "scheduled" | "scheduled:own" | "dead"
        ) {
            return None;
        }
        unquote(owner).map(|name| name.into_owned())
    }

    /// extra: `fleet:queue:{name}:op:{token}` STRING (a LIST for `dlq_pop`), with PX: the reply
    /// of one applied queue call, so a re-send of it applies nothing again (ADR 0140). In the
    /// queue's slot on the cluster layout.
    pub fn queue_op(&self, queue: &str, token: &str) -> String {
        self.queue(queue).op(token)
    }

    /// `stream:{name}` ZSET envelope → score (unprefixed in the seed)
    pub fn stream(&self, name: &str) -> String {
        format!("{}stream:{}", self.prefix, self.owner("s", name))
    }

    /// `event:{topic}` pub/sub channel
    pub fn channel(&self, topic: &str) -> String {
        format!("{}event:{}", self.prefix, quote(topic))
    }

    /// extra: `fleet:schedules` HASH schedule name (raw) → document: the recurring schedules
    /// (ADR 0287). One key, so one slot on a cluster.
    pub fn schedules(&self) -> String {
        format!("{}fleet:schedules", self.prefix)
    }

    /// `fleet:catalog` HASH automation_type → JSON doc
    pub fn catalog(&self) -> String {
        format!("{}fleet:catalog", self.prefix)
    }

    /// `wkr:{at}:{wid}:{field}` (hardware, config, gen, stats STRING; state HASH;
    /// stats:history ZSET). Cluster: `wkr:{w:<at>}:{wid}:{field}`, in the slot of the type set.
    pub fn worker(&self, at: &str, wid: &str, field: &str) -> String {
        format!(
            "{}wkr:{}:{}:{field}",
            self.prefix,
            self.owner("w", at),
            quote(wid)
        )
    }

    /// `wkrs:{at}` SET of worker ids. Cluster: `wkrs:{w:<at>}`.
    pub fn workers_of(&self, at: &str) -> String {
        format!("{}wkrs:{}", self.prefix, self.owner("w", at))
    }

    /// Cluster only: `wkrs:{r}:types` SET of quoted automation types that ever had a worker, the
    /// index `worker_list(None)` walks instead of `wkrs:all` (which would span slots).
    pub fn worker_types(&self) -> String {
        format!("{}wkrs:{{r}}:types", self.prefix)
    }

    /// Cluster only: the idempotency record of `queue_submit_once`, in the queue's slot:
    /// `fleet:queue:{q:<name>}:idem:{ns}:{key}`.
    pub fn queue_idem(&self, queue: &str, ns: &str, key: &str) -> String {
        format!(
            "{}:idem:{}:{}",
            self.queue(queue).normal,
            quote(ns),
            quote(key)
        )
    }

    /// `wkrs:all` SET of `{at}|{wid}`, both quoted so `|` splits unambiguously
    pub fn workers_all(&self) -> String {
        format!("{}wkrs:all", self.prefix)
    }

    /// The `wkrs:all` member of a worker.
    pub fn all_member(at: &str, wid: &str) -> String {
        format!("{}|{}", quote(at), quote(wid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_name_their_queue() {
        for layout in [KeyLayout::Seed, KeyLayout::Cluster] {
            let keys = FleetKeys::with_layout("p:", layout).expect("layout");
            for name in ["jobs", "a:b", "{x}", "caf\u{e9} %"] {
                let q = keys.queue(name);
                for key in [
                    &q.high,
                    &q.normal,
                    &q.low,
                    &q.processing,
                    &q.scheduled,
                    &q.scheduled_own,
                    &q.dead,
                ] {
                    assert_eq!(keys.queue_of_key(key).as_deref(), Some(name), "{key}");
                }
                for key in [
                    &q.processing_body,
                    &q.attempts,
                    &q.wake,
                    &q.progress,
                    &q.paused,
                    &q.rate,
                    &q.tasks,
                    &q.task_body,
                    &q.events,
                    &q.done_ok,
                    &q.retention,
                    &q.op("t"),
                ] {
                    assert_eq!(keys.queue_of_key(key), None, "{key}");
                }
            }
            assert_eq!(
                keys.queue_of_key("fleet:queue:jobs"),
                None,
                "another prefix"
            );
        }
    }
}
