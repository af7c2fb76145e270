//! The key layout: the seed's six families plus this store's claim index and op receipts.
//!
//! Every segment is escaped like Python's `quote(s, safe="")`, so no id can forge a `:`.

use switchyard_core::keys::quote;

/// The seed's default prefix.
pub const DEFAULT_PREFIX: &str = "agentdeck:events";

/// Builds every key of the store from one prefix.
#[derive(Debug, Clone)]
pub struct KeySpace {
    prefix: String,
}

/// The keys of one run of one log, in the order the append script takes them.
#[derive(Debug, Clone)]
pub(crate) struct RunKeys {
    pub log: String,
    pub run: String,
    pub seq: String,
    pub life: String,
    pub logruns: String,
    pub runs: String,
    pub open: String,
    pub openlen: String,
    /// `"{esc(log)}:{esc(run)}"`, the member of the namespace's runs SET.
    pub member: String,
}

impl KeySpace {
    /// A key space under `prefix`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `P:log:{ns}:{log}` — LIST of every event of the log in append order.
    pub fn log(&self, ns: &str, log: &str) -> String {
        format!("{}:log:{}:{}", self.prefix, quote(ns), quote(log))
    }

    /// `P:run:{ns}:{log}:{run}` — LIST of one run's events (index = seq).
    pub fn run(&self, ns: &str, log: &str, run: &str) -> String {
        self.run_family("run", ns, log, run)
    }

    /// `P:seq:{ns}:{log}:{run}` — ZSET, member `str(seq)`, score `seq`.
    pub fn seq(&self, ns: &str, log: &str, run: &str) -> String {
        self.run_family("seq", ns, log, run)
    }

    /// `P:life:{ns}:{log}:{run}` — STRING, JSON of the run's latest lifecycle event.
    pub fn life(&self, ns: &str, log: &str, run: &str) -> String {
        self.run_family("life", ns, log, run)
    }

    /// `P:logruns:{ns}:{log}` — SET of unescaped run ids with a lifecycle event.
    pub fn logruns(&self, ns: &str, log: &str) -> String {
        format!("{}:logruns:{}:{}", self.prefix, quote(ns), quote(log))
    }

    /// `P:runs:{ns}` — SET of `"{esc(log)}:{esc(run)}"`.
    pub fn runs(&self, ns: &str) -> String {
        format!("{}:runs:{}", self.prefix, quote(ns))
    }

    /// `P:open:{ns}:{log}` — SET of unescaped ids of the log's open runs (not in the seed; ADR 0021).
    pub fn open(&self, ns: &str, log: &str) -> String {
        format!("{}:open:{}:{}", self.prefix, quote(ns), quote(log))
    }

    /// `P:openlen:{ns}:{log}` — STRING, how many log entries the open SET accounts for (ADR 0021).
    pub fn openlen(&self, ns: &str, log: &str) -> String {
        format!("{}:openlen:{}:{}", self.prefix, quote(ns), quote(log))
    }

    /// `P:op:{token}` — STRING receipt of one write, expiring (ADR 0022).
    pub fn op(&self, token: &str) -> String {
        format!("{}:op:{}", self.prefix, token)
    }

    /// The member of `P:runs:{ns}` for a run.
    pub fn member(log: &str, run: &str) -> String {
        format!("{}:{}", quote(log), quote(run))
    }

    fn run_family(&self, family: &str, ns: &str, log: &str, run: &str) -> String {
        format!(
            "{}:{family}:{}:{}:{}",
            self.prefix,
            quote(ns),
            quote(log),
            quote(run)
        )
    }

    pub(crate) fn for_run(&self, ns: &str, log: &str, run: &str) -> RunKeys {
        RunKeys {
            log: self.log(ns, log),
            run: self.run(ns, log, run),
            seq: self.seq(ns, log, run),
            life: self.life(ns, log, run),
            logruns: self.logruns(ns, log),
            runs: self.runs(ns),
            open: self.open(ns, log),
            openlen: self.openlen(ns, log),
            member: Self::member(log, run),
        }
    }
}

/// Splits a `P:runs:{ns}` member back into `(log_key, run_id)`.
pub(crate) fn split_member(member: &str) -> Option<(String, String)> {
    let (log, run) = member.split_once(':')?;
    let log = percent_encoding::percent_decode_str(log)
        .decode_utf8()
        .ok()?;
    let run = percent_encoding::percent_decode_str(run)
        .decode_utf8()
        .ok()?;
    Some((log.into_owned(), run.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_examples() {
        let k = KeySpace::new(DEFAULT_PREFIX);
        assert_eq!(
            k.run("a:b", "x/y z:1", "é~_.-"),
            "agentdeck:events:run:a%3Ab:x%2Fy%20z%3A1:%C3%A9~_.-"
        );
        assert_eq!(k.log("", "solo"), "agentdeck:events:log::solo");
        assert_eq!(KeySpace::member("solo", "solo"), "solo:solo");
        assert_eq!(
            split_member("x%2Fy%20z%3A1:%C3%A9~_.-"),
            Some(("x/y z:1".to_string(), "é~_.-".to_string()))
        );
    }
}
