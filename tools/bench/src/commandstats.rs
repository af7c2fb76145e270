//! Redis server time per command, from `INFO commandstats`: what a Lua script costs the server,
//! and which of the commands it calls the time goes to. Commands a script calls are counted
//! under their own names, besides the script's `evalsha` line. A case reads the counters before
//! and after and keeps the difference ([`CommandStats::since`]): nothing is reset, so a server
//! given with `--url` keeps its statistics.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fred::prelude::{Client, ClientLike};
use fred::types::InfoKind;

use crate::measure::err;

/// One `cmdstat_<name>` line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Stat {
    pub calls: u64,
    pub usec: u64,
}

impl Stat {
    /// Server microseconds per call.
    pub fn usec_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.usec as f64 / self.calls as f64
        }
    }
}

/// Every command's line, by lower-case name (`evalsha`, `rpush`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CommandStats(pub BTreeMap<String, Stat>);

/// Parses the text of `INFO commandstats`; lines it does not understand are skipped.
pub(crate) fn parse(info: &str) -> CommandStats {
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line
            .trim()
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let mut stat = Stat::default();
        for field in fields.split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => stat.calls = v.parse().unwrap_or(0),
                Some(("usec", v)) => stat.usec = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        out.insert(name.to_ascii_lowercase(), stat);
    }
    CommandStats(out)
}

/// The counters now.
pub(crate) async fn read(client: &Client) -> Result<CommandStats, String> {
    let info: String = client
        .info(Some(InfoKind::CommandStats))
        .await
        .map_err(err)?;
    Ok(parse(&info))
}

impl CommandStats {
    /// The counters of `url`'s server now (`None` when it cannot be asked).
    pub async fn now(url: &str) -> Option<Self> {
        let client = crate::floor::client(url).await.ok()?;
        let stats = read(&client).await.ok();
        let _ = client.quit().await;
        stats
    }

    /// What happened between `before` and `self`: per command, the calls and microseconds added,
    /// without the commands that did not run and the `INFO` calls that read the counters.
    pub fn since(&self, before: &CommandStats) -> CommandStats {
        let mut out = BTreeMap::new();
        for (name, stat) in &self.0 {
            let was = before.0.get(name).copied().unwrap_or_default();
            let delta = Stat {
                calls: stat.calls.saturating_sub(was.calls),
                usec: stat.usec.saturating_sub(was.usec),
            };
            if delta.calls > 0 && !name.starts_with("info") {
                out.insert(name.clone(), delta);
            }
        }
        CommandStats(out)
    }

    /// "Redis per request: N commands (evalsha 1.0, …), M µs server time" of `requests` requests
    /// between `before` and `after`. Commands a script runs count as their own (and inside the
    /// script's time), as `INFO commandstats` counts them.
    pub fn per_request(before: Option<&Self>, after: Option<&Self>, requests: u64) -> String {
        let (Some(before), Some(after), true) = (before, after, requests > 0) else {
            return "Redis per request: unknown".into();
        };
        let delta = after.since(before);
        let n = requests as f64;
        let calls: u64 = delta.0.values().map(|s| s.calls).sum();
        let usec: u64 = delta.0.values().map(|s| s.usec).sum();
        let mut parts: Vec<(u64, String)> = delta
            .0
            .iter()
            .map(|(name, s)| (s.calls, format!("{name} {:.2}", s.calls as f64 / n)))
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let list: Vec<String> = parts.into_iter().take(6).map(|(_, s)| s).collect();
        format!(
            "Redis per request: {:.2} commands, those run by scripts included ({}), {:.1} µs \
             server time",
            calls as f64 / n,
            list.join(", "),
            usec as f64 / n
        )
    }

    /// The note of a case that ran `per_op` calls of `script_cmd` (e.g. `evalsha`): the script's
    /// server time per call, then each other command as calls per script call × µs per call.
    /// Commands of the bench's own bookkeeping (`config`, `info`) are left out.
    pub fn script_note(&self, script_cmd: &str) -> String {
        let Some(script) = self.0.get(script_cmd).filter(|s| s.calls > 0) else {
            return format!("no {script_cmd} calls in INFO commandstats");
        };
        let mut note = format!(
            "{script_cmd} {:.2} µs/call of Redis time ({} calls); inside, per call:",
            script.usec_per_call(),
            script.calls
        );
        let mut inner = 0.0;
        for (name, stat) in &self.0 {
            // Redis 7 counts subcommands on their own lines (`config|get`).
            let bookkeeping = name.starts_with("config") || name.starts_with("info");
            if name == script_cmd || bookkeeping || stat.calls == 0 {
                continue;
            }
            let per = stat.calls as f64 / script.calls as f64;
            inner += per * stat.usec_per_call();
            let _ = write!(note, " {name} {per:.2}×{:.2}", stat.usec_per_call());
        }
        let _ = write!(
            note,
            " µs (commands {inner:.2} µs, the rest Lua and script overhead)"
        );
        note
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=200,usec=3000,usec_per_call=15.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_rpush:calls=400,usec=160,usec_per_call=0.40,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_config|resetstat:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_zadd:calls=200,usec=200,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn parses_the_info_lines() {
        let stats = parse(INFO);
        assert_eq!(
            stats.0.get("evalsha"),
            Some(&Stat {
                calls: 200,
                usec: 3000
            })
        );
        assert_eq!(stats.0.len(), 4);
        assert!(parse("# Commandstats\r\nnot a line\r\n").0.is_empty());
    }

    #[test]
    fn the_note_breaks_the_script_down_per_call() {
        let note = parse(INFO).script_note("evalsha");
        assert!(note.starts_with("evalsha 15.00 µs/call"), "{note}");
        assert!(note.contains("rpush 2.00×0.40"), "{note}");
        assert!(note.contains("zadd 1.00×1.00"), "{note}");
        assert!(!note.contains("config"), "{note}");
        assert!(note.contains("commands 1.80 µs"), "{note}");
        assert_eq!(
            parse("").script_note("evalsha"),
            "no evalsha calls in INFO commandstats"
        );
    }

    #[test]
    fn per_request_divides_the_difference() {
        let before = parse("# Commandstats\r\ncmdstat_get:calls=2,usec=10,usec_per_call=5.00\r\n");
        let after = parse(
            "# Commandstats\r\ncmdstat_get:calls=6,usec=30,usec_per_call=5.00,rejected_calls=0\r\n\
             cmdstat_evalsha:calls=2,usec=40,usec_per_call=20.00\r\n\
             cmdstat_info:calls=9,usec=900,usec_per_call=100.00\r\n",
        );
        assert_eq!(
            CommandStats::per_request(Some(&before), Some(&after), 2),
            "Redis per request: 3.00 commands, those run by scripts included (get 2.00, evalsha \
             1.00), 30.0 µs server time"
        );
        assert_eq!(
            CommandStats::per_request(None, Some(&after), 2),
            "Redis per request: unknown"
        );
    }
}
