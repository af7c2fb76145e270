//! The key layout: the seed's six families plus families of this store's own, which the seed
//! never reads: the claim index, op receipts and the lines of waiting runs (ADR 0394).
//!
//! Every segment is escaped like Python's `quote(s, safe="")`, so no id can forge a `:`, a `{` or
//! a `}`.
//!
//! Two layouts (ADR 0090). [`KeyLayout::Seed`] is the seed's, byte for byte. [`KeyLayout::Cluster`]
//! is the same keys with the namespace segment written as a Redis Cluster hash tag,
//! `{ns:<quote(ns)>}`, and the op receipts moved under it: every key a write, a claim, a line
//! call or a `list_runs` touches then hashes to the namespace's slot. The tag always holds the
//! fixed `ns:` marker, so even the null namespace (empty key) has a non-empty tag; and since
//! `quote` escapes `{` and `}`, no id can close the tag early or open another one before it.

use switchyard_redis_support::keys::{hash_tag, quote, unquote};

/// The seed's default prefix.
pub const DEFAULT_PREFIX: &str = "agentdeck:events";

/// Which key layout a store writes: the Redis adapters' one layout. [`KeyLayout::Seed`] is the
/// seed's keys; [`KeyLayout::Cluster`] tags every key with its namespace (ADR 0090).
pub use switchyard_redis_support::KeyLayout;

/// Builds every key of the store from one prefix.
#[derive(Debug, Clone)]
pub struct KeySpace {
    prefix: String,
    layout: KeyLayout,
}

/// The keys of one run of one log, in the order the append script takes them.
#[derive(Debug, Clone)]
pub(crate) struct RunKeys {
    /// The namespace key (unescaped), for the op receipt's key.
    pub ns: String,
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
    /// A key space under `prefix` in the seed's layout.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self::with_layout(prefix, KeyLayout::Seed)
    }

    /// A key space under `prefix` in `layout`.
    pub fn with_layout(prefix: impl Into<String>, layout: KeyLayout) -> Self {
        Self {
            prefix: prefix.into(),
            layout,
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The layout.
    pub fn layout(&self) -> KeyLayout {
        self.layout
    }

    /// The namespace segment: `quote(ns)`, or in the cluster layout the tag `{ns:quote(ns)}`.
    fn ns(&self, ns: &str) -> String {
        match self.layout {
            KeyLayout::Seed => quote(ns),
            KeyLayout::Cluster => hash_tag("ns", ns),
        }
    }

    /// `P:log:{ns}:{log}` — LIST of every event of the log in append order.
    pub fn log(&self, ns: &str, log: &str) -> String {
        format!("{}:log:{}:{}", self.prefix, self.ns(ns), quote(log))
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
        format!("{}:logruns:{}:{}", self.prefix, self.ns(ns), quote(log))
    }

    /// `P:runs:{ns}` — SET of `"{esc(log)}:{esc(run)}"`.
    pub fn runs(&self, ns: &str) -> String {
        format!("{}:runs:{}", self.prefix, self.ns(ns))
    }

    /// `P:open:{ns}:{log}` — SET of unescaped ids of the log's open runs (not in the seed; ADR 0021).
    pub fn open(&self, ns: &str, log: &str) -> String {
        format!("{}:open:{}:{}", self.prefix, self.ns(ns), quote(log))
    }

    /// `P:openlen:{ns}:{log}` — STRING, how many log entries the open SET accounts for (ADR 0021).
    pub fn openlen(&self, ns: &str, log: &str) -> String {
        format!("{}:openlen:{}:{}", self.prefix, self.ns(ns), quote(log))
    }

    /// `P:line:{ns}:{log}` — LIST of the runs waiting for the log's session, the head first,
    /// each a [`QueuedRun`](switchyard_core::store::QueuedRun) JSON object (not in the seed;
    /// ADR 0394). Beside the log, never in it, so a seed process reading the log sees no
    /// waiting run; in the cluster layout in the namespace's slot like the log's other keys.
    pub fn line(&self, ns: &str, log: &str) -> String {
        format!("{}:line:{}:{}", self.prefix, self.ns(ns), quote(log))
    }

    /// `P:op:{token}` — STRING receipt of one write, expiring (ADR 0022). In the cluster layout
    /// `P:op:{ns:<ns>}:{token}`, in the slot of the namespace the write goes to.
    pub fn op(&self, ns: &str, token: &str) -> String {
        match self.layout {
            KeyLayout::Seed => format!("{}:op:{}", self.prefix, token),
            KeyLayout::Cluster => format!("{}:op:{}:{}", self.prefix, self.ns(ns), token),
        }
    }

    /// The member of `P:runs:{ns}` for a run.
    pub fn member(log: &str, run: &str) -> String {
        format!("{}:{}", quote(log), quote(run))
    }

    fn run_family(&self, family: &str, ns: &str, log: &str, run: &str) -> String {
        format!(
            "{}:{family}:{}:{}:{}",
            self.prefix,
            self.ns(ns),
            quote(log),
            quote(run)
        )
    }

    /// Every key of one run. Each segment is escaped once (an append builds these on every call);
    /// the result equals the per-family functions above (`for_run_matches_the_family_functions`).
    pub(crate) fn for_run(&self, ns: &str, log: &str, run: &str) -> RunKeys {
        let p = &self.prefix;
        let n = self.ns(ns);
        let l = quote(log);
        let r = quote(run);
        let join = |parts: &[&str]| {
            let mut key = String::with_capacity(parts.iter().map(|s| s.len() + 1).sum());
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    key.push(':');
                }
                key.push_str(part);
            }
            key
        };
        RunKeys {
            ns: ns.to_string(),
            log: join(&[p, "log", &n, &l]),
            run: join(&[p, "run", &n, &l, &r]),
            seq: join(&[p, "seq", &n, &l, &r]),
            life: join(&[p, "life", &n, &l, &r]),
            logruns: join(&[p, "logruns", &n, &l]),
            runs: join(&[p, "runs", &n]),
            open: join(&[p, "open", &n, &l]),
            openlen: join(&[p, "openlen", &n, &l]),
            member: join(&[&l, &r]),
        }
    }
}

/// Splits a `P:runs:{ns}` member back into `(log_key, run_id)`.
pub(crate) fn split_member(member: &str) -> Option<(String, String)> {
    let (log, run) = member.split_once(':')?;
    let log = unquote(log)?;
    let run = unquote(run)?;
    Some((log.into_owned(), run.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_redis_support::keys::hashed_part;

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
        assert_eq!(k.op("ns", "t0"), "agentdeck:events:op:t0");
        assert_eq!(
            k.line("a:b", "x/y z:1"),
            "agentdeck:events:line:a%3Ab:x%2Fy%20z%3A1"
        );
    }

    #[test]
    fn for_run_matches_the_family_functions() {
        for layout in [KeyLayout::Seed, KeyLayout::Cluster] {
            let k = KeySpace::with_layout("p:x", layout);
            for (ns, log, run) in [("", "l", "r"), ("a:b", "x/y z:1", "é~_.-"), ("{", "}", "%")] {
                let rk = k.for_run(ns, log, run);
                assert_eq!(rk.ns, ns);
                assert_eq!(rk.log, k.log(ns, log));
                assert_eq!(rk.run, k.run(ns, log, run));
                assert_eq!(rk.seq, k.seq(ns, log, run));
                assert_eq!(rk.life, k.life(ns, log, run));
                assert_eq!(rk.logruns, k.logruns(ns, log));
                assert_eq!(rk.runs, k.runs(ns));
                assert_eq!(rk.open, k.open(ns, log));
                assert_eq!(rk.openlen, k.openlen(ns, log));
                assert_eq!(rk.member, KeySpace::member(log, run));
            }
        }
    }

    #[test]
    fn cluster_layout_tags_every_key_with_the_namespace() {
        let k = KeySpace::with_layout("p", KeyLayout::Cluster);
        assert_eq!(k.log("a:b", "l"), "p:log:{ns:a%3Ab}:l");
        assert_eq!(k.run("", "l", "r"), "p:run:{ns:}:l:r");
        assert_eq!(k.op("", "t0"), "p:op:{ns:}:t0");
        for ns in ["", "{", "}", "}{", "{x}", "%7B", "a:b", "é"] {
            let rk = k.for_run(ns, "{log}", "}{run");
            let want = format!("ns:{}", quote(ns));
            for key in [
                &rk.log,
                &rk.run,
                &rk.seq,
                &rk.life,
                &rk.logruns,
                &rk.runs,
                &rk.open,
                &rk.openlen,
                &k.op(ns, "tok"),
                &k.line(ns, "{log}"),
            ] {
                assert_eq!(hashed_part(key), want, "{key}");
            }
        }
        // Distinct namespaces never share a tag, whatever they contain.
        assert_ne!(hashed_part(&k.runs("%7B")), hashed_part(&k.runs("{")));
        assert_ne!(hashed_part(&k.runs("")), hashed_part(&k.runs("ns:")));
    }
}
