//! Every Redis key of the fleet backend, built in one place.
//!
//! The seed's layout (fleet-framework 0.1.0) behind an optional prefix (empty by default), with
//! every name segment escaped like Python's `quote(s, safe="")` (fleet flaw W6), so a name holding
//! `:` can never reach another name's keys. Keys marked "extra" hold state the seed does not
//! have; the seed never reads them.

use switchyard_core::keys::quote;

/// Key builder for one prefix.
#[derive(Debug, Clone)]
pub struct FleetKeys {
    prefix: String,
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
    /// extra: `fleet:queue:{name}:processing:meta` HASH receipt → tier code + task identity
    pub processing_meta: String,
    /// `fleet:queue:{name}:scheduled` ZSET `{tier}:{receipt}` → ready_at
    pub scheduled: String,
    /// extra: `fleet:queue:{name}:scheduled:body` HASH `{tier}:{receipt}` → body
    pub scheduled_body: String,
    /// extra: `fleet:queue:{name}:attempts` HASH task identity → deliveries
    pub attempts: String,
    /// `fleet:queue:{name}:dead` LIST
    pub dead: String,
    /// extra: `fleet:queue:{name}:wake` LIST of wake-up tokens for blocked reservers
    pub wake: String,
}

impl QueueKeys {
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
        ]
    }
}

impl FleetKeys {
    /// Keys under `prefix` (empty for the seed's exact layout).
    pub fn new(prefix: impl Into<String>) -> Self {
        FleetKeys {
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `fleet:kv:{ns}:{key}` STRING
    pub fn kv(&self, ns: &str, key: &str) -> String {
        format!("{}fleet:kv:{}:{}", self.prefix, quote(ns), quote(key))
    }

    /// `fleet:pool:{name}` HASH id → `{"p": b64, "t": tags, "x": expires_at|null}`
    pub fn pool(&self, name: &str) -> String {
        format!("{}fleet:pool:{}", self.prefix, quote(name))
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
        format!("{}fleet:lock:{}", self.prefix, quote(name))
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
        let base = format!("{}fleet:queue:{}", self.prefix, quote(name));
        QueueKeys {
            high: format!("{base}:high"),
            low: format!("{base}:low"),
            processing: format!("{base}:processing"),
            processing_body: format!("{base}:processing:body"),
            processing_meta: format!("{base}:processing:meta"),
            scheduled: format!("{base}:scheduled"),
            scheduled_body: format!("{base}:scheduled:body"),
            attempts: format!("{base}:attempts"),
            dead: format!("{base}:dead"),
            wake: format!("{base}:wake"),
            normal: base,
        }
    }

    /// `stream:{name}` ZSET envelope → score (unprefixed in the seed)
    pub fn stream(&self, name: &str) -> String {
        format!("{}stream:{}", self.prefix, quote(name))
    }

    /// `event:{topic}` pub/sub channel
    pub fn channel(&self, topic: &str) -> String {
        format!("{}event:{}", self.prefix, quote(topic))
    }

    /// `fleet:catalog` HASH automation_type → JSON doc
    pub fn catalog(&self) -> String {
        format!("{}fleet:catalog", self.prefix)
    }

    /// `wkr:{at}:{wid}:{field}` (hardware, config, gen, stats STRING; state HASH;
    /// stats:history ZSET)
    pub fn worker(&self, at: &str, wid: &str, field: &str) -> String {
        format!("{}wkr:{}:{}:{field}", self.prefix, quote(at), quote(wid))
    }

    /// `wkrs:{at}` SET of worker ids
    pub fn workers_of(&self, at: &str) -> String {
        format!("{}wkrs:{}", self.prefix, quote(at))
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
