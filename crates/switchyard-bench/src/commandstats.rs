//! Redis server time per command, from `INFO commandstats`: what a Lua script costs the server,
//! and which of the commands it calls the time goes to. Commands a script calls are counted
//! under their own names, besides the script's `evalsha` line.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fred::prelude::{Client, ClientLike};
use fred::types::{ClusterHash, CustomCommand, InfoKind};

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

/// `CONFIG RESETSTAT`: the counters start from zero.
pub(crate) async fn reset(client: &Client) -> Result<(), String> {
    client
        .custom::<(), _>(
            CustomCommand::new_static("CONFIG", ClusterHash::Random, false),
            vec!["RESETSTAT"],
        )
        .await
        .map_err(err)
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
            // Redis 7 counts subcommands on their own lines (`config|resetstat`).
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
}
